"""The progress stream between a worker and the dispatcher, as an interface.

Both ends speak it: a worker puts plain-data events into it, the client reads
the same partition. The Modal form (``ModalQueueChannel``) lives with the
worker; tests pass the stand-in's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ._plain import WireDict

__all__ = ["ProgressChannel"]


@runtime_checkable
class ProgressChannel(Protocol):
    """A per-request stream of plain-data progress events (worker → dispatcher)."""

    def put_many(self, items: Sequence[WireDict]) -> None:
        """Append events, in order, without blocking.

        Raises:
            queue.Full: The partition is full (the events were not added).
        """
        ...
