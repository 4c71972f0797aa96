"""Completion markers: the only proof that a snapshot directory is whole.

The marker is written last, atomically (temporary file + ``os.replace``), after
every file was verified against the Hub metadata::

    <snapshot>/.comfy_llm_snapshot.json
    {
      "schema": 1,
      "repository": "owner/name",
      "revision": "<40-hex commit>",
      "profile_id": "hf-..." | null,        # the profile that staged it (informational)
      "files": {"config.json": {"size": 1234, "sha256": "<64 hex>"}, ...},
      "completed_at": "2026-11-29T12:00:00+00:00"
    }

A marker is valid when it parses, names the expected repository and revision,
lists config.json (or its folder is the selection ``<revision>-<digest of the
listed names>``: a GGUF repository's model file and projector), and every
listed file exists with its recorded size (a stat, not a re-hash: cheap
enough for every load).

Seed-era profile-keyed snapshots carry ``.comfy-modal-llm-complete.json``
(``profile_id``, ``repository``, ``revision``, ``completed_at_unix``); such a
directory counts as complete when that marker matches and config.json exists.
When the canonical directory is absent, ``llm_models/<anything>/<revision>/``
directories (the seed's ``<profile id>/<revision>/``, see ``_legacy``) are
reused in place when their marker matches.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import uuid
from collections.abc import Collection
from pathlib import Path
from typing import Any

from comfy_llm_profiles import RepositoryFile

from . import _in_place, _layout, _legacy
from .errors import IncompleteSnapshotError

MARKER_FILENAME = ".comfy_llm_snapshot.json"
LEGACY_MARKER_FILENAME = ".comfy-modal-llm-complete.json"
MARKER_SCHEMA = 1


@dataclasses.dataclass(frozen=True)
class StagedSelection:
    """A completed selection (``stage_snapshot(files=...)``): its folder and verified files.

    Attributes:
        path: ``<revision>-<digest>`` under the repository's folder.
        files: Each file as staged: repository path, size and the sha256 it
            was verified against (profiles' ``RepositoryFile``, as the Hub's
            model info describes it), sorted by path.
    """

    path: Path
    files: tuple[RepositoryFile, ...]


@dataclasses.dataclass(frozen=True)
class SnapshotMarker:
    """A parsed, validated completion marker.

    Attributes:
        repository: ``owner/name``.
        revision: The 40-hex commit.
        files: Relative path → ``{"size": int, "sha256": str}`` (empty sha256
            for legacy snapshots, whose markers record no files).
        profile_id: The profile that staged it, if recorded.
        legacy: True for a seed-era marker.
    """

    repository: str
    revision: str
    files: dict[str, dict[str, Any]]
    profile_id: str | None
    legacy: bool = False


def write_marker(
    directory: Path,
    *,
    repository: str,
    revision: str,
    files: dict[str, dict[str, Any]],
    profile_id: str | None,
) -> Path:
    """Write the completion marker atomically into ``directory``.

    Args:
        directory: The snapshot directory, every file already verified.
        repository: ``owner/name``.
        revision: The 40-hex commit.
        files: Relative path → ``{"size", "sha256"}``.
        profile_id: The profile staging it, if any.

    Returns:
        The marker's path.

    Raises:
        OSError: The marker could not be written.
    """
    payload = {
        "schema": MARKER_SCHEMA,
        "repository": repository,
        "revision": revision,
        "profile_id": profile_id,
        "files": {name: dict(files[name]) for name in sorted(files)},
        "completed_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    marker = directory / MARKER_FILENAME
    temporary = directory / f"{MARKER_FILENAME}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with temporary.open("w", encoding="utf-8") as handle:
            json.dump(payload, handle, indent=2, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, marker)
    finally:
        temporary.unlink(missing_ok=True)
    return marker


def _load_json(path: Path) -> dict[str, Any] | None:
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return payload if isinstance(payload, dict) else None


def _check_marker(
    directory: Path, repository: str | None, revision: str | None
) -> tuple[SnapshotMarker | None, str]:
    """Return (marker, "") when ``directory`` holds a valid marker, else (None, reason)."""
    payload = _load_json(directory / MARKER_FILENAME)
    if payload is None:
        return _check_legacy_marker(directory, repository, revision)
    if payload.get("schema") != MARKER_SCHEMA:
        return None, f"its marker has schema {payload.get('schema')!r}, expected {MARKER_SCHEMA}"
    found_repository, found_revision = payload.get("repository"), payload.get("revision")
    if not isinstance(found_repository, str) or not isinstance(found_revision, str):
        return None, "its marker names no repository or revision"
    if repository is not None and found_repository != repository:
        return None, f"its marker is for {found_repository}, not {repository}"
    if revision is not None and found_revision != revision:
        return None, f"its marker is for revision {found_revision}, not {revision}"
    files = payload.get("files")
    if not isinstance(files, dict):
        return None, "its marker lists no files"
    selection = directory.name == f"{found_revision}-{_layout.selection_digest(files)}"
    if "config.json" not in files and not selection:  # a selection is named by its files
        return None, "its marker lists no config.json"
    for name, record in files.items():
        size = record.get("size") if isinstance(record, dict) else None
        target = directory / name
        if not isinstance(size, int) or not _inside(directory, target):
            return None, f"its marker has a malformed entry for {name!r}"
        try:
            actual = target.stat().st_size
        except OSError:
            return None, f"{name} is missing"
        if actual != size:
            return None, f"{name} has {actual} bytes, the marker recorded {size}"
    profile_id = payload.get("profile_id")
    marker = SnapshotMarker(
        repository=found_repository,
        revision=found_revision,
        files={name: dict(record) for name, record in files.items()},
        profile_id=profile_id if isinstance(profile_id, str) else None,
    )
    return marker, ""


def _check_legacy_marker(
    directory: Path, repository: str | None, revision: str | None
) -> tuple[SnapshotMarker | None, str]:
    payload = _load_json(directory / LEGACY_MARKER_FILENAME)
    if payload is None:
        return None, f"it has no readable completion marker ({MARKER_FILENAME})"
    found_repository, found_revision = payload.get("repository"), payload.get("revision")
    profile_id = payload.get("profile_id")
    if not isinstance(found_repository, str) or not isinstance(found_revision, str):
        return None, "its legacy marker names no repository or revision"
    if repository is not None and found_repository != repository:
        return None, f"its legacy marker is for {found_repository}, not {repository}"
    if revision is not None and found_revision != revision:
        return None, f"its legacy marker is for revision {found_revision}, not {revision}"
    if not (directory / "config.json").is_file():
        return None, "config.json is missing"
    files = {
        name: {"size": (directory / name).stat().st_size, "sha256": ""}
        for name in list_snapshot_files(directory)
    }
    marker = SnapshotMarker(
        repository=found_repository,
        revision=found_revision,
        files=files,
        profile_id=profile_id if isinstance(profile_id, str) else None,
        legacy=True,
    )
    return marker, ""


def _inside(directory: Path, target: Path) -> bool:
    try:
        target.resolve().relative_to(directory.resolve())
    except ValueError:
        return False
    return True


def list_snapshot_files(directory: Path) -> list[str]:
    """Return the snapshot's regular files as sorted POSIX relative paths, without hidden ones."""
    names = []
    for path in directory.rglob("*"):
        relative = path.relative_to(directory)
        if any(part.startswith(".") for part in relative.parts) or not path.is_file():
            continue
        names.append(relative.as_posix())
    return sorted(names)


def read_valid_marker(
    directory: Path, repository: str | None = None, revision: str | None = None
) -> SnapshotMarker | None:
    """Return the directory's valid marker (current or legacy), or None.

    Args:
        directory: A snapshot directory.
        repository: If given, the marker must name it.
        revision: If given, the marker must name it.

    Returns:
        The marker, or None when the directory is not a completed snapshot.
    """
    marker, _reason = _check_marker(Path(directory), repository, revision)
    return marker


def find_completed_snapshot(
    storage_root: Path,
    repository: str,
    revision: str,
    *,
    legacy_profile_id: str | None = None,
    files: Collection[str] = (),
) -> Path | None:
    """Return the completed snapshot of a repository revision, if one exists.

    Makes no network request. The canonical directory wins; otherwise a
    seed-era directory ``storage_root/llm_models/<legacy_profile_id>`` whose
    valid marker names the same repository and revision is reused in place;
    otherwise, when the canonical directory does not exist at all, the first
    ``storage_root/llm_models/<anything>/<revision>`` (in name order) holding
    config.json and a valid marker naming the same repository and revision.

    Args:
        storage_root: The storage root.
        repository: ``owner/name``.
        revision: A 40-hex commit.
        legacy_profile_id: The profile id a legacy layout was keyed by.
        files: A selection (see ``snapshot_path``): its own folder, whose
            marker must list exactly these files; never a legacy layout.

    Returns:
        The directory, or None when no completed snapshot exists.

    Raises:
        InvalidRepositoryError: ``repository`` is not ``owner/name``.
        InvalidRevisionError: ``revision`` is not a 40-hex commit.
    """
    canonical = _layout.snapshot_path(storage_root, repository, revision, files=files)
    marker = read_valid_marker(canonical, repository, revision)
    if files:
        return canonical if marker is not None and set(marker.files) == set(files) else None
    if marker is not None:
        return canonical
    if legacy_profile_id:
        legacy = _layout.legacy_snapshot_path(storage_root, legacy_profile_id)
        if legacy is not None and legacy.is_dir():
            marker = read_valid_marker(legacy, repository, revision)
            if marker is not None and (
                marker.profile_id is None or not marker.legacy or marker.profile_id == legacy.name
            ):
                return legacy
    if not canonical.exists():
        for candidate in _legacy.revision_candidates(storage_root, repository, revision):
            if read_valid_marker(candidate, repository, revision) is not None:
                return candidate
    return None


def require_completed_snapshot(
    path: Path, *, repository: str | None = None, revision: str | None = None
) -> Path:
    """Return ``path`` if it is a completed snapshot; loaders call this first.

    Args:
        path: The directory a loader was given.
        repository: If given, the marker must name this repository.
        revision: If given, the marker must name this revision.

    Returns:
        The same path, as a :class:`~pathlib.Path`.

    Raises:
        IncompleteSnapshotError: No valid marker, a listed file missing or of
            the wrong size, or a marker for another repository or revision.
    """
    directory = Path(path)
    if not directory.is_dir():
        raise IncompleteSnapshotError(str(directory), "it is not a directory")
    marker, reason = _check_marker(directory, repository, revision)
    if marker is None:
        # Local folders and Hugging Face cache snapshots carry no marker: they were
        # proven in place by this process (``_in_place``) and must be unchanged since.
        if _in_place.is_verified_in_place(directory, repository, revision) is None:
            return directory
        raise IncompleteSnapshotError(str(directory), reason)
    return directory


def list_staged_selections(
    storage_root: Path, repository: str, revision: str
) -> list[StagedSelection]:
    """The completed selections of one commit (each a GGUF quantization), by folder name.

    No network: one listing of the repository's folder. A selection counts
    when its folder is ``<revision>-<digest of its marker's names>`` and the
    marker is valid (every listed file there with its recorded size) and
    records each file's sha256, so what an offline resolution rebuilds from
    it is what was verified when it was staged.

    Raises:
        InvalidRepositoryError: ``repository`` is not ``owner/name``.
        InvalidRevisionError: ``revision`` is not a 40-hex commit.
    """
    parent = _layout.snapshot_path(storage_root, repository, revision).parent
    try:
        children = sorted(parent.iterdir())
    except OSError:
        return []
    found = []
    for child in children:
        if child.is_symlink() or not child.name.startswith(f"{revision}-") or "." in child.name:
            continue
        marker = read_valid_marker(child, repository, revision)
        if marker is None or child.name != f"{revision}-{_layout.selection_digest(marker.files)}":
            continue
        files = tuple(
            RepositoryFile(name, record["size"], record.get("sha256"))
            for name, record in sorted(marker.files.items())
        )
        if all(isinstance(f.sha256, str) and len(f.sha256) == 64 for f in files):
            found.append(StagedSelection(child, files))
    return found


def list_staged_snapshots(storage_root: Path) -> list[tuple[str, str, Path]]:
    """``(repository, revision, folder)`` of every completed snapshot under the storage root.

    Canonical and seed-era layouts alike (``llm_models/<folder>/<revision>/``
    with a valid marker); no network, one listing per repository folder. Each
    selection of a commit (``<revision>-<digest>``, one GGUF quantization) is
    listed on its own.
    """
    models = Path(storage_root) / _layout.MODELS_DIRNAME
    found: dict[tuple[str, str, str], Path] = {}
    try:
        parents = sorted(p for p in models.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []
    for parent in parents:
        try:
            children = sorted(parent.iterdir())
        except OSError:
            continue
        for child in children:
            if child.is_symlink() or not child.is_dir() or "." in child.name:
                continue
            marker = read_valid_marker(child)
            if marker is not None:
                selection = child.name if child.name != marker.revision else ""
                found.setdefault((marker.repository, marker.revision, selection), child)
    return [(repo, rev, path) for (repo, rev, _), path in sorted(found.items())]
