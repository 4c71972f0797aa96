"""One chunk call of the fan-out, driven off the fan-out's loop thread.

``spawn`` uploads its arguments before it returns (a pickled chunk over 8 KiB
goes to blob storage first, modal/_utils/blob_utils.py:37-40: tens of MB for
96 images), and a Queue read or a ``cancel`` is a network round trip. None
of that may hold the loop that polls ComfyUI's Cancel and hands returned
chunks to the collector, so each call lives on its own daemon thread::

    encode the chunk's images (once; an unreadable image is that image's failure)
    spawn (the upload)                   → spawned_at
    follow: progress events → status    until the call is done
    done                                 → the loop takes the outcome

A cancel asked before the spawn returned is sent as soon as it returns.
:meth:`ChunkCall.cancel` never blocks the caller: the round trip runs on a
thread of its own. Everything the loop reads (``status``, the flags, the
outcome) is set before :attr:`done` is; the collector is only ever called by
the loop.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable

from comfy_llm_core import render_error

from ..wire._chunk_wire import ChunkImage
from ..wire._plain import WireDict
from ._fanout_job import FanOutImage
from ._transport import RemoteCall

__all__ = ["ChunkCall", "ChunkTask"]

_STATUS_WAIT_SECONDS = 0.5


@dataclasses.dataclass
class ChunkTask:
    """A chunk still to caption; ``attempt`` 1 is its one retry on another key."""

    chunk_id: int
    images: list[FanOutImage]
    attempt: int = 0
    avoid: str | None = None
    encoded: tuple[ChunkImage, ...] | None = None
    promotion: WireDict | None = None


def _cancel_quietly(call: RemoteCall) -> None:
    try:
        call.cancel()
    except Exception:  # the call ended meanwhile, or the network is gone: nothing to stop
        return


class ChunkCall:
    """One chunk on one worker key: encode, spawn, follow, all off the caller's thread.

    Args:
        key: The worker's affinity key.
        task: The chunk.
        start: Builds the request from the encoded images and spawns it
            (``transport.start_chunk``); it may block on the upload.
    """

    def __init__(
        self,
        key: str,
        task: ChunkTask,
        start: Callable[[ChunkTask], RemoteCall],
    ) -> None:
        self.key = key
        self.task = task
        self.status = f"chunk {task.chunk_id}: encoding"
        self.call: RemoteCall | None = None
        self.spawned_at: float | None = None
        self.finished_at: float | None = None
        self.error: BaseException | None = None
        """What encoding or the spawn raised (the call never started)."""
        self.unreadable: list[tuple[int, str]] = []
        """(image index, message) of images that could not be encoded."""
        self.encoded_here = False
        """This call encoded the chunk (a retry reuses the first call's bytes)."""
        self._start = start
        self._cancelled = threading.Event()
        self._lock = threading.Lock()
        self._done = threading.Event()
        threading.Thread(target=self._run, name=f"comfy-llm-chunk-{key}", daemon=True).start()

    @property
    def done(self) -> bool:
        """The call ended (or never started); its outcome can be read without waiting."""
        return self._done.is_set()

    @property
    def cancelled(self) -> bool:
        """:meth:`cancel` was asked."""
        return self._cancelled.is_set()

    def wait(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for :attr:`done`."""
        return self._done.wait(timeout)

    def cancel(self) -> None:
        """Cancel the remote call (now, or as soon as its spawn returns); never blocks."""
        with self._lock:
            self._cancelled.set()
            call = self.call
        if call is not None and not self.done:
            threading.Thread(target=_cancel_quietly, args=(call,), daemon=True).start()

    def _encode(self) -> None:
        task = self.task
        if task.encoded is not None:
            return
        encoded: list[ChunkImage] = []
        for image in task.images:
            try:
                encoded.append(image.encode())
            except (OSError, ValueError) as error:  # InputError is a ValueError
                self.unreadable.append((image.index, render_error(error)))
        kept = {e.index for e in encoded}
        task.images = [i for i in task.images if i.index in kept]
        task.encoded = tuple(encoded)
        self.encoded_here = True

    def _run(self) -> None:
        try:
            self._encode()
            if not self.task.encoded or self.cancelled:
                return
            self.status = f"chunk {self.task.chunk_id}: sending {len(self.task.encoded)} images"
            call = self._start(self.task)
            with self._lock:
                self.spawned_at = time.monotonic()
                self.call = call
                cancel_now = self.cancelled
            if cancel_now:
                _cancel_quietly(call)
            self.status = f"chunk {self.task.chunk_id}: waiting for the container"
            self._follow(call)
        except BaseException as error:  # handed to the loop
            self.error = error
        finally:
            self.finished_at = time.monotonic()
            self._done.set()

    def _follow(self, call: RemoteCall) -> None:
        while True:
            finished = call.done()
            for item in call.events(0.0 if finished else _STATUS_WAIT_SECONDS):
                message = item.get("message")
                if isinstance(message, str) and message:
                    self.status = message
            if finished:
                return
