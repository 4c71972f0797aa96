from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import ExecutionTarget
from comfy_llm_profiles import ModelProfile
from comfy_llm_profiles._manifest import load_manifest, manifest_path, write_manifest
from comfy_llm_profiles.errors import ManifestConflictError, ManifestError

MakeProfile = Callable[..., ModelProfile]


def test_layout(tmp_path: Path, make_profile: MakeProfile) -> None:
    profile = make_profile()
    path, created = write_manifest(tmp_path, profile)
    assert created
    assert path == tmp_path / "profiles" / f"{profile.profile_id}.json"
    assert manifest_path(tmp_path, profile.profile_id) == path
    assert json.loads(path.read_text()) == profile.to_dict()
    assert load_manifest(path) == profile
    # Nothing but the manifest is left behind (no temporary files).
    assert os.listdir(path.parent) == [path.name]


@pytest.mark.parametrize(
    "bad", ["x", "hf-123", "hf-" + "G" * 64, "../hf-" + "0" * 64, "hf-" + "0" * 63 + "/"]
)
def test_manifest_path_refuses_non_ids(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="not of the form"):
        manifest_path(tmp_path, bad)


def test_same_identity_is_reused(tmp_path: Path, make_profile: MakeProfile) -> None:
    first = make_profile(requested_revision="main", display_name="First")
    path, created = write_manifest(tmp_path, first)
    before = path.read_bytes()
    again, created_again = write_manifest(
        tmp_path, make_profile(requested_revision="v1", display_name="Second")
    )
    assert (again, created, created_again) == (path, True, False)
    # The first resolution's non-identity fields stay; the file is untouched.
    assert path.read_bytes() == before
    assert load_manifest(path).display_name == "First"


def test_different_profile_under_the_same_id_is_a_conflict(
    tmp_path: Path, make_profile: MakeProfile
) -> None:
    profile = make_profile()
    path, _ = write_manifest(tmp_path, profile)
    # Plant a valid manifest of *another* profile under this id's file name.
    other = make_profile(weight_bytes=5)
    path.write_text(json.dumps(other.to_dict()))
    before = path.read_bytes()
    with pytest.raises(ManifestConflictError) as caught:
        write_manifest(tmp_path, profile)
    assert caught.value.profile_id == profile.profile_id
    assert caught.value.path == path
    assert isinstance(caught.value, FileExistsError)
    assert "never overwritten" in str(caught.value) and "Delete it" in str(caught.value)
    assert path.read_bytes() == before


@pytest.mark.parametrize("content", ["", "{not json", "[]", '{"schema_version": 2}'])
def test_unusable_existing_manifest_is_a_conflict(
    tmp_path: Path, make_profile: MakeProfile, content: str
) -> None:
    profile = make_profile()
    path = manifest_path(tmp_path, profile.profile_id)
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.raises(ManifestConflictError, match="unusable"):
        write_manifest(tmp_path, profile)
    assert path.read_text() == content


def _write_dict(tmp_path: Path, name: str, data: Any) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_load_manifest_validates(tmp_path: Path, make_profile: MakeProfile) -> None:
    profile = make_profile()
    data = profile.to_dict()
    with pytest.raises(ManifestError, match="does not exist"):
        load_manifest(tmp_path / "missing.json")
    tampered = {**data, "backend": "vllm"}
    with pytest.raises(ManifestError, match="not a valid profile"):
        load_manifest(_write_dict(tmp_path, f"{profile.profile_id}.json", tampered))
    with pytest.raises(ManifestError, match="not a valid profile"):
        load_manifest(
            _write_dict(tmp_path, f"{profile.profile_id}.json", {**data, "revision": "main"})
        )
    other = make_profile(execution_target=ExecutionTarget.MODAL)
    with pytest.raises(ManifestError, match="holds profile"):
        load_manifest(_write_dict(tmp_path, f"{profile.profile_id}.json", other.to_dict()))
    bad_json = tmp_path / "bad.json"
    bad_json.write_bytes(b"\xff\xfe")
    with pytest.raises(ManifestError, match="cannot be read"):
        load_manifest(bad_json)


def test_concurrent_writers_agree(tmp_path: Path, make_profile: MakeProfile) -> None:
    profile = make_profile()
    results: list[tuple[Path, bool]] = []
    errors: list[BaseException] = []

    def write() -> None:
        try:
            results.append(write_manifest(tmp_path, profile))
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=write) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len({path for path, _ in results}) == 1
    assert any(created for _, created in results)
    assert load_manifest(results[0][0]) == profile
    assert len(os.listdir(tmp_path / "profiles")) == 1


def test_failed_write_leaves_no_file(
    tmp_path: Path, make_profile: MakeProfile, monkeypatch: pytest.MonkeyPatch
) -> None:
    profile = make_profile()

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_manifest(tmp_path, profile)
    assert os.listdir(tmp_path / "profiles") == []


def test_a_full_disk_while_writing_the_manifest_is_one_clear_error(
    tmp_path: Path, make_profile: MakeProfile, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from comfy_llm_core import DiskFullError, ErrorAction, _files

    def no_room(*args: object, **kwargs: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_files.os, "open", no_room)  # the disk, not the code under test
    with pytest.raises(DiskFullError) as caught:
        write_manifest(tmp_path, make_profile())
    text = str(caught.value)
    assert "[Errno" not in text and "No space left" not in text
    assert "The disk holding" in text and "writing the model manifest failed" in text
    assert "COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT" in text
    assert caught.value.action is ErrorAction.RETRY
    assert list((tmp_path / "profiles").iterdir()) == []  # nothing half-written
