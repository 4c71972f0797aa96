"""This machine's side: deploy, dispatch one request, fan a caption job out, connect.

Private modules; the package root re-exports what siblings use. Imports
``wire`` and never ``worker``, except the deploy, which hands Modal the app
(``_transport`` → ``worker._app``, lazily, when it deploys).
"""
