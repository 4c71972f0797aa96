"""The engine process's parent-death watch, armed as the process is spawned.

A host spawns children the way vLLM spawns EngineCore (multiprocessing's
spawn start method, v1/engine/utils.py:282-329), from the thread inside
``engine_process_scope`` and from another thread. Each child records whether
the watch was already running when its target began (it is armed while the
child unpickles its process object, before the target's module is imported),
then idles. The host is then SIGKILLed, as the OOM killer or
ComfyUI-Manager's restart would; with ``die-first`` it dies the moment its
children exist, before they got anywhere (the EngineCore that would then sit
in vLLM's 5-minute start-up handshake).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

WATCHED_HOST = """\
import multiprocessing
import os
import sys
import threading
import time

# What the target finds already loaded and running (the target itself imports nothing of it).
CHILD = (
    "import os, sys, time; watch = sys.modules.get('comfy_llm_backend_cuda.vllm._watch'); "
    "armed = watch is not None and watch._started.is_set(); "
    "open(os.environ['WATCHING'] + '-%s', 'w').write(str(armed)); time.sleep(3600)"
)


def spawn(name, into):
    child = multiprocessing.get_context("spawn").Process(target=exec, args=(CHILD % name,))
    child.start()
    into[name] = child.pid


if __name__ == "__main__":
    from comfy_llm_backend_cuda.vllm._process import engine_process_scope

    pids = {}
    with engine_process_scope({}):
        spawn("engine", pids)
        other = threading.Thread(target=spawn, args=("other", pids))
        other.start()
        other.join()
    print(pids["engine"], pids["other"], flush=True)
    if sys.argv[1] == "die-first":
        os._exit(0)
    time.sleep(3600)
"""


def _ended(process: object) -> bool:
    """Gone, or an orphan's zombie (nothing may reap it here)."""
    import psutil

    assert isinstance(process, psutil.Process)
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("when", ["after-the-watch-started", "die-first"])
def test_the_engine_process_dies_with_its_host_from_its_spawn(tmp_path: Path, when: str) -> None:
    import psutil

    script = tmp_path / "host.py"
    script.write_text(WATCHED_HOST)
    watching = tmp_path / "watching"
    host = subprocess.Popen(
        [sys.executable, str(script), when],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "WATCHING": str(watching)},
    )
    assert host.stdout is not None
    with host.stdout:
        engine, other = (psutil.Process(int(pid)) for pid in host.stdout.readline().split())
    flags = {name: Path(f"{watching}-{name}") for name in ("engine", "other")}
    try:
        if when != "die-first":
            deadline = time.monotonic() + 120  # imports take seconds on a loaded box
            while not all(flag.exists() for flag in flags.values()):
                assert time.monotonic() < deadline, "the children never started"
                time.sleep(0.1)
            # armed before the target ran, in the engine's process only
            assert {name: flag.read_text() for name, flag in flags.items()} == {
                "engine": "True",
                "other": "False",
            }
            assert not _ended(engine)  # its parent lives: the watch waits
            host.send_signal(signal.SIGKILL)
        host.wait(timeout=30)
        deadline = time.monotonic() + 60  # SIGTERM (PR_SET_PDEATHSIG, the poll) or exit
        while not _ended(engine) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _ended(engine)
        assert not _ended(other)  # another thread's child is not the engine's
    finally:
        if host.poll() is None:
            host.kill()
        for child in (engine, other):
            with contextlib.suppress(psutil.Error):
                child.kill()


def test_the_spawn_gets_its_own_target_back_and_the_pickle_carries_the_watch() -> None:
    from comfy_llm_backend_cuda.vllm import _watch

    class Spawned:  # what multiprocessing pickles: the process object's __dict__
        _target = staticmethod(len)

    spawned = Spawned()
    with _watch.watched_spawn(spawned):
        wrapped = spawned._target
        assert isinstance(wrapped, _watch.WatchedTarget)
        assert wrapped(()) == 0 and wrapped.parent == os.getpid()
        reduced = wrapped.__reduce__()
    assert spawned._target is len
    # unpickling calls _armed(parent) first: the watch, before the target is loaded
    assert reduced == (_watch._armed, (os.getpid(),), {"target": len})
    assert b"_armed" in pickle.dumps(wrapped)
