"""The engine process dies with its host: a vLLM general plugin that watches the parent.

In vLLM 0.32 EngineCore has no parent-death watch (only TP workers have a
death pipe, v1/executor/multiproc_executor.py 725-737; upstream
vllm-project/vllm#55510). When ComfyUI is killed, OOM-killed or replaced by
ComfyUI-Manager's restart (no atexit runs), the orphaned EngineCore keeps its
VRAM and the next ComfyUI sees the GPU as taken.

vLLM loads every ``vllm.general_plugins`` entry point in each of its
processes, EngineCore included (v1/engine/core.py:129,
``load_general_plugins``). This one (``comfy_llm_backend_cuda`` declares
it in its pyproject) acts only in a process that multiprocessing spawned
from the process that set :data:`PARENT_PID_ENV` (the backend sets it for
the engine's spawn only, ``_engine.engine_variables``;
``multiprocessing.parent_process()`` names the spawner even when it is
already gone): the host itself and vLLM's own worker processes (spawned by
EngineCore) are left alone. There it

* asks the kernel for SIGTERM when the parent dies (Linux
  ``prctl(PR_SET_PDEATHSIG)``), and
* polls ``os.getppid()`` once a second on a daemon thread (reparenting is
  what every platform shows), sending itself SIGTERM when it changed and
  exiting outright if that did not end the process within 10 s.

vLLM's EngineCore turns SIGTERM into an orderly shutdown; the driver frees
the VRAM when the process is gone. Setting ``VLLM_PLUGINS`` to a list that
omits ``comfy_llm_engine_watch`` turns the watch off.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from typing import Final

from comfy_llm_core import env_str

__all__ = ["PARENT_PID_ENV", "register", "watch_parent"]

logger = logging.getLogger(__name__)

PARENT_PID_ENV: Final = "COMFY_LLM_ENGINE_PARENT_PID"
_PR_SET_PDEATHSIG: Final = 1
_POLL_SECONDS: Final = 1.0
_GRACE_SECONDS: Final = 10.0
_started = threading.Event()


def register() -> None:
    """The entry point vLLM calls in each of its processes (see the module docstring)."""
    raw = env_str(PARENT_PID_ENV) or ""
    spawner = multiprocessing.parent_process()
    if not raw.isdigit() or spawner is None or spawner.pid != int(raw) or _started.is_set():
        return
    watch_parent(int(raw))


def watch_parent(parent: int) -> None:
    """Terminate this process once ``parent`` is no longer its parent."""
    _started.set()
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (OSError, AttributeError):
            logger.warning("PR_SET_PDEATHSIG is unavailable; polling the parent only")
    if os.getppid() != parent:  # it died before the watch was set (imports take seconds)
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
