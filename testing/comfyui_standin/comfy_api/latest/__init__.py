"""Stand-in for ``comfy_api.latest``: the extension base and ``io``."""

from __future__ import annotations

from abc import ABC, abstractmethod

from comfy_api.latest import _io as io


class ComfyExtension(ABC):
    """Same shape as ComfyUI's: an async node list."""

    async def on_load(self) -> None:
        """Called once when ComfyUI loads the extension."""

    @abstractmethod
    async def get_node_list(self) -> list[type[io.ComfyNode]]:
        """Return the node classes."""


IO = io
__all__ = ["IO", "ComfyExtension", "io"]
