"""The Modal side: the app, the GPU engine, the stager and its lease, the chunk worker.

Private modules; the package root re-exports what siblings use. Imports
``wire`` and never ``client``: a container needs nothing of the dispatcher.
"""
