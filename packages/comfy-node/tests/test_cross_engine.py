"""One scripted checkpoint, every in-process engine, the same answer through the CLI.

Transformers (``local_cpu``) and MLX-VLM (``local_apple`` through ``mlx[cpu]``)
run here. vLLM cannot live in the workspace venv (a declared conflict): the
vLLM tier's ``test_cli_scripted_answer_with_native_reasoning``
(packages/backend-cuda/vllm_tests) runs this very command line under
``.venv-vllm`` on its resident engine and asserts the same answer, token
counts and finish reason, so the three engines are held to one answer without
this suite starting a second vLLM engine of its own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from comfy_llm._cli import main
from comfy_llm_testworld import FakeHub

pytestmark = pytest.mark.slow

# backend (the profile's) -> target that selects it here
ENGINES = {"transformers": "local_cpu", "mlx_vlm": "local_apple"}
# the command line the vLLM tier runs with ``--target local_cuda``
ARGV = ["run", "--model", "tiny/qwen35-scripted", "--prompt", "hi"]
SETTINGS = ["--temperature", "0", "--max-new-tokens", "16", "--json"]


@pytest.mark.parametrize("engine", list(ENGINES))
def test_every_engine_gives_the_same_scripted_answer(
    engine: str, model_hub: FakeHub, storage: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([*ARGV, "--target", ENGINES[engine], *SETTINGS])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data = json.loads(captured.out)
    metadata = data["metadata"]
    assert metadata["backend"] == engine
    assert (data["response"], data["reasoning"]) == ("answer", "a b")
    # " a" " b" </think> " answer" <|im_end|>: the prompt already opened <think>
    assert (metadata["output_tokens"], metadata["reasoning_tokens"]) == (5, 2)
    assert metadata["finish_reason"] == "stop"
    assert metadata["time_to_first_token_seconds"] > 0
