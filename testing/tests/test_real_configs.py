"""The reconstructed popular checkpoints: parseable, the right size, served like the Hub.

Each reconstruction must be read by Transformers' own config class and build
(on the meta device: no memory) a model of the published parameter count,
within 0.5 %; the fake Hub serves its small files at the pinned commit with
the real safetensors total, and the profiles' metadata inspection reads
them as it would the real repository.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from comfy_llm_testworld.families import FAMILY_KINDS, family_spec
from comfy_llm_testworld.real_configs import (
    REAL_CHECKPOINTS,
    real_checkpoint_files,
    serve_real_checkpoint,
)

HEX = set("0123456789abcdef")
REPOSITORIES = sorted(REAL_CHECKPOINTS)


def test_entries_name_a_family_and_a_commit_or_say_why_not() -> None:
    for repository, entry in REAL_CHECKPOINTS.items():
        assert entry.repository == repository
        assert entry.family in FAMILY_KINDS
        if entry.revision is None:
            assert entry.revision_source.startswith("to pin"), repository
        else:
            assert len(entry.revision) == 40 and set(entry.revision) <= HEX, repository
    # the video template needs a video model among them
    assert any(entry.video for entry in REAL_CHECKPOINTS.values())


@pytest.mark.parametrize("repository", REPOSITORIES)
def test_architecture_matches_the_family(repository: str) -> None:
    entry = REAL_CHECKPOINTS[repository]
    config = json.loads(real_checkpoint_files(repository)["config.json"])
    spec = family_spec(entry.family)
    assert (config["architectures"], config["model_type"]) == ([spec.architecture], spec.model_type)
    assert "auto_map" not in json.dumps(config)


@pytest.mark.slow
@pytest.mark.parametrize("repository", REPOSITORIES)
def test_transformers_builds_the_published_size(tmp_path: Path, repository: str) -> None:
    import torch
    import transformers

    entry = REAL_CHECKPOINTS[repository]
    for name, content in real_checkpoint_files(repository).items():
        (tmp_path / name).write_bytes(content)
    config = transformers.AutoConfig.from_pretrained(tmp_path)
    with torch.device("meta"):
        model = getattr(transformers, family_spec(entry.family).auto_class).from_config(config)
    parameters = sum(p.numel() for p in model.parameters())
    assert abs(parameters / entry.parameters - 1) < 0.005, (repository, parameters)


@pytest.mark.parametrize("repository", ["Qwen/Qwen2.5-VL-3B-Instruct", "google/gemma-3-4b-it"])
def test_the_fake_hub_serves_it_as_the_hub_would(
    hf_env: object, tmp_path: Path, repository: str
) -> None:
    from comfy_llm_core import ExecutionTarget
    from comfy_llm_profiles import read_settings
    from comfy_llm_profiles._inspect import inspect_repository

    entry = REAL_CHECKPOINTS[repository]
    sha = serve_real_checkpoint(hf_env, repository)  # type: ignore[arg-type]
    assert sha == entry.revision
    token = "hf_test_token" if entry.gated else None  # gated: metadata is public, files not
    inspection = inspect_repository(
        repository,
        revision=sha,
        target=ExecutionTarget.LOCAL_CUDA,
        settings=read_settings(token=token, endpoint=hf_env.endpoint),  # type: ignore[attr-defined]
        cache_dir=tmp_path,
    )
    assert inspection.revision == entry.revision
    assert inspection.weight_bytes == entry.weight_bytes
    assert inspection.config == json.loads(real_checkpoint_files(repository)["config.json"])
