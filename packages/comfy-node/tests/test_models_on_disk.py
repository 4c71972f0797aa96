"""Models already on disk through the node: a local folder, and a staged model offline."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.checkpoints import write_checkpoint

from .conftest import node_raises

pytestmark = pytest.mark.slow

TARGETS = ["local_cpu", "local_apple"]


def _execute(**kwargs: Any) -> tuple[str, dict[str, Any], str]:
    from comfy_api.latest import io
    from comfy_llm._comfyui._modal_llm import ModalLLMNode

    ModalLLMNode.hidden = io.HiddenHolder(unique_id="5")
    kwargs.setdefault("temperature", 0.0)
    kwargs.setdefault("prompt", "hi")
    response, metadata_json, reasoning = ModalLLMNode.execute(**kwargs).args
    return response, json.loads(metadata_json), reasoning


@pytest.fixture
def target(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", request.param)
    return request.param


def _fresh_process() -> None:
    """What a restarted ComfyUI has: no resolution cache, no resident model."""
    from comfy_llm._pipeline import forget_resolved_profiles
    from comfy_llm_residency import reset_managers

    forget_resolved_profiles()
    reset_managers()


@pytest.mark.parametrize("target", TARGETS, indirect=True)
def test_a_folder_under_models_llm_runs_in_place(
    target: str, hf_env: FakeHub, storage: Path, comfyui: Path
) -> None:
    models = Path(os.environ["COMFYUI_STANDIN_BASE"]) / "models"  # folder_paths.models_dir
    folder = write_checkpoint("qwen3_5", models / "LLM" / "Qwen3.5-tiny", scripted=True)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in folder.iterdir())
    response, metadata, reasoning = _execute(model_profile="models/LLM/Qwen3.5-tiny")
    assert (response, reasoning) == ("answer", "a b")
    assert metadata["model_source"] == "local"
    # D20: where it lies, relative to ComfyUI's models folder; the key facts first
    assert metadata["snapshot_path"] == "models/LLM/Qwen3.5-tiny"
    assert str(models.resolve()) not in json.dumps(metadata) and str(storage) not in json.dumps(
        metadata
    )
    from comfy_llm._comfyui._metadata import KEY_FACTS

    facts = [key for key in metadata if key in KEY_FACTS]
    assert list(metadata)[: len(facts)] == facts == sorted(facts, key=KEY_FACTS.index)
    assert metadata["snapshot_downloaded"] is False
    # The same folder by its absolute path: the same profile, still warm.
    _, again, _ = _execute(model_profile=str(folder))
    assert again["profile_id"] == metadata["profile_id"] and again["cache_status"] == "warm"
    assert hf_env.requests == []
    assert sorted((p.name, p.stat().st_mtime_ns) for p in folder.iterdir()) == before
    assert not list(storage.rglob("*.safetensors"))  # never copied


def test_a_staged_model_runs_with_the_hub_failing_every_request(
    model_hub: FakeHub, storage: Path, comfyui: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    first, online, _ = _execute(model_profile="tiny/qwen35-scripted")
    assert first == "answer" and online["resolved_offline"] is False
    _fresh_process()
    for method in ("GET", "HEAD"):
        model_hub.inject_fault(method=method, path_contains="/", status=503, times=10_000)
    model_hub.clear_requests()
    response, metadata, _ = _execute(model_profile="tiny/qwen35-scripted")
    assert response == "answer"
    assert metadata["resolved_offline"] is True
    assert metadata["profile_id"] == online["profile_id"]
    # With HF_HUB_OFFLINE=1 not even the one failing request is made.
    _fresh_process()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model_hub.clear_requests()
    response, metadata, _ = _execute(model_profile="tiny/qwen35-scripted")
    assert response == "answer" and metadata["resolved_offline"] is True
    assert model_hub.requests == []


def test_offline_a_never_seen_model_fails_with_one_line(
    model_hub: FakeHub, storage: Path, comfyui: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from comfy_llm_profiles import OfflineResolutionError

    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with node_raises(OfflineResolutionError) as caught:
        _execute(model_profile="tiny/smolvlm")
    message = str(caught.shown)
    assert "HF_HUB_OFFLINE=1" in message and "tiny/smolvlm" in message
    assert "\n" not in message
    assert model_hub.requests == []
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_a_local_folder_is_refused_with_run_on_modal_before_modal(
    storage: Path, comfyui: Path, tmp_path: Path
) -> None:
    import numpy as np
    from comfy_api.latest import io
    from comfy_llm._comfyui._caption_node import CaptionImagesNode
    from comfy_llm_profiles import LocalFolderError

    folder = write_checkpoint("smolvlm", tmp_path / "SmolVLM")
    with node_raises(LocalFolderError, match="not on the Modal worker"):
        _execute(model_profile=str(folder), run_on_modal=True)
    CaptionImagesNode.hidden = io.HiddenHolder(unique_id="6")
    with node_raises(LocalFolderError, match="not on the Modal worker"):
        CaptionImagesNode.execute(
            model_profile=str(folder),
            prompt="Caption.",
            images=np.zeros((1, 8, 8, 3), dtype=np.float32),
            run_on_modal=True,
        )
