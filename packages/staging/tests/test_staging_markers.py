"""Completion markers, legacy layouts and the loader guard (no network)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from comfy_llm_staging import (
    LEGACY_MARKER_FILENAME,
    MARKER_FILENAME,
    IncompleteSnapshotError,
    find_completed_snapshot,
    require_completed_snapshot,
    snapshot_path,
)
from comfy_llm_staging._marker import write_marker

REPO = "owner/model"
SHA = "89abcdef0123456789abcdef0123456789abcdef"
OTHER_SHA = "f" * 40


def _complete(directory: Path, *, repository: str = REPO, revision: str = SHA) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_bytes(b"{}")
    (directory / "model.safetensors").write_bytes(b"x" * 10)
    files = {
        "config.json": {"size": 2, "sha256": "a" * 64},
        "model.safetensors": {"size": 10, "sha256": "b" * 64},
    }
    write_marker(directory, repository=repository, revision=revision, files=files, profile_id=None)
    return directory


def _legacy(root: Path, profile_id: str, *, revision: str = SHA) -> Path:
    directory = root / "llm_models" / profile_id
    directory.mkdir(parents=True)
    (directory / "config.json").write_bytes(b"{}")
    (directory / "model.safetensors").write_bytes(b"w")
    marker = {"profile_id": profile_id, "repository": REPO, "revision": revision}
    marker["completed_at_unix"] = 1.0
    (directory / LEGACY_MARKER_FILENAME).write_text(json.dumps(marker))
    return directory


def test_marker_is_written_atomically_with_the_schema(tmp_path: Path) -> None:
    directory = _complete(tmp_path / "snap")
    payload = json.loads((directory / MARKER_FILENAME).read_text())
    assert payload["schema"] == 1
    assert payload["repository"] == REPO
    assert payload["revision"] == SHA
    assert payload["files"]["model.safetensors"] == {"size": 10, "sha256": "b" * 64}
    assert "completed_at" in payload
    assert [p.name for p in directory.iterdir() if p.name.endswith(".tmp")] == []


def test_find_returns_the_canonical_snapshot(tmp_path: Path) -> None:
    assert find_completed_snapshot(tmp_path, REPO, SHA) is None
    canonical = _complete(snapshot_path(tmp_path, REPO, SHA))
    assert find_completed_snapshot(tmp_path, REPO, SHA) == canonical


def test_a_directory_without_marker_is_not_complete(tmp_path: Path) -> None:
    canonical = snapshot_path(tmp_path, REPO, SHA)
    canonical.mkdir(parents=True)
    (canonical / "config.json").write_bytes(b"{}")
    assert find_completed_snapshot(tmp_path, REPO, SHA) is None
    with pytest.raises(IncompleteSnapshotError, match="no readable completion marker"):
        require_completed_snapshot(canonical)


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda d: (d / "model.safetensors").unlink(), "model.safetensors is missing"),
        (lambda d: (d / "model.safetensors").write_bytes(b"short"), "has 5 bytes"),
        (lambda d: (d / MARKER_FILENAME).write_text("{not json"), "no readable"),
    ],
)
def test_a_damaged_snapshot_is_refused(tmp_path: Path, damage, reason: str) -> None:
    canonical = _complete(snapshot_path(tmp_path, REPO, SHA))
    damage(canonical)
    assert find_completed_snapshot(tmp_path, REPO, SHA) is None
    with pytest.raises(IncompleteSnapshotError, match=reason):
        require_completed_snapshot(canonical)


def test_require_checks_repository_and_revision(tmp_path: Path) -> None:
    directory = _complete(tmp_path / "snap")
    assert require_completed_snapshot(directory, repository=REPO, revision=SHA) == directory
    with pytest.raises(IncompleteSnapshotError, match="not owner/other"):
        require_completed_snapshot(directory, repository="owner/other")
    with pytest.raises(IncompleteSnapshotError, match=f"not {OTHER_SHA}"):
        require_completed_snapshot(directory, revision=OTHER_SHA)
    with pytest.raises(IncompleteSnapshotError, match="not a directory"):
        require_completed_snapshot(tmp_path / "nowhere")


def test_marker_for_another_revision_in_the_canonical_place_is_ignored(tmp_path: Path) -> None:
    _complete(snapshot_path(tmp_path, REPO, SHA), revision=OTHER_SHA)
    assert find_completed_snapshot(tmp_path, REPO, SHA) is None


def test_legacy_profile_directory_is_reused_in_place(tmp_path: Path) -> None:
    legacy = _legacy(tmp_path, "hf-legacyprofile")
    assert find_completed_snapshot(tmp_path, REPO, SHA) is None
    found = find_completed_snapshot(tmp_path, REPO, SHA, legacy_profile_id="hf-legacyprofile")
    assert found == legacy
    assert require_completed_snapshot(found, repository=REPO, revision=SHA) == legacy


def test_legacy_directory_of_another_revision_is_not_reused(tmp_path: Path) -> None:
    _legacy(tmp_path, "hf-old", revision=OTHER_SHA)
    assert find_completed_snapshot(tmp_path, REPO, SHA, legacy_profile_id="hf-old") is None


def test_legacy_directory_without_config_is_not_reused(tmp_path: Path) -> None:
    legacy = _legacy(tmp_path, "hf-old")
    (legacy / "config.json").unlink()
    assert find_completed_snapshot(tmp_path, REPO, SHA, legacy_profile_id="hf-old") is None


def test_canonical_wins_over_legacy(tmp_path: Path) -> None:
    _legacy(tmp_path, "hf-old")
    canonical = _complete(snapshot_path(tmp_path, REPO, SHA))
    assert find_completed_snapshot(tmp_path, REPO, SHA, legacy_profile_id="hf-old") == canonical


@pytest.mark.parametrize("profile_id", ["../escape", "a/b", "..", ".hidden", ""])
def test_unsafe_legacy_ids_are_ignored(tmp_path: Path, profile_id: str) -> None:
    assert find_completed_snapshot(tmp_path, REPO, SHA, legacy_profile_id=profile_id) is None


def _seed_layout(root: Path, folder: str, *, repository: str = REPO, revision: str = SHA) -> Path:
    """The seed's ``llm_models/<profile id>/<revision>/`` with its completion marker."""
    directory = root / "llm_models" / folder / SHA
    directory.mkdir(parents=True)
    (directory / "config.json").write_bytes(b"{}")
    (directory / "model.safetensors").write_bytes(b"w" * 3)
    marker = {"profile_id": folder, "repository": repository, "revision": revision}
    (directory / LEGACY_MARKER_FILENAME).write_text(json.dumps(marker))
    return directory


def test_seed_profile_revision_directory_is_reused_in_place(tmp_path: Path) -> None:
    legacy = _seed_layout(tmp_path, "qwen3.5-2b-seed-profile")
    assert find_completed_snapshot(tmp_path, REPO, SHA) == legacy
    assert require_completed_snapshot(legacy, repository=REPO, revision=SHA) == legacy


def test_seed_layout_with_the_current_marker_is_reused(tmp_path: Path) -> None:
    legacy = _complete(tmp_path / "llm_models" / "hf-0123" / SHA)
    assert find_completed_snapshot(tmp_path, REPO, SHA) == legacy


@pytest.mark.parametrize(("repository", "revision"), [("other/model", SHA), (REPO, OTHER_SHA)])
def test_seed_layout_whose_marker_names_something_else_is_not_reused(
    tmp_path: Path, repository: str, revision: str
) -> None:
    _seed_layout(tmp_path, "hf-seed", repository=repository, revision=revision)
    assert find_completed_snapshot(tmp_path, REPO, SHA) is None


def test_seed_layout_without_config_or_marker_is_not_reused(tmp_path: Path) -> None:
    no_config = _seed_layout(tmp_path, "hf-a")
    (no_config / "config.json").unlink()
    no_marker = _seed_layout(tmp_path, "hf-b")
    (no_marker / LEGACY_MARKER_FILENAME).unlink()
    assert find_completed_snapshot(tmp_path, REPO, SHA) is None


def test_seed_layout_is_ignored_while_the_canonical_directory_exists(tmp_path: Path) -> None:
    _seed_layout(tmp_path, "hf-seed")
    canonical = snapshot_path(tmp_path, REPO, SHA)
    canonical.mkdir(parents=True)  # present but not complete: staging repairs it in place
    assert find_completed_snapshot(tmp_path, REPO, SHA) is None
    _complete(canonical)
    assert find_completed_snapshot(tmp_path, REPO, SHA) == canonical


def test_seed_layout_behind_a_symlink_is_not_reused(tmp_path: Path) -> None:
    real = _seed_layout(tmp_path / "elsewhere", "hf-seed")
    (tmp_path / "llm_models").mkdir()
    (tmp_path / "llm_models" / "hf-link").symlink_to(real.parent, target_is_directory=True)
    assert find_completed_snapshot(tmp_path, REPO, SHA) is None
