"""Models already on disk: local folders, the Hugging Face cache, and resolving offline."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import ProgressStage
from comfy_llm_profiles import LocalFolderError, OfflineResolutionError, resolve_profile
from comfy_llm_profiles._hf_cache import hf_cache_snapshot
from comfy_llm_profiles._manifest import load_manifest
from comfy_llm_profiles.errors import RemoteCodeError
from comfy_llm_testworld import FakeHub
from huggingface_hub import snapshot_download

from .conftest import build_config, build_files

REPO = "acme/tiny-smolvlm"


def _write(folder: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return folder


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    folder = tmp_path / "models" / "LLM" / "SmolVLM2 tiny"
    folder.mkdir(parents=True)
    return _write(folder, build_files(build_config("smolvlm")))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _listing_pin(folder: Path) -> str:
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    listing = [
        [
            p.relative_to(folder).as_posix(),
            p.stat().st_size,
            hashlib.sha256(p.read_bytes()).hexdigest(),
        ]
        for p in files
    ]
    return hashlib.sha256(json.dumps(listing, separators=(",", ":")).encode()).hexdigest()


def test_a_local_folder_resolves_in_place_with_a_content_pin(
    hf_env: FakeHub, checkpoint: Path, tmp_path: Path
) -> None:
    before = {p: p.stat().st_mtime_ns for p in checkpoint.rglob("*")}
    root = tmp_path / "storage"
    resolved = resolve_profile(str(checkpoint), "local_cpu", storage_root=root)
    profile = resolved.profile
    assert (profile.source, profile.local_path) == ("local", str(checkpoint))
    assert profile.repository == "local/SmolVLM2-tiny"
    assert profile.revision == _listing_pin(checkpoint)  # sha256 over files with their sha256
    assert profile.backend == "transformers" and profile.weight_bytes > 0
    assert load_manifest(resolved.manifest_path) == profile
    # Nothing asked of the Hub, nothing written into or copied out of the folder.
    assert hf_env.requests == []
    assert {p: p.stat().st_mtime_ns for p in checkpoint.rglob("*")} == before
    assert not list(root.rglob("*.safetensors"))
    # By its name under a registered model folder: the same profile.
    folders = {"LLM": [tmp_path / "models" / "LLM"]}
    named = resolve_profile(
        "models/LLM/SmolVLM2 tiny", "local_cpu", storage_root=root, model_folders=folders
    )
    assert named.profile == profile and not named.created


def test_hashing_a_folder_is_reported_once_then_reused(checkpoint: Path, tmp_path: Path) -> None:
    events: list[Any] = []
    resolve_profile(str(checkpoint), "local_cpu", storage_root=tmp_path, progress=events.append)
    hashing = [e for e in events if e.unit == "bytes"]
    total = sum(p.stat().st_size for p in checkpoint.rglob("*") if p.is_file())
    assert hashing and hashing[-1].value == hashing[-1].maximum == total
    assert all(e.stage == ProgressStage.INSPECT for e in hashing)
    events.clear()  # unchanged folder: hashes come from the cache, nothing is read again
    resolve_profile(str(checkpoint), "local_cpu", storage_root=tmp_path, progress=events.append)
    assert [e for e in events if e.unit == "bytes"] == []


def test_a_changed_folder_gets_a_new_pin(checkpoint: Path, tmp_path: Path) -> None:
    first = resolve_profile(str(checkpoint), "local_cpu", storage_root=tmp_path).profile
    (checkpoint / "tokenizer.json").write_bytes(b'{"changed": 1}')
    second = resolve_profile(str(checkpoint), "local_cpu", storage_root=tmp_path).profile
    assert second.revision != first.revision and second.profile_id != first.profile_id


def _link_out(folder: Path) -> None:
    outside = folder.parent / "elsewhere.safetensors"
    outside.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    (folder / "model-00002.safetensors").symlink_to(outside)


@pytest.mark.parametrize(
    ("change", "error", "words"),
    [
        (
            lambda f: (f / "modeling_evil.py").write_text("import os"),
            LocalFolderError,
            "Python code",
        ),
        (lambda f: (f / "pytorch_model.bin").write_bytes(b"x"), LocalFolderError, "pickle-format"),
        (
            lambda f: (f / "config.json").write_text(
                json.dumps(build_config("smolvlm", trust_remote_code=True))
            ),
            RemoteCodeError,
            "trust_remote_code",
        ),
        (_link_out, LocalFolderError, "outside the folder"),
        (lambda f: (f / "model.safetensors").unlink(), LocalFolderError, "no *.safetensors"),
        (lambda f: (f / "config.json").unlink(), LocalFolderError, "no config.json"),
    ],
    ids=["py", "bin", "trust_remote_code", "symlink out", "no safetensors", "no config"],
)
def test_the_gate_refuses_with_one_line(
    checkpoint: Path, tmp_path: Path, change: Any, error: type[Exception], words: str
) -> None:
    change(checkpoint)
    with pytest.raises(error) as caught:
        resolve_profile(str(checkpoint), "local_cpu", storage_root=tmp_path / "s")
    message = str(caught.value)
    assert words in message and "\n" not in message
    assert str(checkpoint) in message


def test_a_missing_or_unregistered_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(LocalFolderError, match="not a folder"):
        resolve_profile(str(tmp_path / "nope"), "local_cpu", storage_root=tmp_path)
    with pytest.raises(
        LocalFolderError, match=r"no model folder 'VLM' is registered \(registered: LLM\)"
    ):
        resolve_profile(
            "models/VLM/x", "local_cpu", storage_root=tmp_path, model_folders={"LLM": [tmp_path]}
        )


def test_a_local_folder_is_not_sent_to_modal(checkpoint: Path, tmp_path: Path) -> None:
    with pytest.raises(LocalFolderError, match="not on the Modal worker"):
        resolve_profile(str(checkpoint), "modal", storage_root=tmp_path)


# -- the Hugging Face cache ----------------------------------------------------------------

SHARDED = {
    "model.safetensors.index.json": json.dumps(
        {"weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors"}}
    ).encode(),
}


def _cached_repo(hub: FakeHub, cache: Path) -> tuple[str, Path]:
    files = build_files(
        build_config("smolvlm"),
        weights={"model-1.safetensors": b"1" * 2048, "model-2.safetensors": b"2" * 1024},
        extra=SHARDED,
    )
    sha = hub.add_repo(REPO, files)
    path = snapshot_download(REPO, revision="main", cache_dir=cache, endpoint=hub.endpoint)
    hub.clear_requests()
    return sha, Path(path)


@pytest.fixture
def hf_cache(hf_env: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


def test_a_cached_commit_resolves_with_zero_hub_requests(
    hf_env: FakeHub, hf_cache: Path, tmp_path: Path
) -> None:
    sha, snapshot = _cached_repo(hf_env, hf_cache)
    assert hf_cache_snapshot(REPO, sha) == snapshot
    profile = resolve_profile(f"{REPO}@{sha}", "local_cpu", storage_root=tmp_path / "s").profile
    assert (profile.repository, profile.revision, profile.source) == (REPO, sha, "hub")
    assert profile.weight_bytes == 3072
    assert hf_env.requests == []


def test_a_partial_cached_snapshot_is_not_trusted(
    hf_env: FakeHub, hf_cache: Path, tmp_path: Path
) -> None:
    sha, snapshot = _cached_repo(hf_env, hf_cache)
    (snapshot / "model-2.safetensors").unlink()  # an interrupted download: one shard missing
    profile = resolve_profile(f"{REPO}@{sha}", "local_cpu", storage_root=tmp_path / "s").profile
    assert profile.weight_bytes == 3072  # from the Hub, not from the partial snapshot
    assert any(r.path.startswith("/api/models/") for r in hf_env.requests)


# -- offline -----------------------------------------------------------------------------


def test_offline_a_branch_uses_its_last_pin_and_says_so(
    hf_env: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sha = hf_env.add_repo(REPO, build_files(build_config("smolvlm")))
    online = resolve_profile(REPO, "local_cpu", storage_root=tmp_path).profile
    assert not resolve_profile(REPO, "local_cpu", storage_root=tmp_path).resolved_offline
    hf_env.clear_requests()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    again = resolve_profile(REPO, "local_cpu", storage_root=tmp_path)
    assert again.resolved_offline and again.profile.revision == sha
    assert again.profile.profile_id == online.profile_id
    assert hf_env.requests == []


def test_an_unreachable_hub_falls_back_to_the_last_pin(
    hf_env: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sha = hf_env.add_repo(REPO, build_files(build_config("smolvlm")))
    resolve_profile(f"{REPO}@main", "local_cpu", storage_root=tmp_path)
    hf_env.inject_fault(method="GET", path_contains="/api/", status=503, times=100)
    again = resolve_profile(f"{REPO}@main", "local_cpu", storage_root=tmp_path)
    assert again.resolved_offline and again.profile.revision == sha


def test_offline_a_never_seen_reference_fails_naming_the_setting(
    hf_env: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for reference in (REPO, f"{REPO}@{'a' * 40}", "smolvlm-256m-instruct"):
        with pytest.raises(OfflineResolutionError) as caught:
            resolve_profile(reference, "local_cpu", storage_root=tmp_path)
        message = str(caught.value)
        assert "HF_HUB_OFFLINE=1" in message and "\n" not in message
    assert hf_env.requests == []
    assert os.environ["HF_HUB_OFFLINE"] == "1"
