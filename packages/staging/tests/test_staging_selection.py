"""Staging a selection: exactly the named files of a commit (one GGUF quantization)."""

from __future__ import annotations

import hashlib
import json

import pytest
from comfy_llm_staging import (
    MARKER_FILENAME,
    IncompleteSnapshotError,
    SnapshotContentError,
    find_completed_snapshot,
    list_staged_selections,
    list_staged_snapshots,
    require_completed_snapshot,
    snapshot_path,
    stage_snapshot,
)

REPO = "acme/tiny-GGUF"
FILES = {
    "README.md": b"# tiny\n",
    "tiny-Q8_0.gguf": b"GGUF" + bytes(range(200)),
    "tiny-F32.gguf": b"GGUF" + bytes(400),
    "mmproj-tiny-F16.gguf": b"GGUF" + bytes(range(100)),
}
PICK = ("tiny-Q8_0.gguf", "mmproj-tiny-F16.gguf")


def test_a_selection_stages_only_its_files_in_a_folder_of_its_own(hf_env, tmp_path) -> None:
    sha = hf_env.add_repo(REPO, FILES)
    root = tmp_path / "storage"

    staged = stage_snapshot(REPO, sha, storage_root=root, files=PICK)

    assert (
        staged.path == snapshot_path(root, REPO, sha, files=PICK) != snapshot_path(root, REPO, sha)
    )
    assert staged.files == tuple(sorted(PICK))
    assert sorted(hf_env.file_requests("GET")) == sorted(PICK)  # no config.json, no F32
    assert sorted(p.name for p in staged.path.iterdir()) == sorted([*PICK, MARKER_FILENAME])
    marker = json.loads((staged.path / MARKER_FILENAME).read_text())
    assert set(marker["files"]) == set(PICK)
    assert require_completed_snapshot(staged.path, repository=REPO, revision=sha)
    assert find_completed_snapshot(root, REPO, sha, files=PICK) == staged.path
    assert find_completed_snapshot(root, REPO, sha) is None  # not the whole snapshot
    other = ("tiny-F32.gguf", "mmproj-tiny-F16.gguf")
    assert find_completed_snapshot(root, REPO, sha, files=other) is None

    hf_env.clear_requests()
    again = stage_snapshot(REPO, sha, storage_root=root, files=PICK)
    assert again.path == staged.path and again.downloaded is False
    assert hf_env.requests == []


def test_a_selection_marker_moved_to_another_name_is_not_complete(hf_env, tmp_path) -> None:
    """Without config.json, only the folder named by its files' digest counts as complete."""
    sha = hf_env.add_repo(REPO, FILES)
    staged = stage_snapshot(REPO, sha, storage_root=tmp_path, files=PICK)
    moved = staged.path.rename(staged.path.with_name(sha))
    with pytest.raises(IncompleteSnapshotError, match=r"lists no config\.json"):
        require_completed_snapshot(moved, repository=REPO, revision=sha)


@pytest.mark.parametrize(
    ("files", "problem"),
    [
        (("tiny-Q4_K_M.gguf",), "tiny-Q4_K_M.gguf is not among its allowed files"),
        (("README.md",), "README.md is not among its allowed files"),
        (("../tiny-Q8_0.gguf",), "is not among its allowed files"),
    ],
)
def test_a_selection_names_only_allowed_files_of_the_commit(
    hf_env, tmp_path, files: tuple[str, ...], problem: str
) -> None:
    sha = hf_env.add_repo(REPO, FILES)
    with pytest.raises(SnapshotContentError, match=problem.replace(".", r"\.")):
        stage_snapshot(REPO, sha, storage_root=tmp_path, files=files)
    assert hf_env.file_requests("GET") == []


def test_a_selected_file_without_an_lfs_sha256_is_refused(hf_env, tmp_path) -> None:
    sha = hf_env.add_repo(REPO, FILES)
    hf_env.tamper(REPO, sibling_fields={"tiny-Q8_0.gguf": {"lfs": None}})
    with pytest.raises(SnapshotContentError, match="has no LFS sha256"):
        stage_snapshot(REPO, sha, storage_root=tmp_path, files=PICK)
    assert hf_env.file_requests("GET") == []


def test_a_whole_snapshot_never_takes_gguf_files(hf_env, tmp_path) -> None:
    files = {"config.json": b"{}", "model.safetensors": b"x" * 64, **FILES}
    sha = hf_env.add_repo("acme/both", files)
    staged = stage_snapshot("acme/both", sha, storage_root=tmp_path)
    assert not [name for name in staged.files if name.endswith(".gguf")]


def test_each_staged_selection_of_a_commit_is_listed_with_its_verified_files(
    hf_env, tmp_path
) -> None:
    """Offline resolution rebuilds a GGUF choice from these (and the picker lists each)."""
    sha = hf_env.add_repo(REPO, FILES)
    other = ("tiny-F32.gguf", "mmproj-tiny-F16.gguf")
    q8 = stage_snapshot(REPO, sha, storage_root=tmp_path, files=PICK)
    f32 = stage_snapshot(REPO, sha, storage_root=tmp_path, files=other)
    hf_env.clear_requests()

    listed = list_staged_selections(tmp_path, REPO, sha)

    assert sorted(s.path for s in listed) == sorted([q8.path, f32.path])
    by_path = {s.path: s.files for s in listed}
    q8_files = {f.path: f for f in by_path[q8.path]}
    assert set(q8_files) == set(PICK)
    model = q8_files["tiny-Q8_0.gguf"]
    assert model.size == len(FILES["tiny-Q8_0.gguf"])
    assert model.sha256 == hashlib.sha256(FILES["tiny-Q8_0.gguf"]).hexdigest()
    staged = list_staged_snapshots(tmp_path)
    assert sorted(path for _, _, path in staged) == sorted([q8.path, f32.path])
    assert list_staged_selections(tmp_path, REPO, "0" * 40) == []
    assert hf_env.requests == []


def test_a_selection_whose_marker_lies_about_its_files_is_not_listed(hf_env, tmp_path) -> None:
    sha = hf_env.add_repo(REPO, FILES)
    staged = stage_snapshot(REPO, sha, storage_root=tmp_path, files=PICK)
    marker_path = staged.path / MARKER_FILENAME
    marker = json.loads(marker_path.read_text())
    del marker["files"]["mmproj-tiny-F16.gguf"]  # another name set: not this folder's digest
    marker_path.write_text(json.dumps(marker))
    assert list_staged_selections(tmp_path, REPO, sha) == []
