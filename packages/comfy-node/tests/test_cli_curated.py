"""Curated ids through the CLI: aliases of pinned commits, decided from what the Hub serves."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from comfy_llm._cli import main
from comfy_llm._cli._args import default_model
from comfy_llm_core import ExecutionTarget
from comfy_llm_profiles import load_curated_registry
from comfy_llm_profiles._manifest import load_manifest
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.checkpoints import build_checkpoint_files

SMOLVLM2 = "HuggingFaceTB/SmolVLM2-2.2B-Instruct"
SMOLVLM2_PIN = "482adb537c021c86670beed01cd58990d01e72e4"
MIB = 1024**2


def _run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    code = main([*argv, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def _files_of_family(family: str) -> dict[str, bytes]:
    """A tiny checkpoint whose config.json declares ``family``'s architecture."""
    if family == "qwen3_5":
        return build_checkpoint_files("qwen3_5")
    files = build_checkpoint_files("smolvlm")
    if family == "smolvlm":  # SmolVLM v1 declares the Idefics3 architecture
        config = json.loads(files["config.json"])
        config["architectures"] = ["Idefics3ForConditionalGeneration"]
        config["model_type"] = "idefics3"
        files["config.json"] = json.dumps(config).encode()
    return files


def test_resolve_smolvlm2_2_2b_instruct_uses_only_served_data_and_reviewed_limits(
    hf_env: FakeHub, storage: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = build_checkpoint_files("smolvlm")
    hf_env.add_repo(SMOLVLM2, files, sha=SMOLVLM2_PIN)
    served = json.loads(files["config.json"])

    data = _run_json(capsys, "resolve", "smolvlm2-2.2b-instruct", "--target", "modal")
    assert (data["repository"], data["revision"]) == (SMOLVLM2, SMOLVLM2_PIN)
    assert data["architecture"] == served["architectures"][0]
    assert data["dtype"] == served["dtype"]
    assert data["backend"] == "transformers"
    curated = load_manifest(Path(data["manifest_path"]))
    assert curated.weight_bytes == sum(
        len(blob) for path, blob in files.items() if path.endswith(".safetensors")
    )
    advertised = served["text_config"]["max_position_embeddings"]
    assert curated.advertised_context_tokens == advertised
    assert curated.display_name == "SmolVLM2 2.2B Instruct"
    assert curated.identity["max_context_tokens"] == min(16384, advertised)
    limits = curated.limits
    media = limits.media
    assert (media.image.max_images, media.video.max_video_frames) == (8, 32)
    assert (media.file.max_file_bytes, media.file.max_total_file_bytes) == (32 * MIB, 32 * MIB)
    assert media.file.max_file_characters == 200_000
    assert not media.video.allow_mixed_image_video

    # Nothing else is the registry's: resolving the pinned reference itself gives the
    # same profile once the reviewed limits and label are laid over it.
    direct_data = _run_json(capsys, "resolve", f"{SMOLVLM2}@{SMOLVLM2_PIN}", "--target", "modal")
    direct = load_manifest(Path(direct_data["manifest_path"]))
    relabelled = dataclasses.replace(
        direct,
        profile_id="",
        limits=curated.limits,
        display_name=curated.display_name,
        requested_revision=None,
    )
    assert relabelled == curated
    # Metadata only: no weight byte was requested.
    assert not [f for f in hf_env.file_requests() if f.endswith(".safetensors")]


@pytest.mark.parametrize("target", [t.value for t in ExecutionTarget])
def test_the_default_model_of_every_target_resolves_against_the_fake_hub(
    hf_env: FakeHub, storage: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    model = default_model(target)
    entry = load_curated_registry().get(model)
    hf_env.add_repo(entry.repository, _files_of_family(entry.family), sha=entry.revision)
    data = _run_json(capsys, "resolve", model, "--target", target)
    assert (data["repository"], data["revision"]) == (entry.repository, entry.revision)
    assert data["execution_target"] == target


def test_a_curated_id_with_nf4_resolves_its_quantized_profile(
    hf_env: FakeHub, storage: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``smolvlm2-2.2b-instruct:nf4``: the pinned commit, its reviewed limits, NF4 at load."""
    hf_env.add_repo(SMOLVLM2, build_checkpoint_files("smolvlm"), sha=SMOLVLM2_PIN)
    plain = _run_json(capsys, "resolve", "smolvlm2-2.2b-instruct", "--target", "local_cuda")
    nf4 = _run_json(capsys, "resolve", "smolvlm2-2.2b-instruct:nf4", "--target", "local_cuda")
    assert (nf4["repository"], nf4["revision"]) == (SMOLVLM2, SMOLVLM2_PIN)
    assert (plain["quantization_method"], nf4["quantization_method"]) == ("none", "bnb_nf4")
    assert nf4["backend"] == "transformers" and nf4["id"] != plain["id"]
    quantized = load_manifest(Path(nf4["manifest_path"]))
    unquantized = load_manifest(Path(plain["manifest_path"]))
    assert quantized.limits == unquantized.limits  # the curated entry's reviewed limits
    assert quantized.estimated_memory_bytes < unquantized.estimated_memory_bytes
