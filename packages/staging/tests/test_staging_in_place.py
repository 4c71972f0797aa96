"""Snapshots used where they lie: the Hugging Face cache and local folders, never copied."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import ErrorAction
from comfy_llm_profiles import OfflineResolutionError, resolve_profile
from comfy_llm_staging import (
    IncompleteSnapshotError,
    LocalFolderChangedError,
    require_completed_snapshot,
    snapshot_path,
    stage_local_folder,
    stage_snapshot,
)
from comfy_llm_testworld import FakeHub
from huggingface_hub import snapshot_download

INDEX = {"weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors"}}


@pytest.fixture
def cached(
    hf_env: FakeHub,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    make_files: Callable[..., dict[str, bytes]],
) -> tuple[FakeHub, str, Path]:
    """acme/sharded on the fake Hub, downloaded into an HF cache the way huggingface_hub does."""
    files = make_files()
    shard = files.pop("model.safetensors")
    files |= {
        "model-1.safetensors": shard,
        "model-2.safetensors": shard[::-1],
        "model.safetensors.index.json": json.dumps(INDEX).encode(),
    }
    sha = hf_env.add_repo("acme/sharded", files)
    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    folder = snapshot_download(
        "acme/sharded", revision=sha, cache_dir=cache, endpoint=hf_env.endpoint
    )
    hf_env.clear_requests()
    return hf_env, sha, Path(folder)


def test_a_complete_cache_snapshot_is_used_in_place(
    cached: tuple[FakeHub, str, Path], tmp_path: Path
) -> None:
    hub, sha, folder = cached
    root = tmp_path / "storage"
    staged = stage_snapshot("acme/sharded", sha, storage_root=root)
    assert staged.path == folder and not staged.downloaded and staged.bytes_downloaded == 0
    assert hub.requests == []  # zero Hub requests
    blobs = folder.parent.parent / "blobs"
    for name in ("model-1.safetensors", "model-2.safetensors", "config.json"):
        # zero bytes copied: what a backend opens is huggingface_hub's own blob
        blob = blobs / Path(os.readlink(folder / name)).name
        assert os.stat(staged.path / name).st_ino == os.stat(blob).st_ino
    assert not list(root.rglob("*.safetensors"))
    assert require_completed_snapshot(staged.path, repository="acme/sharded", revision=sha)


def test_a_partial_or_tampered_cache_snapshot_is_not_trusted(
    cached: tuple[FakeHub, str, Path], tmp_path: Path
) -> None:
    hub, sha, folder = cached
    (folder / "model-2.safetensors").unlink()  # interrupted: one shard never linked
    staged = stage_snapshot("acme/sharded", sha, storage_root=tmp_path / "a")
    assert staged.path == snapshot_path(tmp_path / "a", "acme/sharded", sha) and staged.downloaded
    assert "model-2.safetensors" in hub.file_requests("GET")


def test_a_cache_blob_whose_content_is_not_its_name_is_not_trusted(
    cached: tuple[FakeHub, str, Path], tmp_path: Path
) -> None:
    _hub, sha, folder = cached
    blob = (folder / "model-1.safetensors").resolve()
    data = bytearray(blob.read_bytes())
    data[0] ^= 1
    blob.chmod(0o644)
    blob.write_bytes(bytes(data))
    staged = stage_snapshot("acme/sharded", sha, storage_root=tmp_path / "b")
    assert staged.path != folder and staged.downloaded


def test_offline_with_nothing_on_disk_names_the_setting(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OfflineResolutionError) as caught:
        stage_snapshot(world.repository, world.revision, storage_root=world.root)
    assert "HF_HUB_OFFLINE=1" in str(caught.value) and "\n" not in str(caught.value)
    # one Hub vocabulary: profiles' offline refusal, still an OSError, still an input to fix
    assert isinstance(caught.value, OSError) and caught.value.kind == "offline"
    assert caught.value.action is ErrorAction.FIX_INPUT
    assert world.hub.requests == []


def test_a_local_folder_changed_after_resolving_is_refused(
    tmp_path: Path, make_files: Callable[..., dict[str, bytes]]
) -> None:
    from comfy_llm_testworld.checkpoints import build_checkpoint_files

    folder = tmp_path / "models" / "LLM" / "tiny"
    folder.mkdir(parents=True)
    for name, data in build_checkpoint_files("smolvlm").items():
        (folder / name).write_bytes(data)
    root = tmp_path / "storage"
    profile = resolve_profile(str(folder), "local_cpu", storage_root=root).profile
    staged = stage_local_folder(
        folder, repository=profile.repository, content_pin=profile.revision, storage_root=root
    )
    assert staged.path == folder and not staged.downloaded
    assert require_completed_snapshot(
        folder, repository=profile.repository, revision=profile.revision
    )
    assert not (folder / ".comfy_llm_snapshot.json").exists()  # nothing written into it

    (folder / "tokenizer_config.json").write_text('{"changed": true}')
    with pytest.raises(IncompleteSnapshotError):
        require_completed_snapshot(folder, repository=profile.repository, revision=profile.revision)
    with pytest.raises(LocalFolderChangedError) as caught:
        stage_local_folder(
            folder, repository=profile.repository, content_pin=profile.revision, storage_root=root
        )
    message = str(caught.value)
    assert "changed since it was resolved" in message and "Re-resolve" in message
    assert str(folder) in message and "\n" not in message


def test_a_gguf_pair_is_proven_in_place_file_by_file(tmp_path: Path) -> None:
    from comfy_llm_profiles import gguf_file_names
    from comfy_llm_testworld.gguf_checkpoints import write_gguf_pair

    folder = tmp_path / "lmstudio" / "ggml-org" / "tiny-GGUF"
    pair = write_gguf_pair(folder, quantization="Q8_0")
    write_gguf_pair(folder, quantization="F32")  # another quantization beside it
    root = tmp_path / "storage"
    profile = resolve_profile(
        str(pair.model), "local_cpu", storage_root=root, backends={"llama_cpp"}
    ).profile
    files = gguf_file_names(dict(profile.backend_options))
    assert files == (pair.model.name, pair.mmproj.name)

    def stage() -> Any:
        return stage_local_folder(
            folder,
            repository=profile.repository,
            content_pin=profile.revision,
            storage_root=root,
            files=files,
        )

    staged = stage()
    assert staged.path == folder.resolve() and not staged.downloaded
    assert require_completed_snapshot(
        staged.path, repository=profile.repository, revision=profile.revision
    )
    (folder / "tiny-smolvlm-F32.gguf").unlink()  # a file the profile does not name: no matter
    assert stage().path == folder.resolve()
    data = bytearray(pair.mmproj.read_bytes())
    data[-1] ^= 0xFF
    pair.mmproj.write_bytes(bytes(data))  # its projector changed
    with pytest.raises(LocalFolderChangedError):
        stage()
