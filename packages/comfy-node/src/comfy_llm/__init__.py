"""comfy-llm: multimodal language models inside ComfyUI workflows.

Importing this package is cheap: ComfyUI, torch and the engines load only
when the node runs. ComfyUI finds the node through :func:`comfy_entrypoint`.
"""

from __future__ import annotations

from comfy_llm._entrypoint import comfy_entrypoint
from comfy_llm._versions import __version__
from comfy_llm.errors import NodeError

__all__ = ["NodeError", "__version__", "comfy_entrypoint"]
