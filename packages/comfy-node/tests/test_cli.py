"""The CLI's resolve, stage and run against the fake Hub with real engines."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import comfy_llm
import pytest
from comfy_llm._cli import main
from comfy_llm_testworld import FakeHub

TARGETS = ["local_cpu", "local_apple"]  # Transformers, MLX-VLM (through mlx[cpu])


def _run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    code = main([*argv, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def test_version_names_every_package_of_this_install(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    first, *rest = capsys.readouterr().out.splitlines()
    assert first.startswith(f"comfy-llm {comfy_llm.__version__} (Python 3.")
    packages = dict(line.split() for line in rest)
    assert {"comfy-llm-core", "comfy-llm-backend-cuda", "comfy-llm-modal-remote"} <= set(packages)
    assert set(packages.values()) == {comfy_llm.__version__}
    assert "comfy-llm-testworld" not in packages  # dev-only, never shipped


def test_resolve_pins_the_branch_and_downloads_no_weights(
    model_hub: FakeHub, storage: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _run_json(capsys, "resolve", "tiny/qwen35", "--target", "local_cpu")
    assert data["repository"] == "tiny/qwen35"
    assert data["revision"] == model_hub.head("tiny/qwen35")
    assert data["backend"] == "transformers"
    assert data["execution_target"] == "local_cpu"
    assert data["reasoning_parser"] == "qwen3"
    assert data["id"].startswith("hf-")
    assert Path(data["manifest_path"]).is_file()
    assert Path(data["manifest_path"]).is_relative_to(storage)
    fetched = model_hub.file_requests()
    assert "config.json" in fetched
    assert not [f for f in fetched if f.endswith(".safetensors")]


def test_resolve_prints_human_text_without_json(
    model_hub: FakeHub, storage: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["resolve", "tiny/smolvlm", "--target", "local_apple"]) == 0
    out = capsys.readouterr().out
    assert "mlx_vlm" in out and "tiny/smolvlm" in out and "manifest_path" in out


def test_stage_downloads_once_then_reuses(
    model_hub: FakeHub, storage: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _run_json(capsys, "stage", "tiny/qwen35", "--target", "local_cpu")
    assert first["downloaded"] is True
    snapshot = Path(first["snapshot_path"])
    assert (snapshot / "model.safetensors").is_file()
    assert snapshot.is_relative_to(storage / "llm_models")
    model_hub.clear_requests()
    second = _run_json(capsys, "stage", "tiny/qwen35", "--target", "local_cpu")
    assert second["downloaded"] is False
    assert second["snapshot_path"] == first["snapshot_path"]
    assert not [f for f in model_hub.file_requests() if f.endswith(".safetensors")]


@pytest.mark.parametrize(
    ("status", "code", "words"),
    [(500, 75, "run the stage again to resume"), (401, 2, "HF_TOKEN")],
    ids=["hub-failed-retry", "token-refused-fix-input"],
)
def test_stage_exit_code_says_what_to_do_about_a_hub_failure(
    model_hub: FakeHub,
    storage: Path,
    capsys: pytest.CaptureFixture[str],
    status: int,
    code: int,
    words: str,
) -> None:
    # resolution passes; the weights' download fails, inside staging
    model_hub.inject_fault("GET", "model.safetensors", status=status, times=20)
    assert main(["stage", "tiny/qwen35", "--target", "local_cpu"]) == code
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("comfy-llm: error: ") and words in last


def test_failures_are_one_line_and_non_zero(
    model_hub: FakeHub, storage: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["resolve", "nobody/nothing", "--target", "local_cpu"]) == 2  # fix the input
    # Progress lines may precede it; the failure itself is exactly one line.
    err_lines = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err_lines if line.startswith("comfy-llm: error:")]
    assert errors == [err_lines[-1]]
    assert "nobody/nothing" in errors[0]
    assert main(["resolve", "https://huggingface.co/x/y", "--target", "local_cpu"]) == 2
    assert "owner/model" in capsys.readouterr().err
    assert main(["resolve", "tiny/qwen35", "--target", "mars"]) == 1
    assert "local_cpu" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_run_scripted_splits_reasoning_and_answer(
    target: str, model_hub: FakeHub, storage: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _run_json(
        capsys,
        "run",
        "--model",
        "tiny/qwen35-scripted",
        "--prompt",
        "hi",
        "--target",
        target,
        "--temperature",
        "0",
        "--max-new-tokens",
        "16",
    )
    assert data["response"] == "answer"
    assert data["reasoning"] == "a b"
    metadata = data["metadata"]
    assert metadata["reasoning_tokens"] == 2
    assert metadata["output_tokens"] == 5  # " a" " b" "</think>" " answer" <|im_end|>
    assert metadata["execution_target"] == target
    assert metadata["reasoning_enabled"] is True
    # Which comfy-llm packages served it, every one at the node's version.
    versions = metadata["comfy_llm_versions"]
    backend = "comfy-llm-backend-cuda" if target == "local_cpu" else "comfy-llm-backend-mlx"
    assert {"comfy-llm", "comfy-llm-core", "comfy-llm-residency", backend} <= set(versions)
    assert set(versions.values()) == {comfy_llm.__version__}


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("model", ["tiny/qwen35-scripted", "tiny/smolvlm-scripted"])
def test_run_without_reasoning_leaves_the_channel_empty(
    target: str, model: str, model_hub: FakeHub, storage: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _run_json(
        capsys,
        "run",
        "--model",
        model,
        "--prompt",
        "hi",
        "--target",
        target,
        "--temperature",
        "0",
        "--no-reasoning",
    )
    assert data["reasoning"] == ""
    assert data["metadata"]["reasoning_enabled"] is False
    if model == "tiny/qwen35-scripted":  # a qwen3 profile: the think block never leaks
        assert data["response"] == "answer"
        assert data["metadata"]["reasoning_parser"] == "direct"


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_run_qwen_with_an_image(
    target: str,
    model_hub: FakeHub,
    storage: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from PIL import Image

    image = tmp_path / "red.png"
    Image.new("RGB", (32, 24), (255, 0, 0)).save(image)
    data = _run_json(
        capsys,
        "run",
        "--model",
        "tiny/qwen35",
        "--prompt",
        "What colour?",
        "--image",
        str(image),
        "--target",
        target,
        "--max-new-tokens",
        "6",
        "--seed",
        "1",
    )
    assert data["metadata"]["image_count"] == 1
    assert 1 <= data["metadata"]["output_tokens"] <= 6
    assert data["metadata"]["cache_status"] == "cold"


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_run_smolvlm_with_video_frames_and_a_text_file(
    target: str,
    model_hub: FakeHub,
    storage: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from comfy_llm_testworld.media import write_test_video

    video = write_test_video(tmp_path / "clip.mp4", frames=20, fps=10)
    notes = tmp_path / "notes.txt"
    notes.write_text("The clip shows a moving square.\n", encoding="utf-8")
    data = _run_json(
        capsys,
        "run",
        "--model",
        "tiny/smolvlm",
        "--prompt",
        "Summarise.",
        "--video",
        str(video),
        "--video-frames",
        "3",
        "--file",
        str(notes),
        "--target",
        target,
        "--max-new-tokens",
        "4",
    )
    metadata = data["metadata"]
    assert metadata["video_frame_count"] == 3
    assert metadata["file_count"] == 1
    assert metadata["backend"] == ("mlx_vlm" if target == "local_apple" else "transformers")


def test_run_defaults_to_a_small_curated_model_per_target(monkeypatch: pytest.MonkeyPatch) -> None:
    from comfy_llm._cli._args import default_model
    from comfy_llm_profiles import load_curated_registry

    monkeypatch.delenv("COMFY_LLM_EXECUTION_TARGET", raising=False)
    curated = load_curated_registry()
    for target in ("local_apple", "local_cpu", "local_cuda"):
        model = default_model(target)
        assert model in curated.ids
        assert target in [t.value for t in curated.get(model).targets]


def _fresh_python(code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COMFY_LLM_EXECUTION_TARGET"}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )


def test_target_detection_does_not_import_torch() -> None:
    # Importing torch costs seconds on every CLI call, a missing image included.
    result = _fresh_python(
        "import sys\n"
        "from comfy_llm._targets import detect_target\n"
        "print(detect_target().value, 'torch' in sys.modules)\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["local_cpu", "False"]  # this CI machine has no GPU


def test_run_with_a_missing_image_fails_before_loading_any_engine(tmp_path: Path) -> None:
    missing = tmp_path / "missing.png"
    result = _fresh_python(
        "import sys\n"
        "from comfy_llm._cli import main\n"
        f"code = main(['run', '--prompt', 'hi', '--image', {str(missing)!r}])\n"
        "print(code, sorted(m for m in ('torch', 'transformers', 'huggingface_hub') "
        "if m in sys.modules))\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "2 []", result.stdout  # 2: fix the input
    assert "missing.png" in result.stderr and "was not found" in result.stderr


@pytest.mark.slow
def test_a_budget_spent_reasoning_is_explained_with_the_cli_flags(
    model_hub: FakeHub, storage: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--model", "tiny/qwen35-scripted", "--prompt", "hi", "--target", "local_cpu"]
    code = main([*argv, "--temperature", "0", "--max-new-tokens", "1", "--json"])
    captured = capsys.readouterr()
    assert code == 0  # the request worked; the answer is empty for a reason the user can fix
    data = json.loads(captured.out)
    assert data["response"] == ""
    note = data["metadata"]["empty_answer"]
    assert note["reason"] == "budget_in_reasoning"
    expected = (
        "The answer is empty: the model used all 1 token while reasoning; "
        "raise --max-new-tokens or pass --no-reasoning."
    )
    assert note["message"] == expected
    assert f"comfy-llm: note: {expected}" in captured.err


def test_run_keeps_library_progress_bars_off_stderr(
    model_hub: FakeHub, storage: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # transformers draws "Loading weights: 0%| ..." with tqdm on stderr; without
    # --debug the CLI's stderr carries its own progress lines only
    argv = ["run", "--model", "tiny/qwen35-scripted", "--prompt", "hi", "--target", "local_cpu"]
    assert main([*argv, "--temperature", "0", "--max-new-tokens", "4", "--json"]) == 0
    err = capsys.readouterr().err
    assert "Loading weights" not in err
    assert "%|" not in err  # no third-party tqdm bar at all
    # nor Transformers' own log lines ("[transformers] ... is falling back ..."):
    # its handler holds the stderr of its first import, so check where they stop
    assert not [line for line in err.splitlines() if line.startswith("[transformers]")]
    kernels = logging.getLogger("transformers.integrations.hub_kernels")
    assert not kernels.isEnabledFor(logging.WARNING)
