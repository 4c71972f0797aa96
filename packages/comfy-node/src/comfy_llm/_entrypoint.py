"""The V3 entry point ComfyUI calls to discover the node."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from comfy_llm._comfyui._extension import ComfyLLMExtension

__all__ = ["comfy_entrypoint"]


async def comfy_entrypoint() -> ComfyLLMExtension:
    """Return the ComfyExtension that lists this package's nodes.

    ComfyUI imports ``comfy_api`` before custom nodes, so importing the node
    module here (not at package import) keeps the CLI free of ComfyUI.
    """
    from comfy_llm._comfyui._example_media import install_example_media
    from comfy_llm._comfyui._extension import build_extension
    from comfy_llm._comfyui._host_memory import host_bridge_status

    host_bridge_status()  # checks ComfyUI's model manager once; logs a fallback
    install_example_media()  # the video template's clip and notes, into input/
    return build_extension()
