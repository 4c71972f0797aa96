"""What the worker bodies need from their container, behind small interfaces.

Volume commit/reload and ``stop_fetching_inputs`` exist only inside a Modal
container, so the stager and engine bodies take these interfaces and the
Modal functions pass the real ones; tests pass a directory-backed stand-in.
Progress goes through a :class:`ProgressChannel` for the same reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ..wire._modal_api import QueueWriter, VolumeHandle
from ..wire._plain import WireDict

__all__ = [
    "PROGRESS_TTL_SECONDS",
    "ContainerControl",
    "ModalContainerControl",
    "ModalQueueChannel",
    "ModalVolume",
    "VolumeStore",
]


@runtime_checkable
class VolumeStore(Protocol):
    """A shared Volume as one container sees it."""

    def commit(self) -> None:
        """Publish this container's writes to other containers."""
        ...

    def reload(self) -> None:
        """See the writes other containers committed since this one mounted."""
        ...


@runtime_checkable
class ContainerControl(Protocol):
    """The container's own lifecycle."""

    def stop_fetching_inputs(self) -> None:
        """Take no further inputs; the platform retires the container after this one."""
        ...


class ModalVolume:
    """A ``modal.Volume`` mounted in this container."""

    def __init__(self, volume: VolumeHandle) -> None:
        self._volume = volume

    def commit(self) -> None:
        """``Volume.commit()``."""
        self._volume.commit()

    def reload(self) -> None:
        """``Volume.reload()``."""
        self._volume.reload()


class ModalContainerControl:
    """``modal.experimental.stop_fetching_inputs`` for this container."""

    def stop_fetching_inputs(self) -> None:
        """Retire the container after the current input."""
        import modal.experimental

        modal.experimental.stop_fetching_inputs()


PROGRESS_TTL_SECONDS = 1800
"""A request's progress partition is cleared this long after its last put
(``partition_ttl``, modal/queue.py:650), so one nobody read does not linger."""


class ModalQueueChannel:
    """One partition (the request id) of a ``modal.Queue``."""

    def __init__(self, queue: QueueWriter, partition: str) -> None:
        self._queue = queue
        self._partition = partition

    def put_many(self, items: Sequence[WireDict]) -> None:
        """``Queue.put_many(block=False)`` into this request's partition.

        A blocking put on a full partition retries forever (max_retries=None,
        modal/queue.py:693) and would hold the GPU; non-blocking raises
        ``queue.Full`` at once (queue.py:719), which the sender counts.
        """
        if items:
            self._queue.put_many(
                list(items),
                block=False,
                partition=self._partition,
                partition_ttl=PROGRESS_TTL_SECONDS,
            )
