"""The extension ComfyUI loads: the list of this package's nodes."""

from __future__ import annotations

from comfy_api.latest import ComfyExtension, io

from comfy_llm._comfyui._caption_node import CaptionImagesNode
from comfy_llm._comfyui._modal_llm import ModalLLMNode

__all__ = ["ComfyLLMExtension", "build_extension"]


class ComfyLLMExtension(ComfyExtension):
    """The extension ComfyUI loads through ``comfy_entrypoint``."""

    async def get_node_list(self) -> list[type[io.ComfyNode]]:
        """List the nodes this package provides."""
        return [ModalLLMNode, CaptionImagesNode]


def build_extension() -> ComfyLLMExtension:
    """Create the extension object returned by ``comfy_entrypoint``."""
    return ComfyLLMExtension()
