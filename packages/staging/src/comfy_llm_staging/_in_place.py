"""Snapshots used where they lie: local checkpoint folders and Hugging Face cache snapshots.

Neither is copied, and nothing is written into either (a marker there would
change the user's folder, and the HF cache belongs to huggingface_hub). What
proves them instead:

* a local folder: its files hash (cached by path, size and mtime) to the
  content pin its profile recorded; a folder changed since is refused with
  :class:`LocalFolderChangedError`, which says to re-resolve;
* an HF-cache snapshot of a pinned commit: complete
  (``comfy_llm_profiles.scan_hf_cache_snapshot``), every link inside the
  repository's ``blobs/``, every blob's content matching its name (sha256 for
  LFS files, git blob sha1 otherwise). One that fails is not used; staging
  downloads into its own root as if it were absent.

A proven folder is recorded for this process with each file's size and
mtime; ``require_completed_snapshot`` accepts it while they hold, so a
backend loads it like any staged snapshot.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from comfy_llm_core import ProgressCallback, ignore_progress
from comfy_llm_profiles import (
    FolderScan,
    LocalFolderError,
    ProfileError,
    content_pin,
    hash_files,
    hf_cache_repository_dir,
    read_settings,
    scan_folder,
    scan_gguf_files,
    scan_hf_cache_snapshot,
)

from ._snapshot import StagedSnapshot, in_place_snapshot
from .errors import LocalFolderChangedError

__all__ = [
    "find_hf_cache_snapshot",
    "is_verified_in_place",
    "stage_local_folder",
    "verify_local_folder",
]


@dataclass(frozen=True, slots=True)
class _Proof:
    repository: str
    revision: str
    stats: tuple[tuple[str, int, int], ...]  # (resolved file, size, mtime_ns)


_LOCK = threading.Lock()
_PROVEN: dict[str, _Proof] = {}


def _record(folder: Path, repository: str, revision: str, scan: FolderScan) -> None:
    stats = tuple((str(f.target), f.size, f.mtime_ns) for f in scan.files)
    with _LOCK:
        _PROVEN[str(folder)] = _Proof(repository, revision, stats)


def is_verified_in_place(path: Path, repository: str | None, revision: str | None) -> str | None:
    """None when ``path`` was proven here and is unchanged, else why not."""
    with _LOCK:
        proof = _PROVEN.get(str(Path(path)))
    if proof is None:
        return "it was not verified in place in this process"
    if (repository and proof.repository != repository) or (revision and proof.revision != revision):
        return f"it was verified for {proof.repository}@{proof.revision}"
    for target, size, mtime_ns in proof.stats:
        try:
            info = os.stat(target)
        except OSError:
            return f"{target} is gone"
        if (info.st_size, info.st_mtime_ns) != (size, mtime_ns):
            return f"{target} changed since it was verified"
    return None


def verify_local_folder(
    folder: Path,
    *,
    repository: str,
    content_pin_expected: str,
    storage_root: Path,
    files: Sequence[str] = (),
) -> tuple[str, ...]:
    """Prove a local folder still holds what its profile pinned; return its files.

    ``files`` names the only files the profile pinned (a GGUF model and its
    projector among other quantizations); empty means the whole checkpoint folder.

    Raises:
        LocalFolderChangedError: Its content pin differs now (or it fails the gate now).
    """
    max_bytes = read_settings().max_download_bytes
    try:
        scan = (
            scan_gguf_files(folder, files, max_weight_bytes=max_bytes)
            if files
            else scan_folder(folder, max_weight_bytes=max_bytes, target="")
        )
        now = content_pin(scan, hash_files(scan, storage_root))
    except ProfileError as error:
        raise LocalFolderChangedError(str(folder), content_pin_expected, None, str(error)) from None
    if now != content_pin_expected:
        raise LocalFolderChangedError(str(folder), content_pin_expected, now, None)
    _record(Path(folder), repository, content_pin_expected, scan)
    return tuple(f.path for f in scan.files)


def find_hf_cache_snapshot(
    repository: str, revision: str, storage_root: Path
) -> tuple[Path, tuple[str, ...]] | None:
    """A complete, verifying HF-cache snapshot of ``repository@revision``, or None."""
    try:
        found = scan_hf_cache_snapshot(
            repository, revision, max_weight_bytes=read_settings().max_download_bytes, target=""
        )
    except ProfileError:
        return None
    if found is None:
        return None
    folder, scan = found
    blobs = hf_cache_repository_dir(repository) / "blobs"
    try:
        digests = hash_files(scan, storage_root)
    except LocalFolderError:
        return None
    for file in scan.files:
        etag = file.target.name
        sha256, git_sha1 = digests[file.path]
        if file.target.parent != blobs.resolve() or etag not in (sha256, git_sha1):
            return None  # not huggingface_hub's own blob, or its content is not what it says
    _record(folder, repository, revision, scan)
    return folder, tuple(sorted(f.path for f in scan.files))


def stage_local_folder(
    folder: Path,
    *,
    repository: str,
    content_pin: str,
    storage_root: Path,
    profile_id: str | None = None,
    progress: ProgressCallback = ignore_progress,
    files: Sequence[str] = (),
) -> StagedSnapshot:
    """Use a local checkpoint folder in place, after proving it unchanged since resolution.

    Args:
        folder: The profile's ``local_path``.
        repository: The profile's ``repository`` (``local/<name>``).
        content_pin: The profile's ``revision``.
        storage_root: Where the hash cache lives.
        profile_id: The profile, for the result.
        progress: Receives one DOWNLOAD event (nothing is downloaded).
        files: Only these files were pinned (``gguf_file_names`` of a GGUF profile).

    Raises:
        LocalFolderChangedError: The folder's content differs from the pin.
    """
    started = time.monotonic()
    files = verify_local_folder(
        Path(folder),
        repository=repository,
        content_pin_expected=content_pin,
        storage_root=Path(storage_root),
        files=files,
    )
    return in_place_snapshot(
        Path(folder),
        files,
        repository=repository,
        revision=content_pin,
        profile_id=profile_id,
        started=started,
        progress=progress,
        message="Using the local folder in place",
    )
