"""The stand-in GPU containers' memory reading: fixed numbers that travel as data."""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["GIB", "FixedMemoryProbe"]

GIB = 1024**3


@dataclasses.dataclass
class FixedMemoryProbe:
    """A GPU-like device reading that never changes; its fields travel to the container as data.

    A small ``available_bytes`` models memory that does not come back after
    an eviction (the unsafe-worker path).
    """

    total_bytes: int = 80 * GIB
    available_bytes: int = 80 * GIB
    device: str = "cuda:0"

    def snapshot(self) -> Any:
        """The fixed reading (for a manager in the test process)."""
        from comfy_llm_residency import MemorySnapshot

        return MemorySnapshot(self.available_bytes, self.total_bytes, self.device)

    def clear_cache(self) -> None:
        """Nothing to clear."""
        return None

    def allocated_bytes(self) -> int | None:
        """Unknown: the manager falls back to the change of ``available_bytes``."""
        return None
