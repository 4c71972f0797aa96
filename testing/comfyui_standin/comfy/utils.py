"""Stand-in for ``comfy.utils.ProgressBar`` (tests only): records updates."""

from __future__ import annotations

from typing import Any

updates: list[tuple[Any, float, float]] = []


class ProgressBar:
    def __init__(self, total: float, node_id: Any = None) -> None:
        self.total = total
        self.current = 0.0
        self.node_id = node_id

    def update_absolute(
        self, value: float, total: float | None = None, preview: Any = None
    ) -> None:
        if total is not None:
            self.total = total
        value = min(value, self.total)
        self.current = value
        updates.append((self.node_id, value, self.total))

    def update(self, value: float) -> None:
        self.update_absolute(self.current + value)
