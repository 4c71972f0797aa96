"""A hostile or broken Hub against staging: nothing outside the snapshot folder is touched.

The fake Hub lies through ``FakeHub.tamper`` (the answers only); the real
huggingface_hub client and the real file system do the rest.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import ErrorAction, hub_path_problem
from comfy_llm_profiles.errors import (
    HubAccessError,
    HubDataError,
    HubTimeoutError,
    HubUnavailableError,
)
from comfy_llm_staging import (
    MARKER_FILENAME,
    InsufficientDiskSpaceError,
    UnsafeSnapshotPathError,
    _hub,
    _verify,
    find_completed_snapshot,
    snapshot_path,
    stage_snapshot,
)

VICTIM_BYTES = b"the user's own checkpoint, not to be touched"

HOSTILE_PATHS = {
    "traversal": "../../../../victim/evil.safetensors",
    "traversal-index": "../../../../victim/model.safetensors.index.json",
    "inner-traversal": "weights/../../../../victim/evil.safetensors",
    "absolute": "{victim}",
    "backslash": "..\\..\\..\\..\\victim\\evil.safetensors",
    "nul": "evil\x00.safetensors",
    "drive-letter": "C:/victim/evil.safetensors",
    "drive-relative": "C:evil.safetensors",
    "newline": "evil\n.safetensors",
    "dot-component": "./model.safetensors",
    "empty-component": "weights//evil.safetensors",
    "overlong-component": "a" * 300 + ".safetensors",
    "overlong-path": "a/" * 600 + "evil.safetensors",
}


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file outside the storage root whose name a hostile repository aims at."""
    folder = tmp_path / "victim"
    folder.mkdir()
    for name in ("evil.safetensors", "model.safetensors.index.json"):
        (folder / name).write_bytes(VICTIM_BYTES)
    return folder


def _storage(tmp_path: Path) -> Path:
    # deep enough that ../../../../victim from the snapshot folder lands on tmp_path/victim
    return tmp_path / "root"


def _assert_victim_intact(victim: Path) -> None:
    for name in ("evil.safetensors", "model.safetensors.index.json"):
        assert (victim / name).read_bytes() == VICTIM_BYTES


def _folder_files(folder: Path) -> list[str]:
    return sorted(
        path.relative_to(folder).as_posix()
        for path in folder.rglob("*")
        if path.is_file() or path.is_symlink()
    )


@pytest.mark.parametrize("placement", ["siblings", "tree", "both"])
@pytest.mark.parametrize("form", sorted(HOSTILE_PATHS))
def test_hostile_file_path_never_touches_anything_outside(
    world: Any, victim: Path, tmp_path: Path, form: str, placement: str
) -> None:
    hostile = HOSTILE_PATHS[form].format(victim=victim / "evil.safetensors")
    assert hub_path_problem(hostile) is not None
    entry = {"rfilename": hostile, "size": 7, "blobId": "0" * 40}
    tree_entry = {"type": "file", "path": hostile, "size": 7, "oid": "0" * 40}
    world.hub.tamper(
        world.repository,
        extra_siblings=[entry] if placement in ("siblings", "both") else [],
        extra_tree=[tree_entry] if placement in ("tree", "both") else [],
    )
    root = _storage(tmp_path)
    if placement == "tree":
        # the tree listing is never consulted: the repository stages as if the entry were absent
        staged = stage_snapshot(world.repository, world.revision, storage_root=root)
        assert staged.files == tuple(sorted(world.files))
    else:
        with pytest.raises(HubDataError) as caught:
            stage_snapshot(world.repository, world.revision, storage_root=root)
        error = caught.value
        assert (error.kind, error.path) == ("unsafe_path", hostile)
        assert ascii(hostile)[:60] in str(error)
        assert "\x00" not in str(error) and "\n" not in str(error)
        assert error.action is ErrorAction.FIX_INPUT
        assert world.hub.file_requests("GET") == []
        assert find_completed_snapshot(root, world.repository, world.revision) is None
    assert all(hostile not in (r.filename or "") for r in world.hub.requests)
    _assert_victim_intact(victim)


def test_planted_symlinks_in_the_partial_folder_are_removed_not_followed(
    hf_env: Any, tmp_path: Path, victim: Path, make_files: Any
) -> None:
    files = make_files()
    files["shards/model-00001-of-00001.safetensors"] = b"x" * 1000
    sha = hf_env.add_repo("acme/linked", files)
    root = _storage(tmp_path)
    partial = snapshot_path(root, "acme/linked", sha).with_name(f"{sha}.partial")
    partial.mkdir(parents=True)
    # a file link and a folder link pointing at the victim, with names the snapshot uses
    (partial / "model.safetensors").symlink_to(victim / "evil.safetensors")
    (partial / "shards").symlink_to(victim, target_is_directory=True)
    (victim / "model-00001-of-00001.safetensors").write_bytes(VICTIM_BYTES)
    staged = stage_snapshot("acme/linked", sha, storage_root=root)
    assert not any(path.is_symlink() for path in staged.path.rglob("*"))
    for name, data in files.items():
        assert (staged.path / name).read_bytes() == data
    _assert_victim_intact(victim)
    assert (victim / "model-00001-of-00001.safetensors").read_bytes() == VICTIM_BYTES


def test_symlink_on_the_way_is_refused_when_checking(tmp_path: Path, victim: Path) -> None:
    folder = tmp_path / "partial"
    folder.mkdir()
    (folder / "weights").symlink_to(victim, target_is_directory=True)
    checker = _verify.Checker(folder, "acme/x", "a" * 40)
    remote = _hub.RemoteFile("weights/evil.safetensors", 3, None, None)
    with pytest.raises(UnsafeSnapshotPathError, match="symbolic link"):
        checker.verify(remote)
    with pytest.raises(UnsafeSnapshotPathError):
        checker.discard(remote.path)
    _assert_victim_intact(victim)


# -- item 2: the file list is the metadata's, and the folder equals the marker ---------


def test_tree_only_file_is_never_staged_and_marker_equals_folder(
    world: Any, tmp_path: Path
) -> None:
    files = dict(world.files)
    files["added_tokens.json"] = b'{"<extra>": 9}'
    sha = world.hub.add_commit(world.repository, files)
    world.hub.tamper(world.repository, hidden_siblings={"added_tokens.json"})
    root = _storage(tmp_path)
    partial = snapshot_path(root, world.repository, sha).with_name(f"{sha}.partial")
    partial.mkdir(parents=True)
    (partial / "stray.safetensors").write_bytes(b"left by someone")
    (partial / "notes").mkdir()
    (partial / "notes" / "readme.txt").write_bytes(b"stray folder")
    staged = stage_snapshot(world.repository, sha, storage_root=root)
    assert "added_tokens.json" not in world.hub.file_requests("GET")
    assert "added_tokens.json" not in staged.files
    marker = json.loads((staged.path / MARKER_FILENAME).read_text())
    on_disk = [name for name in _folder_files(staged.path) if name != MARKER_FILENAME]
    assert sorted(marker["files"]) == on_disk == sorted(world.files) == list(staged.files)


# -- item 3: a Hub that accepts and never answers ---------------------------------------


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """A loopback port whose connections are accepted (by the kernel) and never answered."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()


def test_stalled_hub_fails_fast_naming_endpoint_and_variable(
    tmp_path: Path, silent_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMFY_MODAL_LLM_HUB_TIMEOUT_SECONDS", "0.5")
    started = time.monotonic()
    with pytest.raises(HubTimeoutError) as caught:
        stage_snapshot("acme/tiny-vlm", "a" * 40, storage_root=tmp_path, endpoint=silent_endpoint)
    assert time.monotonic() - started < 10
    text = str(caught.value)
    assert silent_endpoint in text
    assert "COMFY_MODAL_LLM_HUB_TIMEOUT_SECONDS" in text
    assert "\n" not in text
    assert caught.value.action is ErrorAction.RETRY
    assert isinstance(caught.value, TimeoutError)


def test_stalled_file_download_is_bounded_by_the_same_setting(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMFY_MODAL_LLM_HUB_TIMEOUT_SECONDS", "0.5")
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "600")  # ours caps it
    world.hub.inject_fault("GET", "model.safetensors", cut_after_bytes=10, delay=30, times=20)
    started = time.monotonic()
    with pytest.raises(HubUnavailableError) as caught:
        stage_snapshot(world.repository, world.revision, storage_root=world.root)
    assert time.monotonic() - started < 30
    assert "\n" not in str(caught.value)
    assert find_completed_snapshot(world.root, world.repository, world.revision) is None


# -- item 5: faults become one line ----------------------------------------------------


def test_unauthorized_info_request_names_hf_token(world: Any) -> None:
    world.hub.inject_fault("GET", "/api/models", status=401)
    with pytest.raises(HubAccessError) as caught:
        stage_snapshot(world.repository, world.revision, storage_root=world.root)
    assert "HF_TOKEN" in str(caught.value)
    assert "HTTP 401" in str(caught.value)


def test_cut_info_connection_is_one_line(world: Any) -> None:
    world.hub.inject_fault("GET", "/api/models", cut_after_bytes=5)
    with pytest.raises(HubUnavailableError) as caught:
        stage_snapshot(world.repository, world.revision, storage_root=world.root)
    text = str(caught.value)
    assert "\n" not in text
    assert "run the stage again" in text
    assert caught.value.action is ErrorAction.RETRY


def _fail_weights_with(
    monkeypatch: pytest.MonkeyPatch, code: int, filled: list[bool] | None = None
) -> None:
    real = _hub.hf_hub_download

    def fill_disk(repo_id: str, filename: str, **kwargs: Any) -> str:
        if filename == "model.safetensors":
            if filled is not None:
                filled.append(True)
            target = Path(kwargs["local_dir"]) / filename
            target.write_bytes(b"x" * 1000)  # what made it to disk before the disk filled
            raise OSError(code, os.strerror(code), str(target))
        return str(real(repo_id, filename, **kwargs))

    monkeypatch.setattr(_hub, "hf_hub_download", fill_disk)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_disk_full_mid_download_is_one_clear_line(
    world: Any, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    _fail_weights_with(monkeypatch, code)
    with pytest.raises(InsufficientDiskSpaceError) as caught:
        stage_snapshot(world.repository, world.revision, storage_root=world.root)
    error = caught.value
    text = str(error)
    partial = snapshot_path(world.root, world.repository, world.revision).with_name(
        f"{world.revision}.partial"
    )
    assert error.during_download
    assert error.path == str(partial)
    assert str(partial) in text
    assert "disk" in text and "[Errno" not in text
    # what the files need, the margin apart from it, what is free; never "0.00 GiB ... kept"
    files = error.needed_bytes - error.margin_bytes
    if files > 0:
        assert "files still need" in text and "safety margin" in text and "reclaim" in text
    else:
        assert "files are all on disk" in text and "already fetched" not in text
    assert "including a safety margin" not in text and "0.00 GiB already" not in text
    assert "[Errno" not in text and "\n" not in text
    assert error.snapshot_bytes == sum(len(data) for data in world.files.values())
    assert error.reclaimable_bytes > 0
    assert "Not enough free disk space" not in text  # never "need X, Y available" when Y > X
    assert find_completed_snapshot(world.root, world.repository, world.revision) is None


def test_exhausted_inodes_are_named_as_such(world: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    filled: list[bool] = []
    _fail_weights_with(monkeypatch, errno.ENOSPC, filled)
    real_statvfs = os.statvfs

    def no_inodes(path: Any) -> Any:  # the inodes run out while the weights are written
        stats = real_statvfs(path)
        return os.statvfs_result((*stats[:6], 0, 0, *stats[8:])) if filled else stats

    monkeypatch.setattr(_verify.os, "statvfs", no_inodes)
    with pytest.raises(InsufficientDiskSpaceError) as caught:
        stage_snapshot(world.repository, world.revision, storage_root=world.root)
    assert caught.value.inodes_exhausted
    assert "inodes" in str(caught.value)
    assert "GiB (" not in str(caught.value).split("inodes")[1]  # no free-bytes contradiction


def test_preflight_refuses_when_no_inodes_are_left(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_statvfs = os.statvfs

    def no_inodes(path: Any) -> Any:
        stats = real_statvfs(path)
        return os.statvfs_result((*stats[:6], 0, 0, *stats[8:]))

    monkeypatch.setattr(_verify.os, "statvfs", no_inodes)
    with pytest.raises(InsufficientDiskSpaceError, match="inodes"):
        stage_snapshot(world.repository, world.revision, storage_root=world.root)
    assert world.hub.file_requests("GET") == []


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _plant_dead_lease(canonical: Path) -> Path:
    lease = canonical.with_name(f"{canonical.name}.lease.json")
    lease.write_text(
        json.dumps(
            {
                "pid": _dead_pid(),
                "host": socket.gethostname(),
                "token": "killed",
                "acquired_at": time.time(),
                "heartbeat": time.time(),
            }
        )
    )
    return lease


def test_lease_left_by_a_stager_killed_after_its_rename_is_cleaned(world: Any) -> None:
    staged = stage_snapshot(world.repository, world.revision, storage_root=world.root)
    lease = _plant_dead_lease(staged.path)  # killed between the rename and the release
    again = stage_snapshot(world.repository, world.revision, storage_root=world.root)
    assert again.downloaded is False
    assert not lease.exists()
    assert not list(staged.path.parent.glob("*.lease.json"))


def test_stager_killed_between_marker_and_rename_is_finished_without_refetching(
    world: Any,
) -> None:
    staged = stage_snapshot(world.repository, world.revision, storage_root=world.root)
    partial = staged.path.with_name(f"{world.revision}.partial")
    os.replace(staged.path, partial)  # marked in .partial, killed before the rename
    lease = _plant_dead_lease(staged.path)
    world.hub.clear_requests()
    again = stage_snapshot(world.repository, world.revision, storage_root=world.root)
    assert world.hub.requests == []
    assert again.path == staged.path
    assert again.files == staged.files
    assert not lease.exists()
    assert sorted(p.name for p in staged.path.parent.iterdir()) == [
        world.revision,
        f"{world.revision}.lock",
    ]


# -- item 6: Hub JSON trusted only field by field ----------------------------------------


@pytest.mark.parametrize(
    ("tamper", "field"),
    [
        ({"sibling_fields": {"config.json": {"size": "abc"}}}, ".size"),
        ({"sibling_fields": {"model.safetensors": {"lfs": {"sha256": 5, "size": 1}}}}, "sha256"),
        ({"sibling_fields": {"config.json": {"size": -1}}}, ".size"),
        ({"sibling_fields": {"config.json": {"blobId": ["x"]}}}, "blobId"),
        ({"info_body": b"[" * 400_000 + b"]" * 400_000}, "nested"),
        ({"info_body": b'{"sha": "' + b"a" * 40 + b'", "siblings": 7}'}, "siblings"),
        ({"info_body": b"\xff\xfe not json"}, "UTF-8"),
    ],
)
def test_malformed_model_info_is_refused_naming_the_field(
    world: Any, tamper: dict[str, Any], field: str
) -> None:
    world.hub.tamper(world.repository, **tamper)
    with pytest.raises(HubDataError) as caught:
        stage_snapshot(world.repository, world.revision, storage_root=world.root)
    text = str(caught.value)
    assert world.repository in text
    assert field in text
    assert "invalid literal" not in text and "recursion" not in text
    assert world.hub.file_requests("GET") == []


def test_oversized_model_info_is_cut_off_on_bytes_received(world: Any) -> None:
    siblings = [
        {"rfilename": f"f{i}.txt", "size": 1, "blobId": hashlib.sha1(b"%d" % i).hexdigest()}
        for i in range(300_000)
    ]
    body = json.dumps({"sha": world.revision, "siblings": siblings}).encode()
    assert len(body) > 16 * 1024**2
    world.hub.tamper(world.repository, info_body=body)
    with pytest.raises(HubDataError, match="byte limit"):
        stage_snapshot(world.repository, world.revision, storage_root=world.root)


def test_a_path_listed_as_file_and_folder_is_refused_naming_both(
    world: Any, tmp_path: Path
) -> None:
    # e.g. config.json and config.json/x: no folder can hold both ([Errno 21] Is a directory)
    inside = "model.safetensors/shard.safetensors"
    world.hub.tamper(world.repository, extra_siblings=[{"rfilename": inside, "size": 7}])
    root = _storage(tmp_path)
    with pytest.raises(HubDataError) as caught:  # kind unsafe_path, as any unsafe name
        stage_snapshot(world.repository, world.revision, storage_root=root)
    assert caught.value.path == "model.safetensors"
    message = str(caught.value)
    assert world.repository in message and "'model.safetensors'" in message, message
    assert repr(inside) in message and "Errno" not in message, message
    assert world.hub.file_requests("GET") == []
    assert find_completed_snapshot(root, world.repository, world.revision) is None
