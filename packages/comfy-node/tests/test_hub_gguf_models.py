"""A GGUF repository on the Hub through the node and the CLI, on the real llama.cpp (CPU build).

The Hub is the loopback stand-in (``comfy_llm_testworld.FakeHub``) driven by
the real ``huggingface_hub`` client: model info with each sibling's LFS
sha256, ``/resolve/<commit>/<path>`` downloads. ``owner/model-GGUF:Q8_0``
is pinned to the commit, only the chosen model file and its projector are
downloaded (verified against their sha256), checked, decided from their
headers and run by llama.cpp. A file whose bytes do not match the Hub's
sha256, or whose header is not the quantization its name says, is refused
and nothing half-written is left where a later run would load it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from comfy_llm._cli import main
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.checkpoints import SCRIPTED_ANSWER
from comfy_llm_testworld.gguf_checkpoints import GGUF_MMPROJ_NAME, build_gguf_files

from .conftest import node_raises


def _fresh_process() -> None:
    """What a restarted ComfyUI (or a new CLI run) has: no resolution cache, no resident."""
    from comfy_llm._pipeline import forget_resolved_profiles
    from comfy_llm_residency import reset_managers

    forget_resolved_profiles()
    reset_managers()


pytestmark = pytest.mark.slow

REPO = "ggml-org/tiny-smolvlm-GGUF"
Q8 = "tiny-smolvlm-Q8_0.gguf"
F32 = "tiny-smolvlm-F32.gguf"


def _repository(*, quantizations: tuple[str, ...] = ("F32", "Q8_0")) -> dict[str, bytes]:
    files: dict[str, bytes] = {"README.md": b"# tiny SmolVLM GGUF\n"}
    for quantization in quantizations:
        files.update(build_gguf_files(scripted=True, quantization=quantization))  # type: ignore[arg-type]
    return files


def _execute(**kwargs: Any) -> tuple[str, dict[str, Any]]:
    from comfy_api.latest import io
    from comfy_llm._comfyui._modal_llm import ModalLLMNode

    ModalLLMNode.hidden = io.HiddenHolder(unique_id="9")
    kwargs.setdefault("temperature", 0.0)
    kwargs.setdefault("prompt", "Describe the image.")
    response, metadata_json, _ = ModalLLMNode.execute(**kwargs).args
    return response, json.loads(metadata_json)


@pytest.fixture
def cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")


def test_a_hub_gguf_quantization_is_pinned_staged_and_describes_an_image(
    cpu: None, hf_env: FakeHub, storage: Path, comfyui: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit = hf_env.add_repo(REPO, _repository())
    image = np.random.default_rng(0).random((1, 32, 32, 3), dtype=np.float32)

    response, metadata = _execute(model_profile=f"{REPO}:Q8_0", images=image)

    assert SCRIPTED_ANSWER in response
    assert metadata["backend"] == "llama_cpp" and metadata["quantization"] == "Q8_0"
    assert metadata["revision"] == commit and metadata["model_source"] == "hub"
    assert metadata["gguf_file"] == Q8 and metadata["mmproj_file"] == GGUF_MMPROJ_NAME
    assert metadata["image_count"] == 1
    # exactly the two chosen files, once each: never the F32 model, the README, a config.json
    assert sorted(hf_env.file_requests("GET", REPO)) == sorted([Q8, GGUF_MMPROJ_NAME])
    staged = sorted(p.name for p in storage.rglob("*.gguf"))
    assert staged == sorted([Q8, GGUF_MMPROJ_NAME])

    hf_env.clear_requests()
    again, _ = _execute(model_profile=f"{REPO}:Q8_0", images=image)
    assert again == response
    assert hf_env.file_requests("GET") == []  # staged once, reused

    # the staged quantization is offered again under a reference that names it
    from comfy_llm._catalogue import list_models, picker_choices
    from comfy_llm_core import ExecutionTarget

    pinned = f"{REPO}@{commit}:Q8_0"
    picker = {c.value: c.label for c in picker_choices(storage, ExecutionTarget.LOCAL_CPU)}
    assert pinned in picker and ":Q8_0" in picker[pinned]
    listed = {c.reference: c for c in list_models(storage, ExecutionTarget.LOCAL_CPU)}
    assert listed[pinned].source == "staged" and listed[pinned].compatible is True
    assert f"{REPO}@{commit}" not in listed  # never as a whole (config.json-less) snapshot
    hf_env.clear_requests()
    assert _execute(model_profile=pinned, images=image)[0] == response
    assert hf_env.file_requests("GET") == []

    # a restarted ComfyUI with HF_HUB_OFFLINE=1: the choice is rebuilt from the staged files
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hf_env.clear_requests()
    for reference, offline in ((f"{REPO}:Q8_0", True), (pinned, False)):
        _fresh_process()
        answer, again_metadata = _execute(model_profile=reference, images=image)
        assert answer == response and again_metadata["gguf_file"] == Q8
        assert again_metadata["revision"] == commit
        assert again_metadata["resolved_offline"] is offline  # a branch took its last commit
        assert again_metadata["profile_id"] == metadata["profile_id"]
    assert hf_env.requests == []


def test_offline_an_unstaged_gguf_quantization_is_refused_with_the_fix(
    cpu: None,
    hf_env: FakeHub,
    storage: Path,
    comfyui: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from comfy_llm_profiles import OfflineResolutionError

    commit = hf_env.add_repo(REPO, _repository())
    resolve = ["resolve", f"{REPO}:Q8_0", "--target", "local_cpu", "--json"]
    assert main(resolve) == 0  # stages the Q8_0 selection
    online = json.loads(capsys.readouterr().out)
    hf_env.inject_fault(method="GET", path_contains="/api/models/", status=500)
    assert main(resolve) == 0  # the Hub unreachable: the staged choice, as offline
    assert json.loads(capsys.readouterr().out)["id"] == online["id"]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hf_env.clear_requests()
    for reference, wanted in ((f"{REPO}:F32", "F32"), (REPO, "Q4_K_M (the default)")):
        with node_raises(OfflineResolutionError) as failure:
            _execute(model_profile=reference)
        message = str(failure.shown)
        assert reference in message and f"quantization {wanted}" in message
        assert "HF_HUB_OFFLINE=1" in message and "unset HF_HUB_OFFLINE" in message
        assert f"staged here: Q8_0; or run a staged one ({REPO}@{commit}:Q8_0)" in message
        assert "\n" not in message
    with node_raises(OfflineResolutionError) as failure:
        _execute(model_profile="ggml-org/never-seen-GGUF:Q8_0")
    assert "ggml-org/never-seen-GGUF was never resolved on this machine" in str(failure.shown)
    assert hf_env.requests == []


def test_a_file_that_does_not_match_its_sha256_is_refused_and_not_kept(
    cpu: None, hf_env: FakeHub, storage: Path, comfyui: Path
) -> None:
    from comfy_llm_staging import SnapshotVerificationError

    files = _repository(quantizations=("Q8_0",))
    hf_env.add_repo(REPO, files)
    corrupt = bytearray(files[Q8])
    corrupt[-1] ^= 0xFF  # same size, other bytes: only the sha256 can tell
    hf_env.tamper(REPO, file_bodies={Q8: bytes(corrupt)})

    with node_raises(SnapshotVerificationError) as failure:
        _execute(model_profile=REPO)  # no tag: the only quantization offered
    assert "sha256" in str(failure.shown) and Q8 in str(failure.shown)
    # nothing half-written where a load would look: no completed snapshot, no Q8 file
    assert not list(storage.rglob(".comfy_llm_snapshot.json"))
    assert not list(storage.rglob(Q8))


def test_a_file_whose_header_is_not_its_named_quantization_is_refused(
    cpu: None, hf_env: FakeHub, storage: Path, comfyui: Path
) -> None:
    from comfy_llm_profiles import UnsafeGgufError

    real = build_gguf_files(scripted=True, quantization="F32")
    hf_env.add_repo(REPO, {Q8: real[F32], GGUF_MMPROJ_NAME: real[GGUF_MMPROJ_NAME]})

    with node_raises(UnsafeGgufError) as failure:
        _execute(model_profile=f"{REPO}:Q8_0")
    message = str(failure.shown)
    assert "its name says Q8_0 but its header's file type is F32" in message
    assert "\n" not in message


def test_an_unoffered_quantization_lists_the_offer(
    cpu: None, hf_env: FakeHub, storage: Path, comfyui: Path
) -> None:
    from comfy_llm_profiles import ProfileError

    hf_env.add_repo(REPO, _repository())
    with node_raises(ProfileError) as failure:
        _execute(model_profile=REPO)  # no Q4_K_M (the default) and two others on offer
    message = str(failure.shown)
    assert "Q4_K_M (the default)" in message and "F32, Q8_0" in message
    assert hf_env.file_requests("GET") == []  # refused from the model info alone


def test_the_cli_resolves_and_runs_a_hub_gguf(
    hf_env: FakeHub,
    storage: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    commit = hf_env.add_repo(REPO, _repository())
    image = tmp_path / "red.png"
    from PIL import Image

    Image.new("RGB", (32, 32), (200, 30, 30)).save(image)
    reference = f"{REPO}:q8_0"
    assert main(["resolve", reference, "--target", "local_cpu", "--json"]) == 0
    resolved = json.loads(capsys.readouterr().out)
    assert resolved["backend"] == "llama_cpp" and resolved["revision"] == commit
    argv = ["run", "--model", reference, "--prompt", "Describe it.", "--image", str(image)]
    argv += ["--target", "local_cpu", "--temperature", "0", "--max-new-tokens", "16", "--json"]
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    ran = json.loads(captured.out)
    assert SCRIPTED_ANSWER in ran["response"]
    assert ran["metadata"]["gguf_file"] == Q8
    assert sorted(hf_env.file_requests("GET", REPO)) == sorted([Q8, GGUF_MMPROJ_NAME])

    _fresh_process()  # a new `comfy-llm run`, offline: the staged choice, no request
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hf_env.clear_requests()
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    offline = json.loads(captured.out)
    assert offline["response"] == ran["response"]
    assert offline["metadata"]["resolved_offline"] is True
    assert offline["metadata"]["profile_id"] == ran["metadata"]["profile_id"]
    assert hf_env.requests == []
