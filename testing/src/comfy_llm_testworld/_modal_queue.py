"""The progress ``modal.Queue`` of the strict stand-in: Modal's partition limits and TTL.

A partition holds at most 5,000 items and 64 MiB, an item at most 1 MiB
(queue.py:294-295); a put that would exceed either is refused whole (an item
too large is ``RequestSizeError``, queue.py:719-725); a partition is cleared
``partition_ttl`` seconds after its last put (queue.py:650). Puts fail like
the real client's when a test asks (:meth:`QueueService.fail_puts`): after
its retries ``put_many`` re-raises ``ConnectionError``, ``InternalError``, or
``NotFoundError`` for a deleted queue (queue.py:719-727). Lives in the test
process; containers reach it over their line (``_modal_container._QueueClient``).
"""

from __future__ import annotations

import collections
import pickle
import threading
import time
from typing import Any

__all__ = [
    "FAILURES",
    "MAX_ITEM_BYTES",
    "MAX_PARTITION_BYTES",
    "MAX_PARTITION_ITEMS",
    "QueueService",
]

MAX_PARTITION_ITEMS = 5000
MAX_PARTITION_BYTES = 64 * 1024 * 1024
MAX_ITEM_BYTES = 1024 * 1024
FAILURES = ("ConnectionError", "InternalError", "NotFoundError")


class QueueService:
    """The app's progress ``modal.Queue``: partitions with Modal's limits and TTL."""

    def __init__(self, *, max_items: int = MAX_PARTITION_ITEMS) -> None:
        self.max_items = max_items
        self.ttl_cap_seconds = float("inf")
        """Tests shorten time: a partition expires after min(its ttl, this)."""
        self._partitions: dict[str, collections.deque[tuple[int, Any]]] = {}
        self._bytes: dict[str, int] = {}
        self._touched: dict[str, float] = {}
        self._ttl: dict[str, float] = {}
        self._cond = threading.Condition()
        self._failures: list[str] = []
        self.failed_puts = 0

    def fail_puts(self, count: int, kind: str = "ConnectionError") -> None:
        """The next ``count`` puts fail as the client raises ``kind`` (one of :data:`FAILURES`)."""
        if kind not in FAILURES:
            raise ValueError(f"kind must be one of {FAILURES}, got {kind!r}")
        with self._cond:
            self._failures.extend([kind] * count)

    def _expire(self, now: float) -> None:
        for key in [k for k, t in self._touched.items() if now - t > self._ttl.get(k, 0)]:
            self._partitions.pop(key, None)
            self._bytes.pop(key, None)
            self._touched.pop(key, None)

    def put(self, partition: str, items: list[Any], ttl: float) -> str:
        """Append all or nothing: ``"ok"``, else why it is full, or ``"error:<Class>"``.

        The partition is cleared ``ttl`` seconds after this put unless another comes.
        """
        sizes = [len(pickle.dumps(item)) for item in items]  # Modal serializes each item
        with self._cond:
            if self._failures:
                self.failed_puts += 1
                return f"error:{self._failures.pop(0)}"
            if any(size > MAX_ITEM_BYTES for size in sizes):
                return "error:RequestSizeError"
            now = time.monotonic()
            self._expire(now)
            stored = self._partitions.setdefault(partition, collections.deque())
            if len(stored) + len(items) > self.max_items:
                return f"{len(stored)} items, limit {self.max_items}"
            if self._bytes.get(partition, 0) + sum(sizes) > MAX_PARTITION_BYTES:
                return f"{self._bytes.get(partition, 0)} bytes, limit {MAX_PARTITION_BYTES}"
            stored.extend(zip(sizes, items, strict=True))
            self._bytes[partition] = self._bytes.get(partition, 0) + sum(sizes)
            self._touched[partition] = now
            self._ttl[partition] = min(ttl, self.ttl_cap_seconds)
            self._cond.notify_all()
            return "ok"

    def get_many(self, partition: str, count: int, timeout: float) -> list[Any]:
        """Up to ``count`` items, waiting at most ``timeout`` for the first."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            self._expire(time.monotonic())
            while not self._partitions.get(partition):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                self._cond.wait(remaining)
            stored = self._partitions[partition]
            taken = [stored.popleft() for _ in range(min(count, len(stored)))]
            self._bytes[partition] -= sum(size for size, _ in taken)
            return [item for _, item in taken]

    def partition_size(self, partition: str) -> tuple[int, int]:
        """(items, bytes) held for ``partition``."""
        with self._cond:
            self._expire(time.monotonic())
            return len(self._partitions.get(partition, ())), self._bytes.get(partition, 0)
