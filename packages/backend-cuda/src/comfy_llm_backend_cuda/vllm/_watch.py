"""The engine process dies with its host, from the moment it is spawned.

In vLLM 0.32 EngineCore has no parent-death watch (only TP workers have a
death pipe, v1/executor/multiproc_executor.py 725-737; upstream
vllm-project/vllm#55510). When ComfyUI is killed, OOM-killed or replaced by
ComfyUI-Manager's restart (no atexit runs), an orphaned EngineCore keeps its
VRAM and the next ComfyUI sees the GPU as taken.

A ``vllm.general_plugins`` entry point is not early enough: EngineCore loads
plugins in ``EngineCore.__init__`` (v1/engine/core.py:127-129), which runs
only after its start-up handshake with the host (``EngineCoreProc.__init__``
performs it first, core.py:1164-1170; ``startup_handshake`` waits up to
``HANDSHAKE_TIMEOUT_MINS`` = 5 minutes for the host's answer,
core.py:110,1372). An EngineCore whose host died just after spawning it
waits those 5 minutes, and it ignores SIGTERM meanwhile: ``run_engine_core``
installs a handler that only records the request while the engine is being
built (core.py:1451-1470).

So the watch travels with the spawn instead. While the host spawns its
engine process (:func:`._process.engine_process_scope` wraps the spawn's
``Popen._launch`` on the starting thread), the process object's target is
wrapped in :class:`WatchedTarget`. multiprocessing pickles the process
object to the child (multiprocessing/popen_spawn_posix.py ``_launch``), and
the child unpickles it first thing (multiprocessing/spawn.py ``_main``):
unpickling the wrapper arms the watch (:func:`watch_parent`) before the
target's own module, vLLM, is even imported. The watch

* asks the kernel for SIGTERM when the parent dies (Linux
  ``prctl(PR_SET_PDEATHSIG)``; the "parent" is the spawning thread, the
  engine's loop thread, which lives as long as the engine), and
* polls ``os.getppid()`` once a second on a daemon thread (reparenting is
  what every platform shows), sending itself SIGTERM when it changed and
  exiting outright if that did not end the process within 10 s (vLLM's
  handler defers SIGTERM until the engine is built; its orderly shutdown
  takes seconds).

Only the host's direct children are wrapped: vLLM's own worker processes
(spawned by EngineCore) are left alone. The driver frees the VRAM when the
process is gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Final

__all__ = ["WatchedTarget", "watched_spawn", "watch_parent"]

logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG: Final = 1
_POLL_SECONDS: Final = 1.0
_GRACE_SECONDS: Final = 10.0
_started = threading.Event()


class WatchedTarget:
    """A process target that arms :func:`watch_parent` as the child unpickles it.

    Calling it calls the wrapped target. Pickled, it is rebuilt by
    ``_armed(parent)`` before its target (and so the target's module) is
    unpickled: the watch runs from the child's first moments.
    """

    def __init__(self, parent: int, target: Callable[..., Any]) -> None:
        self.parent = parent
        self.target = target

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.target(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_armed, (self.parent,), {"target": self.target})

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.target = state["target"]


def _armed(parent: int) -> WatchedTarget:
    """Unpickling's first step in the child: watch ``parent``, then take the target."""
    watch_parent(parent)
    watched = WatchedTarget.__new__(WatchedTarget)
    watched.parent = parent
    return watched


@contextlib.contextmanager
def watched_spawn(process_obj: Any) -> Iterator[None]:
    """Spawn ``process_obj`` (a ``multiprocessing`` process) inside this block, watched.

    Its target is wrapped for the spawn only (the pickle is written inside
    the block); the host's object gets its own target back afterwards.
    """
    target = getattr(process_obj, "_target", None)
    if target is None:  # a subclass that overrides run(): nothing to wrap
        yield
        return
    process_obj._target = WatchedTarget(os.getpid(), target)
    try:
        yield
    finally:
        process_obj._target = target


def watch_parent(parent: int) -> None:
    """Terminate this process once ``parent`` is no longer its parent."""
    if _started.is_set():
        return
    _started.set()
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (OSError, AttributeError):
            logger.warning("PR_SET_PDEATHSIG is unavailable; polling the parent only")
    if os.getppid() != parent:  # it died before the watch was set
        _end()
        return
    threading.Thread(target=_poll, args=(parent,), name="comfy-llm-watch", daemon=True).start()


def _poll(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(_POLL_SECONDS)
    logger.warning("The process that started this vLLM engine (%d) is gone: exiting", parent)
    _end()


def _end() -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(_GRACE_SECONDS)
    os._exit(1)
