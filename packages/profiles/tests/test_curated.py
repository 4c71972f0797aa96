"""The curated list: aliases of pinned commits, resolved like any reference, then offline."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import ExecutionTarget
from comfy_llm_profiles import load_curated_registry, registry_for, resolve_profile
from comfy_llm_profiles._curated import parse_curated_registry
from comfy_llm_profiles._families import FAMILIES
from comfy_llm_profiles._manifest import load_manifest
from comfy_llm_profiles.errors import CuratedRegistryError, DownloadTooLargeError
from comfy_llm_testworld import FakeHub

from .conftest import CONFIG_FOR_FAMILY, build_config, build_files  # type: ignore[import-not-found]

SHIPPED = json.loads(
    (Path(__file__).parents[1] / "src" / "comfy_llm_profiles" / "curated_profiles.json").read_text()
)
MIB = 1024**2
HEX = "0123456789abcdef"

# The table the issue asks for: id -> (repository, commit, targets that default to it).
EXPECTED = {
    "smolvlm-256m-instruct": (
        "HuggingFaceTB/SmolVLM-256M-Instruct",
        "7e3e67edbbed1bf9888184d9df282b700a323964",
        {"local_cpu", "local_cuda"},
    ),
    "smolvlm2-2.2b-instruct": (
        "HuggingFaceTB/SmolVLM2-2.2B-Instruct",
        "482adb537c021c86670beed01cd58990d01e72e4",
        {"modal"},
    ),
    "smolvlm2-500m-video-instruct": (
        "HuggingFaceTB/SmolVLM2-500M-Video-Instruct",
        "7b375e1b73b11138ff12fe22c8f2822d8fe03467",
        set(),
    ),
    "qwen3.5-0.8b": ("Qwen/Qwen3.5-0.8B", "2fc06364715b967f1860aea9cf38778875588b17", set()),
    "qwen3.5-2b": ("Qwen/Qwen3.5-2B", "15852e8c16360a2fea060d615a32b45270f8a8fc", set()),
    "qwen3-vl-2b-instruct": (
        "Qwen/Qwen3-VL-2B-Instruct",
        "89644892e4d85e24eaac8bacfd4f463576704203",
        set(),
    ),
    "qwen3.5-2b-mlx-4bit": (
        "mlx-community/Qwen3.5-2B-4bit",
        "674aaa7240b91e8012fcad5d791b7dfe5ba90207",
        {"local_apple"},
    ),
    "qwen3.5-0.8b-mlx-4bit": (
        "mlx-community/Qwen3.5-0.8B-4bit",
        "da28692b5f139cb0ec58a356b437486b7dac7462",
        set(),
    ),
    "smolvlm2-2.2b-mlx": (
        "mlx-community/SmolVLM2-2.2B-Instruct-mlx",
        "844516024a1c4400d34489b89ee067d794e432ed",
        set(),
    ),
    # Issue 29's captioners, at the commits seen in public material (reviews/*.md)
    **{
        curated_id: (repository, commit, set())
        for curated_id, repository, commit in (
            (
                "qwen2.5-vl-3b-instruct",
                "Qwen/Qwen2.5-VL-3B-Instruct",
                "66285546d2b821cf421d4f5eb2576359d3770cd3",
            ),
            (
                "qwen2-vl-2b-instruct",
                "Qwen/Qwen2-VL-2B-Instruct",
                "895c3a49bc3fa70a340399125c650a463535e71c",
            ),
            ("gemma-3-4b-it", "google/gemma-3-4b-it", "093f9f388b31de276ce2de164bdc2081324b9767"),
            (
                "llava-1.5-7b",
                "llava-hf/llava-1.5-7b-hf",
                "b234b804b114d9e37bb655e11cbbb5f5e971b7a9",
            ),
            (
                "llava-v1.6-mistral-7b",
                "llava-hf/llava-v1.6-mistral-7b-hf",
                "a1d521368f8d353afa4da2ed2bb1bf646ef1ff5f",
            ),
            (
                "llama-3.2-11b-vision-instruct",
                "meta-llama/Llama-3.2-11B-Vision-Instruct",
                "9eb2daaa8597bf192a8b0e73f848f3a102794df5",
            ),
            (
                "internvl3-2b",
                "OpenGVLab/InternVL3-2B-hf",
                "cb57a075cb75a2e6d1b668b128d48bb00ae321d2",
            ),
            (
                "mistral-small-3.1-24b-instruct",
                "mistralai/Mistral-Small-3.1-24B-Instruct-2503",
                "68faf511d618ef198fef186659617cfd2eb8e33a",
            ),
        )
    },
}


def _serve(hub: FakeHub, entry: Any, **config_changes: Any) -> dict[str, bytes]:
    """Serve ``entry.repository`` at its pinned commit (with a newer main beside it)."""
    config = build_config(CONFIG_FOR_FAMILY[entry.family], **config_changes)
    files = build_files(config, weights={"model.safetensors": b"w" * 4096})
    hub.add_repo(entry.repository, files, sha=entry.revision)
    moved = build_files(build_config("muse_glimmer"))
    hub.add_commit(entry.repository, moved)  # upstream moved on: the pin must hold
    return files


def test_every_pin_is_a_commit_and_every_family_is_in_its_targets_registry() -> None:
    for entry in load_curated_registry().entries.values():
        assert len(entry.revision) == 40 and set(entry.revision) <= set(HEX), entry.id
        assert entry.family in FAMILIES, entry.id
        for target in entry.targets:
            families = {rule.family for rule in registry_for(target).rules}
            assert entry.family in families, (entry.id, target)


def test_the_shipped_table() -> None:
    registry = load_curated_registry()
    shipped = {
        e.id: (
            e.repository,
            e.revision,
            {t.value for t, d in registry.defaults.items() if d == e.id},
        )
        for e in registry.entries.values()
    }
    assert shipped == EXPECTED
    for target in ExecutionTarget:
        assert target in registry.default_for(target).targets
    reviewed = registry.get("smolvlm2-2.2b-instruct").limits
    assert reviewed == {
        "context_tokens": 16384,
        "max_images": 8,
        "max_video_frames": 32,
        "max_file_bytes": 32 * MIB,
        "max_total_file_bytes": 32 * MIB,
        "max_file_characters": 200_000,
        "allow_mixed_image_video": False,
    }


def test_entries_carry_no_copied_model_data() -> None:
    allowed = {"id", "display_name", "repository", "revision", "family", "targets", "limits"}
    for raw in SHIPPED["entries"]:
        assert set(raw) - {"notes"} <= allowed, raw["id"]


def test_curated_id_resolves_through_the_pinned_commit_then_offline(
    hf_env: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = load_curated_registry().get("smolvlm2-2.2b-instruct")
    _serve(hf_env, entry, torch_dtype="float16")
    first = resolve_profile(entry.id, "modal", storage_root=tmp_path, endpoint=hf_env.endpoint)
    profile = first.profile
    assert first.created
    assert (profile.repository, profile.revision) == (entry.repository, entry.revision)
    # Everything about the model comes from the served commit ...
    assert profile.architecture == "SmolVLMForConditionalGeneration"
    assert profile.dtype == "float16"
    assert profile.weight_bytes == 4096
    assert profile.advertised_context_tokens == 8192
    # ... and the reviewed overrides from the entry (context never above the advertised one).
    assert profile.display_name == entry.display_name
    assert profile.limits.context_tokens == 8192
    media = profile.limits.media
    assert (media.image.max_images, media.video.max_video_frames) == (8, 32)
    assert media.file.max_file_characters == 200_000
    assert media.file.max_total_file_bytes == 32 * MIB
    assert not media.video.allow_mixed_image_video
    # One model-info request and config.json, both at the pinned commit.
    api = [r for r in hf_env.requests if r.path.startswith("/api/models/")]
    assert len(api) == 1 and entry.revision in api[0].path
    assert hf_env.file_requests("GET") == ["config.json"]
    assert all(r.revision == entry.revision for r in hf_env.requests if r.filename)
    assert load_manifest(first.manifest_path) == profile

    # Later runs: no Hub at all (an unreachable endpoint proves it).
    hf_env.clear_requests()
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    again = resolve_profile(entry.id, "modal", storage_root=tmp_path)
    assert (again.profile, again.created) == (profile, False)
    assert hf_env.requests == []


def test_context_override_applies_when_the_checkpoint_allows_it(
    hf_env: FakeHub, tmp_path: Path
) -> None:
    entry = load_curated_registry().get("smolvlm2-2.2b-instruct")
    config = build_config("smolvlm")
    config["text_config"]["max_position_embeddings"] = 16384
    hf_env.add_repo(entry.repository, build_files(config), sha=entry.revision)
    profile = resolve_profile(
        entry.id, "local_cuda", storage_root=tmp_path, endpoint=hf_env.endpoint
    ).profile
    assert profile.limits.context_tokens == 16384
    assert profile.identity["max_context_tokens"] == 16384


@pytest.mark.parametrize("target", list(ExecutionTarget))
def test_the_default_of_every_target_resolves_against_the_fake_hub(
    hf_env: FakeHub, tmp_path: Path, target: ExecutionTarget
) -> None:
    entry = load_curated_registry().default_for(target)
    _serve(hf_env, entry)
    profile = resolve_profile(
        entry.id, target, storage_root=tmp_path, endpoint=hf_env.endpoint
    ).profile
    assert (profile.repository, profile.revision) == (entry.repository, entry.revision)
    assert profile.execution_target is target


def test_every_entry_resolves_for_each_reviewed_target(hf_env: FakeHub, tmp_path: Path) -> None:
    for entry in load_curated_registry().entries.values():
        _serve(hf_env, entry)
        for target in entry.targets:
            profile = resolve_profile(
                entry.id, target, storage_root=tmp_path, endpoint=hf_env.endpoint
            ).profile
            assert profile.modalities == FAMILIES[entry.family].modalities


def test_a_pin_of_another_family_is_refused(hf_env: FakeHub, tmp_path: Path) -> None:
    entry = load_curated_registry().get("qwen3-vl-2b-instruct")
    hf_env.add_repo(entry.repository, build_files(build_config("qwen3_5")), sha=entry.revision)
    with pytest.raises(CuratedRegistryError) as caught:
        resolve_profile(entry.id, "modal", storage_root=tmp_path, endpoint=hf_env.endpoint)
    assert caught.value.entry == entry.id
    assert "'qwen3_vl'" in str(caught.value) and "Qwen3_5ForConditionalGeneration" in str(
        caught.value
    )


def test_unusable_stored_facts_are_inspected_again(hf_env: FakeHub, tmp_path: Path) -> None:
    entry = load_curated_registry().get("qwen3.5-0.8b")
    _serve(hf_env, entry)
    first = resolve_profile(entry.id, "local_cpu", storage_root=tmp_path, endpoint=hf_env.endpoint)
    stored = tmp_path / "profiles" / "pinned" / "Qwen" / "Qwen3.5-0.8B" / f"{entry.revision}.json"
    assert json.loads(stored.read_text())["config"]["model_type"] == "qwen3_5"
    stored.write_text('{"format": 1, "repository": "Qwen/Other"}')
    hf_env.clear_requests()
    again = resolve_profile(entry.id, "local_cpu", storage_root=tmp_path, endpoint=hf_env.endpoint)
    assert again.profile == first.profile
    assert hf_env.file_requests("GET") == ["config.json"]


def test_stored_facts_still_obey_the_download_limit(
    hf_env: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = load_curated_registry().get("qwen3.5-0.8b")
    _serve(hf_env, entry)
    resolve_profile(entry.id, "local_cpu", storage_root=tmp_path, endpoint=hf_env.endpoint)
    monkeypatch.setenv("COMFY_MODAL_LLM_MAX_DOWNLOAD_GB", "0.000001")
    with pytest.raises(DownloadTooLargeError):
        resolve_profile(entry.id, "local_cpu", storage_root=tmp_path, endpoint=hf_env.endpoint)


def test_curated_id_for_an_unreviewed_target(tmp_path: Path) -> None:
    with pytest.raises(CuratedRegistryError) as caught:
        resolve_profile("qwen3.5-2b-mlx-4bit", ExecutionTarget.MODAL, storage_root=tmp_path)
    assert caught.value.entry == "qwen3.5-2b-mlx-4bit"
    message = str(caught.value)
    assert "'modal'" in message and "local_apple" in message
    assert "mlx-community/Qwen3.5-2B-4bit@674aaa7240b91e8012fcad5d791b7dfe5ba90207" in message


def test_get_unknown_id() -> None:
    with pytest.raises(CuratedRegistryError, match="unknown"):
        load_curated_registry().get("nope")


def _entry(**changes: Any) -> dict[str, Any]:
    entry = copy.deepcopy(SHIPPED["entries"][0])
    for key, value in changes.items():
        if value is None:
            entry.pop(key)
        else:
            entry[key] = value
    return entry


def _list(*entries: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"registry_version": "v", "entries": list(entries), **top}


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ([], "'entries' list"),
        ({"entries": []}, "registry_version"),
        (_list("x"), "not an object"),  # type: ignore[arg-type]
        (_list(_entry(id="Bad Id")), "with id"),
        (_list(_entry(repository=None)), "missing keys"),
        (_list(_entry(family=None)), "missing keys"),
        (_list(_entry(surprise=1)), "unknown keys"),
        (_list(_entry(config={"model_type": "idefics3"})), "unknown keys"),
        (_list(_entry(weight_bytes=1)), "unknown keys"),
        (_list(_entry(repository="https://x/y")), "invalid repository"),
        (_list(_entry(repository="a/b@main")), "plain owner/model"),
        (_list(_entry(revision="main")), "40-character"),
        (_list(_entry(revision="7E3E67EDBBED1BF9888184D9DF282B700A323964")), "40-character"),
        (_list(_entry(targets=[])), "non-empty list"),
        (_list(_entry(targets=["modal", "modal"])), "non-empty list"),
        (_list(_entry(targets=["local_tpu"])), "known:"),
        (_list(_entry(family="llama")), "has family"),
        (_list(_entry(limits=[1])), "not an object"),
        (_list(_entry(limits={"max_tokens": 1})), "unknown limits"),
        (_list(_entry(limits={"max_images": 0})), "positive integer"),
        (_list(_entry(limits={"allow_mixed_image_video": 1})), "true or false"),
        (_list(_entry(limits={"max_video_frames": 8})), "takes no video"),
        (_list(_entry(), _entry()), "appears twice"),
        (_list(_entry(), defaults={"local_tpu": "smolvlm-256m-instruct"}), "unknown target"),
        (_list(_entry(), defaults={"modal": "nope"}), "not an entry reviewed"),
        (
            _list(_entry(targets=["local_cpu"]), defaults={"modal": "smolvlm-256m-instruct"}),
            "not an entry reviewed",
        ),
    ],
)
def test_validation_on_load(data: object, problem: str) -> None:
    with pytest.raises(CuratedRegistryError) as caught:
        parse_curated_registry(data)
    assert problem in str(caught.value)
    assert "Fix curated_profiles.json" in str(caught.value)


def test_load_from_a_path(tmp_path: Path) -> None:
    path = tmp_path / "curated.json"
    path.write_text(json.dumps(SHIPPED))
    assert load_curated_registry(path).ids == load_curated_registry().ids
    path.write_text("{")
    with pytest.raises(CuratedRegistryError, match="cannot be read"):
        load_curated_registry(path)


def test_the_seeds_smolvlm2_runs_on_apple_through_mlx_vlm(hf_env: FakeHub, tmp_path: Path) -> None:
    # The seed's Apple registry admits reviewed unquantized SmolVLM checkpoints through
    # MLX-VLM, so a seed-era workflow naming its curated SmolVLM2 must resolve on a Mac.
    entry = load_curated_registry().get("smolvlm2-2.2b-instruct")
    _serve(hf_env, entry)
    profile = resolve_profile(
        entry.id, "local_apple", storage_root=tmp_path, endpoint=hf_env.endpoint
    ).profile
    assert (profile.backend, profile.quantization_method) == ("mlx_vlm", "none")
    assert (profile.repository, profile.revision) == (entry.repository, entry.revision)
    assert "video" in profile.modalities
