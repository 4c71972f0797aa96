"""How a Modal input is served in a container: one envelope out, preemption said, cancel held.

Every worker body (the engine's request, the caption chunk, the stager)
answers the same way, so the rule has one home:

* its value comes back as an ``ok`` envelope, and an ordinary error as an
  error envelope (the dispatcher rebuilds it; nothing is pickled);
* Modal's preemption arrives as SIGINT, ``KeyboardInterrupt`` in the body
  (modal/exception.py:300-305); the caller is told on the progress channel
  before the input is re-raised and Modal runs it again elsewhere
  (modal/_functions.py:487);
* a cancel during a cold model load waits for the load (:class:`CancelShield`).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType

from comfy_llm_core import ProgressCallback, ProgressEvent, ProgressStage

from ..wire._channel import ProgressChannel
from ..wire._plain import WireDict
from ..wire._wire import error_envelope, ok_envelope, say_preempted

__all__ = ["CancelShield", "serve_input"]

logger = logging.getLogger("comfy_llm_modal_remote")


def serve_input(
    body: Callable[[], WireDict],
    channel: ProgressChannel,
    *,
    what: str,
    container: str,
    before_preempted: Callable[[], None] | None = None,
) -> WireDict:
    """Run ``body``: its value enveloped, an ordinary error enveloped, a preemption said.

    Args:
        body: The input's work; returns the answer's plain data.
        channel: The request's progress partition.
        what: Names the input in the log line of a failure ("Request", "Chunk").
        container: Names the container in the preemption line ("GPU", "staging").
        before_preempted: Runs first when preempted (the stager flushes its events,
            so the preemption line comes after them).
    """
    try:
        value = body()
    except Exception as error:
        logger.info("%s failed: %s: %s", what, type(error).__name__, error)
        return error_envelope(error)
    except KeyboardInterrupt:  # Modal's preemption: the input runs again elsewhere
        if before_preempted is not None:
            before_preempted()
        say_preempted(channel, container)
        raise
    return ok_envelope(value)


class CancelShield:
    """Holds Modal's SIGUSR1 cancellation while a model load runs.

    Modal installs a SIGUSR1 handler that raises ``InputCancellation`` and
    cancels a sync input with ``os.kill(os.getpid(), SIGUSR1)``
    (modal/_container_entrypoint.py:250-260). Between the first LOAD event and
    the next stage's first event this swaps in a handler that only records
    the signal; :meth:`release` restores Modal's handler and, if a cancel
    came, runs it, so the cancellation surfaces once the manager owns the
    loaded model. Only the main thread can swap handlers; elsewhere (a test
    calling the body from a thread) nothing is held.
    """

    def __init__(self) -> None:
        self._saved: Callable[[int, FrameType | None], object] | None = None
        self._holding = False
        self._pending = False

    def relay(self, progress: ProgressCallback) -> ProgressCallback:
        """Wrap ``progress``: hold on LOAD, release (and raise) at the next stage."""

        def relayed(event: ProgressEvent) -> None:
            if event.stage is ProgressStage.LOAD:
                self._hold()
            elif self._holding:
                self.release(raise_pending=True)
            progress(event)

        return relayed

    def _hold(self) -> None:
        if self._holding or threading.current_thread() is not threading.main_thread():
            return
        saved = signal.getsignal(signal.SIGUSR1)
        if not callable(saved):
            return  # not in a Modal container: nothing raises on SIGUSR1
        self._saved = saved
        self._holding = True
        signal.signal(signal.SIGUSR1, self._record)

    def _record(self, signum: int, frame: FrameType | None) -> None:
        del signum, frame
        self._pending = True

    def release(self, *, raise_pending: bool) -> None:
        """Give SIGUSR1 back to Modal's handler; raise a held cancel when asked."""
        if self._holding and self._saved is not None:
            signal.signal(signal.SIGUSR1, self._saved)
            self._holding = False
        if raise_pending:
            self.raise_pending()

    def raise_pending(self) -> None:
        """Run Modal's handler for a cancel that arrived while held (it raises)."""
        if self._pending and self._saved is not None:
            self._pending = False
            self._saved(signal.SIGUSR1, None)
