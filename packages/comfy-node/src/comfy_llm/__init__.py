"""comfy-llm: multimodal language models inside ComfyUI workflows.

Importing this package is cheap: ComfyUI, torch and the engines load only
when the node runs. ComfyUI finds the node through :func:`comfy_entrypoint`.
"""

from __future__ import annotations

import os

from comfy_llm._entrypoint import comfy_entrypoint
from comfy_llm._versions import __version__
from comfy_llm.errors import NodeError

__all__ = ["WEB_DIRECTORY", "NodeError", "__version__", "comfy_entrypoint"]

WEB_DIRECTORY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_comfyui", "web")
"""The frontend extension's folder (absolute): a custom_nodes entry re-exports it
as its own ``WEB_DIRECTORY``, and ComfyUI serves the ``.js`` files in it."""
