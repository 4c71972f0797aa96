"""Staging against the fake Hub with the real huggingface_hub client."""

from __future__ import annotations

import collections
import json
import random
from pathlib import Path

import pytest
from comfy_llm_core import ProgressEvent
from comfy_llm_profiles.errors import HubAccessError, HubUnavailableError, ModelNotFoundError
from comfy_llm_staging import (
    LEGACY_MARKER_FILENAME,
    MARKER_FILENAME,
    InsufficientDiskSpaceError,
    SnapshotVerificationError,
    _hub,
    _verify,
    find_completed_snapshot,
    require_completed_snapshot,
    snapshot_path,
    stage_snapshot,
)

MIB = 1024 * 1024


def _markers(root: Path) -> list[Path]:
    return list(root.rglob(MARKER_FILENAME))


def test_stages_verifies_and_marks_complete(world) -> None:
    events: list[ProgressEvent] = []
    staged = stage_snapshot(
        world.repository,
        world.revision,
        storage_root=world.root,
        profile_id="hf-abc",
        progress=events.append,
    )
    assert staged.downloaded is True
    assert staged.path == snapshot_path(world.root, world.repository, world.revision)
    assert staged.files == tuple(sorted(world.files))
    assert staged.bytes_downloaded == sum(len(data) for data in world.files.values())
    assert staged.profile_id == "hf-abc"
    for name, data in world.files.items():
        assert (staged.path / name).read_bytes() == data
    assert require_completed_snapshot(
        staged.path, repository=world.repository, revision=world.revision
    )
    marker = json.loads((staged.path / MARKER_FILENAME).read_text())
    assert set(marker["files"]) == set(world.files)
    # nothing but the snapshot, its lock file and the marker remain
    siblings = sorted(p.name for p in staged.path.parent.iterdir())
    assert siblings == [world.revision, f"{world.revision}.lock"]
    assert not (staged.path / ".cache").exists()
    # progress: bytes reach the total, files are counted, nothing but DOWNLOAD
    byte_events = [e for e in events if e.unit == "bytes"]
    assert byte_events[-1].value == byte_events[-1].maximum == staged.bytes_downloaded
    assert any(e.unit == "files" and e.value == len(world.files) for e in events)
    assert {e.stage.value for e in events} == {"download"}


def test_restaging_a_complete_snapshot_makes_no_request(world) -> None:
    first = stage_snapshot(world.repository, world.revision, storage_root=world.root)
    world.hub.clear_requests()
    again = stage_snapshot(world.repository, world.revision, storage_root=world.root)
    assert world.hub.requests == []
    assert again.downloaded is False
    assert again.bytes_downloaded == 0
    assert again.path == first.path
    assert again.files == first.files


def test_allow_list_never_requests_code_or_pickles(hf_env, tmp_path: Path, make_files) -> None:
    forbidden = {
        "modeling_tiny.py": b"import os\n",
        "sub/helper.py": b"print(1)\n",
        "pytorch_model.bin": b"\x80\x04pickle",
        "model.pt": b"\x80\x04pickle",
        "optimizer.pkl": b"\x80\x04pickle",
        "training_args.pth": b"\x80\x04pickle",
        "tf_model.h5": b"hdf5",
        "README.md": b"# readme",
    }
    files = {**make_files(), **forbidden}
    sha = hf_env.add_repo("acme/mixed", files)
    staged = stage_snapshot("acme/mixed", sha, storage_root=tmp_path)
    requested = {r.filename for r in hf_env.requests if r.filename is not None}
    assert requested == set(make_files())
    assert requested.isdisjoint(forbidden)
    assert set(staged.files) == set(make_files())
    assert not any(path.suffix in {".py", ".bin", ".pt", ".pkl"} for path in tmp_path.rglob("*"))


@pytest.mark.parametrize(
    ("name", "check"), [("model.safetensors", "sha256"), ("config.json", "git-sha1")]
)
def test_corrupted_byte_is_detected_and_nothing_is_marked(
    world, monkeypatch: pytest.MonkeyPatch, name: str, check: str
) -> None:
    real_download = _hub.download

    def download_then_flip_a_byte(*args, **kwargs) -> None:
        real_download(*args, **kwargs)
        target = Path(kwargs["local_dir"]) / name
        data = bytearray(target.read_bytes())
        data[len(data) // 2] ^= 0x01
        target.write_bytes(bytes(data))

    monkeypatch.setattr(_hub, "download", download_then_flip_a_byte)
    with pytest.raises(SnapshotVerificationError) as caught:
        stage_snapshot(world.repository, world.revision, storage_root=world.root)
    error = caught.value
    assert error.file == name
    assert error.check == check
    assert error.expected != error.actual
    assert name in str(error)
    assert _markers(world.root) == []
    assert find_completed_snapshot(world.root, world.repository, world.revision) is None
    partial = snapshot_path(world.root, world.repository, world.revision).with_name(
        f"{world.revision}.partial"
    )
    assert not (partial / name).exists()  # the bad file was deleted

    monkeypatch.setattr(_hub, "download", real_download)
    world.hub.clear_requests()
    staged = stage_snapshot(world.repository, world.revision, storage_root=world.root)
    assert staged.downloaded is True
    assert world.hub.file_requests("GET") == [name]  # only the deleted file is fetched again
    assert (staged.path / name).read_bytes() == world.files[name]


def test_cut_connection_resumes_with_a_range_request(hf_env, tmp_path: Path, make_files) -> None:
    files = make_files(weight_bytes=12 * MIB)
    sha = hf_env.add_repo("acme/big", files)
    hf_env.inject_fault("GET", "model.safetensors", cut_after_bytes=11 * MIB)
    staged = stage_snapshot("acme/big", sha, storage_root=tmp_path)
    gets = [r for r in hf_env.requests if r.method == "GET" and r.filename == "model.safetensors"]
    assert len(gets) == 2
    assert "range" not in gets[0].headers
    assert gets[1].headers.get("range", "").startswith("bytes=")
    assert gets[1].headers["range"] != "bytes=0-"
    assert gets[1].status == 206
    assert (staged.path / "model.safetensors").read_bytes() == files["model.safetensors"]
    assert require_completed_snapshot(staged.path)


def test_failed_staging_resumes_on_the_next_call(hf_env, tmp_path: Path, make_files) -> None:
    rng = random.Random(1)
    files = make_files()
    del files["model.safetensors"]
    files["model-00001-of-00002.safetensors"] = rng.randbytes(50_000)
    files["model-00002-of-00002.safetensors"] = rng.randbytes(50_000)
    files["model.safetensors.index.json"] = b'{"weight_map": {}}'
    sha = hf_env.add_repo("acme/sharded", files)
    hf_env.inject_fault("GET", "model-00002-of-00002", status=500)
    with pytest.raises(HubUnavailableError, match="run the stage again to resume") as caught:
        stage_snapshot("acme/sharded", sha, storage_root=tmp_path)
    assert isinstance(caught.value, OSError)
    assert _markers(tmp_path) == []
    hf_env.clear_requests()
    staged = stage_snapshot("acme/sharded", sha, storage_root=tmp_path)
    assert hf_env.file_requests("GET") == ["model-00002-of-00002.safetensors"]
    assert staged.downloaded is True
    assert set(staged.files) == set(files)


def test_not_enough_disk_is_refused_before_any_file_request(
    world, monkeypatch: pytest.MonkeyPatch
) -> None:
    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(_verify.shutil, "disk_usage", lambda path: usage(10**6, 10**6 - 4096, 4096))
    with pytest.raises(InsufficientDiskSpaceError) as caught:
        stage_snapshot(world.repository, world.revision, storage_root=world.root)
    error = caught.value
    assert isinstance(error, OSError)
    assert error.available_bytes == 4096
    assert error.needed_bytes > sum(len(d) for d in world.files.values())
    assert "COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT" in str(error)
    assert world.hub.file_requests("GET") == []
    assert world.hub.file_requests("HEAD") == []


def test_progress_callback_can_cancel_and_a_later_call_completes(world) -> None:
    class Interrupted(Exception):
        pass

    def interrupt(event: ProgressEvent) -> None:
        if event.unit == "bytes":
            raise Interrupted

    with pytest.raises(Interrupted):
        stage_snapshot(
            world.repository, world.revision, storage_root=world.root, progress=interrupt
        )
    canonical = snapshot_path(world.root, world.repository, world.revision)
    assert _markers(world.root) == []
    assert not canonical.with_name(f"{world.revision}.lease.json").exists()
    staged = stage_snapshot(world.repository, world.revision, storage_root=world.root)
    assert staged.downloaded is True
    assert require_completed_snapshot(staged.path)


def test_gated_repository_needs_a_token(hf_env, tmp_path: Path, make_files) -> None:
    sha = hf_env.add_repo("acme/gated", make_files(), gated=True)
    with pytest.raises(HubAccessError, match="is gated") as caught:
        stage_snapshot("acme/gated", sha, storage_root=tmp_path)
    assert caught.value.kind == "gated"
    assert "HF_TOKEN" in str(caught.value)
    assert _markers(tmp_path) == []
    staged = stage_snapshot("acme/gated", sha, storage_root=tmp_path, token="hf_test_token")
    assert staged.downloaded is True


def test_missing_repository_and_missing_revision_differ(hf_env, tmp_path: Path, make_files) -> None:
    sha = hf_env.add_repo("acme/present", make_files())
    with pytest.raises(ModelNotFoundError, match="not found or is private") as missing_repo:
        stage_snapshot("acme/absent", sha, storage_root=tmp_path)
    assert missing_repo.value.kind == "repo_not_found"
    with pytest.raises(ModelNotFoundError, match="does not exist") as missing_rev:
        stage_snapshot("acme/present", "e" * 40, storage_root=tmp_path)
    assert isinstance(missing_rev.value, LookupError)
    assert missing_rev.value.kind == "revision_not_found"
    assert str(missing_repo.value) != str(missing_rev.value)


def test_private_repository_without_token_is_refused(hf_env, tmp_path: Path, make_files) -> None:
    sha = hf_env.add_repo("acme/private", make_files(), private=True)
    with pytest.raises(ModelNotFoundError, match="HF_TOKEN"):
        stage_snapshot("acme/private", sha, storage_root=tmp_path)
    staged = stage_snapshot("acme/private", sha, storage_root=tmp_path, token="hf_test_token")
    assert staged.downloaded is True


def test_explicit_endpoint_wins_over_the_environment(
    world, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    staged = stage_snapshot(
        world.repository, world.revision, storage_root=world.root, endpoint=world.hub.endpoint
    )
    assert staged.downloaded is True


def test_endpoint_from_environment_is_read_at_call_time(
    world, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(HubUnavailableError):
        stage_snapshot(world.repository, world.revision, storage_root=world.root)
    assert world.hub.requests == []
    monkeypatch.setenv("HF_ENDPOINT", world.hub.endpoint)
    assert stage_snapshot(world.repository, world.revision, storage_root=world.root).downloaded


def test_legacy_profile_directory_is_reused_without_requests(world) -> None:
    legacy = world.root / "llm_models" / "hf-seedprofile"
    legacy.mkdir(parents=True)
    for name, data in world.files.items():
        (legacy / name).write_bytes(data)
    marker = {
        "profile_id": "hf-seedprofile",
        "repository": world.repository,
        "revision": world.revision,
    }
    (legacy / LEGACY_MARKER_FILENAME).write_text(json.dumps(marker))
    staged = stage_snapshot(
        world.repository, world.revision, storage_root=world.root, profile_id="hf-seedprofile"
    )
    assert world.hub.requests == []
    assert staged.path == legacy
    assert staged.downloaded is False
    assert set(staged.files) == set(world.files)


def test_seed_profile_revision_directory_is_reused_without_requests(world) -> None:
    legacy = world.root / "llm_models" / "smolvlm-seed-profile" / world.revision
    legacy.mkdir(parents=True)
    for name, data in world.files.items():
        (legacy / name).write_bytes(data)
    marker = {"repository": world.repository, "revision": world.revision}
    (legacy / LEGACY_MARKER_FILENAME).write_text(json.dumps(marker))

    staged = stage_snapshot(world.repository, world.revision, storage_root=world.root)

    assert world.hub.requests == []
    assert staged.path == legacy
    assert staged.downloaded is False
    assert set(staged.files) == set(world.files)
    assert not snapshot_path(world.root, world.repository, world.revision).exists()


def test_repository_without_config_is_refused(hf_env, tmp_path: Path, make_files) -> None:
    files = make_files()
    del files["config.json"]
    sha = hf_env.add_repo("acme/noconfig", files)
    with pytest.raises(ValueError, match=r"no config\.json"):
        stage_snapshot("acme/noconfig", sha, storage_root=tmp_path)
    assert hf_env.file_requests("GET") == []


def test_damaged_snapshot_is_repaired_reusing_intact_weights(world) -> None:
    staged = stage_snapshot(world.repository, world.revision, storage_root=world.root)
    (staged.path / "tokenizer.json").unlink()
    assert find_completed_snapshot(world.root, world.repository, world.revision) is None
    world.hub.clear_requests()
    repaired = stage_snapshot(world.repository, world.revision, storage_root=world.root)
    assert repaired.downloaded is True
    assert repaired.path == staged.path
    fetched = world.hub.file_requests("GET")
    assert "tokenizer.json" in fetched
    assert "model.safetensors" not in fetched  # the intact LFS file is hashed, not re-fetched
    assert require_completed_snapshot(repaired.path)
