from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_profiles import (
    BACKENDS,
    CuratedRegistryError,
    ExecutionTarget,
    is_commit,
    load_curated_registry,
    load_manifest,
    parse_curated_registry,
    resolve_profile,
)

SHIPPED = json.loads(
    (Path(__file__).parents[1] / "src" / "comfy_llm_profiles" / "curated_profiles.json").read_text()
)


def test_shipped_list_is_valid_and_covers_every_target() -> None:
    registry = load_curated_registry()
    assert registry.version
    assert registry.ids == tuple(sorted(e["id"] for e in SHIPPED["entries"]))
    for target in ExecutionTarget:
        assert registry.for_target(target), f"no curated entry for {target}"
    for entry in registry.entries.values():
        assert is_commit(entry.revision)
        for target in entry.targets:
            profile = entry.profile(target, backends=frozenset(BACKENDS))
            assert profile.revision == entry.revision
            assert profile.display_name == entry.display_name
    small = registry.get("smolvlm-256m-instruct")
    assert small.repository == "HuggingFaceTB/SmolVLM-256M-Instruct"
    assert not small.revision_verified  # a documented placeholder pin


def test_curated_resolution_needs_no_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An unreachable endpoint proves no request is made.
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    events = []
    resolved = resolve_profile(
        "qwen3.5-2b-mlx-4bit",
        ExecutionTarget.LOCAL_APPLE,
        storage_root=tmp_path,
        progress=events.append,
    )
    profile = resolved.profile
    assert profile.repository == "mlx-community/Qwen3.5-2B-4bit"
    assert profile.revision == "674aaa7240b91e8012fcad5d791b7dfe5ba90207"
    assert (profile.backend, profile.quantization_method) == ("mlx_vlm", "mlx")
    assert profile.reasoning_parser == "qwen3"
    assert resolved.created
    assert load_manifest(resolved.manifest_path) == profile
    assert events and all(e.stage == "inspect" and e.indeterminate for e in events)
    again = resolve_profile("qwen3.5-2b-mlx-4bit", "local_apple", storage_root=tmp_path)
    assert (again.profile, again.created) == (profile, False)


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


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ([], "'entries' list"),
        ({"entries": []}, "registry_version"),
        ({"registry_version": "v", "entries": ["x"]}, "not an object"),
        ({"registry_version": "v", "entries": [_entry(id="Bad Id")]}, "with id"),
        ({"registry_version": "v", "entries": [_entry(repository=None)]}, "missing keys"),
        ({"registry_version": "v", "entries": [_entry(surprise=1)]}, "unknown keys"),
        (
            {"registry_version": "v", "entries": [_entry(repository="https://x/y")]},
            "invalid repository",
        ),
        (
            {"registry_version": "v", "entries": [_entry(repository="a/b@main")]},
            "plain owner/model",
        ),
        ({"registry_version": "v", "entries": [_entry(revision="main")]}, "40-character"),
        ({"registry_version": "v", "entries": [_entry(targets=[])]}, "non-empty list"),
        (
            {"registry_version": "v", "entries": [_entry(targets=["modal", "modal"])]},
            "non-empty list",
        ),
        ({"registry_version": "v", "entries": [_entry(targets=["local_tpu"])]}, "known:"),
        ({"registry_version": "v", "entries": [_entry(weight_bytes=0)]}, "weight_bytes"),
        ({"registry_version": "v", "entries": [_entry(config=[1])]}, "config"),
        ({"registry_version": "v", "entries": [_entry(), _entry()]}, "appears twice"),
        # Re-checked against the compatibility registry of each target:
        (
            {
                "registry_version": "v",
                "entries": [
                    _entry(
                        config={**SHIPPED["entries"][0]["config"], "auto_map": {"AutoModel": "x.Y"}}
                    )
                ],
            },
            "is refused for target",
        ),
        (
            {
                "registry_version": "v",
                "entries": [
                    _entry(
                        config={
                            **SHIPPED["entries"][0]["config"],
                            "quantization_config": {
                                "quant_method": "fp8",
                                "weight_block_size": [128, 128],
                            },
                        }
                    )
                ],
            },
            "is refused for target",
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
