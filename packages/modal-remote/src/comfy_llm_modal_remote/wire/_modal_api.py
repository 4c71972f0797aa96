"""The parts of Modal's objects this package calls, as protocols.

The worker writes progress into a ``modal.Queue`` partition, commits and
reloads a ``modal.Volume`` and keeps its stage leases in a ``modal.Dict``; the
strict stand-in hands the same code its own objects, so the code is typed
against these protocols rather than the classes. Each protocol is the real
client's signature narrowed to what crosses our wire (plain data, never a
pickle): the block under ``TYPE_CHECKING`` at the end makes mypy prove that
the installed ``modal`` 1.6.4 objects satisfy them (modal/queue.pyi
``__put_many_spec``, modal/volume.pyi ``__commit_spec``/``__reload_spec``,
modal/dict.pyi ``__get_spec``/``__put_spec``/``__pop_spec``), so a client
upgrade that changes a signature fails the type check, not a run on Modal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from ._plain import WireDict, WireValue

__all__ = ["DictStore", "QueueWriter", "VolumeHandle"]


class QueueWriter(Protocol):
    """``modal.Queue.put_many``: the worker's side of a progress partition."""

    def put_many(
        self,
        vs: list[WireDict],
        block: bool = True,
        timeout: float | None = None,
        *,
        partition: str | None = None,
        partition_ttl: int = 86400,
    ) -> None: ...


class VolumeHandle(Protocol):
    """``modal.Volume.commit`` / ``reload`` on a Volume this container mounts."""

    def commit(self) -> object: ...

    def reload(self) -> object: ...


class DictStore(Protocol):
    """``modal.Dict`` get/put/pop with string keys and plain-data values (the stage leases)."""

    def get(self, key: str, default: WireValue = None) -> WireValue: ...

    def put(self, key: str, value: WireValue, *, skip_if_exists: bool = False) -> bool: ...

    def pop(self, key: str, default: WireValue = None) -> WireValue: ...


if TYPE_CHECKING:  # mypy proves the real client's objects fit (no runtime import of modal)
    import modal

    def _real_objects_fit(
        queue: modal.Queue, volume: modal.Volume, store: modal.Dict
    ) -> Sequence[object]:
        fits: tuple[QueueWriter, VolumeHandle, DictStore] = (queue, volume, store)
        return fits
