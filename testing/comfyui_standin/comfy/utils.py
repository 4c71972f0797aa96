"""Stand-in for ``comfy.utils.ProgressBar`` (tests only), throttled as in ComfyUI 0.33.

Since ComfyUI 0.9 ``update_absolute`` sends a websocket ``progress`` message
only for the first update, a final one (value >= total), one with a preview,
or a forward move of at least ``PROGRESS_THROTTLE_MIN_PERCENT`` percent of the
total at least ``PROGRESS_THROTTLE_MIN_INTERVAL`` seconds after the last sent
message; anything else, a move backwards included, is dropped.

``calls`` records every call; ``updates`` records only what ComfyUI would send.
A test may set ``PROGRESS_THROTTLE_MIN_INTERVAL = 0`` to take time out of it.
"""

from __future__ import annotations

import time
from typing import Any

PROGRESS_THROTTLE_MIN_INTERVAL = 0.1
PROGRESS_THROTTLE_MIN_PERCENT = 0.5

calls: list[tuple[Any, float, float]] = []
updates: list[tuple[Any, float, float]] = []


class ProgressBar:
    def __init__(self, total: float, node_id: Any = None) -> None:
        self.total = total
        self.current = 0.0
        self.node_id = node_id
        self._last_sent_at = 0.0
        self._last_sent: float | None = None

    def update_absolute(
        self, value: float, total: float | None = None, preview: Any = None
    ) -> None:
        if total is not None:
            self.total = total
        value = min(value, self.total)
        self.current = value
        calls.append((self.node_id, value, self.total))
        now = time.perf_counter()
        if self._last_sent is None or value >= self.total or preview is not None:
            self._send(value, now)
            return
        moved = (value - max(0.0, self._last_sent)) / self.total * 100 if self.total else 100.0
        waited = now - self._last_sent_at
        if waited >= PROGRESS_THROTTLE_MIN_INTERVAL and moved >= PROGRESS_THROTTLE_MIN_PERCENT:
            self._send(value, now)

    def update(self, value: float) -> None:
        self.update_absolute(self.current + value)

    def _send(self, value: float, now: float) -> None:
        updates.append((self.node_id, value, self.total))
        self._last_sent_at = now
        self._last_sent = value
