"""The ``comfy-llm`` command line: the CLI's face of comfy-llm.

* ``_main``: the parser, the exit codes and the one error line.
* ``_run``, ``_caption``, ``_bench``: the subcommands with their own flags;
  ``_args``: what they share (schema files, image paths, the default model).
* ``_console``: progress on stderr. ``_link``: ``comfyui-link``.

It runs the same pipeline the nodes run and never imports ComfyUI.
"""

from comfy_llm._cli._main import EXIT_CODES, main

__all__ = ["EXIT_CODES", "main"]
