"""``comfy-llm models`` and paths on ``resolve``/``run``: models already on disk."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from comfy_llm._cli import main
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.checkpoints import write_checkpoint
from huggingface_hub import snapshot_download


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    code = main([*argv, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def test_models_lists_curated_staged_local_and_hf_cache(
    model_hub: FakeHub,
    storage: Path,
    comfyui: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    staged = _json(capsys, "stage", "tiny/smolvlm", "--target", "local_cpu")
    models = Path(os.environ["COMFYUI_STANDIN_BASE"]) / "models"  # folder_paths.models_dir
    write_checkpoint("qwen3_5", models / "VLM" / "Qwen" / "Qwen3.5-tiny")
    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    cached = Path(snapshot_download("tiny/qwen35", cache_dir=cache, endpoint=model_hub.endpoint))
    model_hub.clear_requests()

    listing = _json(capsys, "models", "--target", "local_cpu")
    assert listing["target"] == "local_cpu"
    by_ref = {m["reference"]: m for m in listing["models"]}
    assert by_ref["smolvlm-256m-instruct"]["source"] == "curated"
    assert by_ref["smolvlm-256m-instruct"]["compatible"] is True
    assert by_ref["qwen3.5-2b-mlx-4bit"]["compatible"] is False  # an Apple-only entry
    pinned = f"tiny/smolvlm@{staged['revision']}"
    assert by_ref[pinned]["source"] == "staged" and by_ref[pinned]["size_bytes"] > 0
    local = by_ref["models/VLM/Qwen/Qwen3.5-tiny"]
    assert (local["source"], local["compatible"]) == ("local", True)
    assert "transformers" in local["reason"]
    hit = by_ref[f"tiny/qwen35@{cached.name}"]
    assert hit["source"] == "hf-cache" and hit["path"] == str(cached)
    assert model_hub.requests == []  # listing asks the Hub nothing

    main(["models", "--target", "local_cpu"])
    human = capsys.readouterr().out
    assert "local     models/VLM/Qwen/Qwen3.5-tiny" in human and "GiB  yes" in human


def test_resolve_and_run_accept_a_folder_path(
    hf_env: FakeHub, storage: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_checkpoint("qwen3_5", tmp_path / "LM Studio" / "Qwen3.5 tiny", scripted=True)
    resolved = _json(capsys, "resolve", str(folder), "--target", "local_cpu")
    assert resolved["repository"] == "local/Qwen3.5-tiny" and len(resolved["revision"]) == 64
    ran = _json(
        capsys,
        "run",
        "--model",
        str(folder),
        "--prompt",
        "hi",
        "--target",
        "local_cpu",
        "--temperature",
        "0",
        "--max-new-tokens",
        "8",
    )
    assert ran["response"] == "answer"
    assert ran["metadata"]["model_source"] == "local"
    assert hf_env.requests == []


def test_a_local_folder_with_code_is_refused_on_one_line(
    storage: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_checkpoint("smolvlm", tmp_path / "evil")
    (folder / "modeling_smolvlm.py").write_text("import os\n")
    assert main(["resolve", str(folder), "--target", "local_cpu"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].startswith("comfy-llm: error: Local model folder")
    assert "Python code" in errors[0] and str(folder) in errors[0]
