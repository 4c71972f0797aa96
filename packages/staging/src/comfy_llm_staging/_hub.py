"""The two Hub calls staging makes, and the translation of their errors.

1. :func:`list_allowed_files`: ``model_info(repo, revision=<commit>,
   files_metadata=True)`` gives every file's size, git blob id and, for LFS
   files, sha256: the reference the download is verified against.
2. :func:`download`: ``snapshot_download`` into the in-progress directory with
   the allow-list, the ignore-list, an explicit endpoint and the progress
   adapter. huggingface_hub skips files already present with matching
   metadata, so a second call resumes an interrupted staging.
"""

from __future__ import annotations

import dataclasses
import errno
import shutil
from pathlib import Path
from typing import Any

from huggingface_hub import HfApi, snapshot_download
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import filter_repo_objects

from ._layout import ALLOW_PATTERNS, IGNORE_PATTERNS
from .errors import (
    InsufficientDiskSpaceError,
    SnapshotAccessError,
    SnapshotContentError,
    SnapshotDownloadError,
    SnapshotRevisionNotFoundError,
    StagingError,
)

# HfHubHTTPError derives from OSError and from its HTTP library's base error
# (httpx2 in huggingface_hub 2.x, httpx in 1.x); transport errors derive from
# the latter. Catch both families without importing the library by name.
_TRANSLATED_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    *(
        base
        for base in HfHubHTTPError.__mro__[1:]
        if base not in (OSError, Exception, BaseException, object)
    ),
)


@dataclasses.dataclass(frozen=True)
class RemoteFile:
    """One allowed file of a revision, as the Hub describes it.

    Attributes:
        path: Path inside the repository (POSIX).
        size: Size in bytes of the real content (the LFS object for LFS files).
        sha256: The LFS sha256 (hex), or None for a file stored in git.
        blob_id: The git blob id (sha1 hex) of a file stored in git, if known.
    """

    path: str
    size: int
    sha256: str | None
    blob_id: str | None


def list_allowed_files(
    repository: str, revision: str, *, endpoint: str, token: str | None
) -> list[RemoteFile]:
    """Return the allowed files of a revision with their verification data.

    Args:
        repository: ``owner/name``.
        revision: A 40-hex commit.
        endpoint: The Hub endpoint.
        token: A Hub token, or None for huggingface_hub's default (HF_TOKEN).

    Returns:
        The files matching the allow-list and not the ignore-list, sorted by path.

    Raises:
        SnapshotAccessError: Missing, private or gated repository.
        SnapshotRevisionNotFoundError: The commit does not exist.
        SnapshotContentError: No config.json among the allowed files, or
            metadata without sizes.
        SnapshotDownloadError: Network or Hub failure.
    """
    try:
        info = HfApi(endpoint=endpoint, token=token).model_info(
            repository, revision=revision, files_metadata=True
        )
    except Exception as error:
        raise translate_error(error, repository, revision) from error
    if info.sha and info.sha != revision:
        raise SnapshotContentError(
            repository, revision, f"the Hub answered with commit {info.sha} instead"
        )
    siblings = list(
        filter_repo_objects(
            info.siblings or [],
            allow_patterns=list(ALLOW_PATTERNS),
            ignore_patterns=list(IGNORE_PATTERNS),
            key=lambda sibling: sibling.rfilename,
        )
    )
    files = []
    for sibling in siblings:
        lfs = sibling.lfs
        size = (lfs.size if lfs is not None else None) or sibling.size
        if size is None:
            raise SnapshotContentError(
                repository, revision, f"the Hub metadata gives no size for {sibling.rfilename}"
            )
        files.append(
            RemoteFile(
                path=sibling.rfilename,
                size=int(size),
                sha256=lfs.sha256.lower() if lfs is not None and lfs.sha256 else None,
                blob_id=sibling.blob_id if lfs is None else None,
            )
        )
    if not any(remote.path == "config.json" for remote in files):
        raise SnapshotContentError(repository, revision, "it has no config.json")
    return sorted(files, key=lambda remote: remote.path)


def download(
    repository: str,
    revision: str,
    *,
    local_dir: Path,
    endpoint: str,
    token: str | None,
    tqdm_class: type[Any],
    needed_bytes: int,
) -> None:
    """Download the allowed files of a revision into ``local_dir``.

    Args:
        repository: ``owner/name``.
        revision: A 40-hex commit.
        local_dir: The in-progress directory.
        endpoint: The Hub endpoint.
        token: A Hub token, or None for huggingface_hub's default.
        tqdm_class: The progress adapter class.
        needed_bytes: What the free-space check asked for (for a disk-full error).

    Raises:
        SnapshotAccessError: Missing, private or gated repository.
        SnapshotRevisionNotFoundError: The commit does not exist.
        SnapshotDownloadError: Network or Hub failure (partial files are kept).
        InsufficientDiskSpaceError: The disk filled up.
    """
    try:
        snapshot_download(
            repo_id=repository,
            revision=revision,
            local_dir=str(local_dir),
            allow_patterns=list(ALLOW_PATTERNS),
            ignore_patterns=list(IGNORE_PATTERNS),
            endpoint=endpoint,
            token=token,
            tqdm_class=tqdm_class,
        )
    except Exception as error:
        translated = translate_error(error, repository, revision)
        if isinstance(error, OSError) and error.errno == errno.ENOSPC:
            free = shutil.disk_usage(local_dir).free
            translated = InsufficientDiskSpaceError(str(local_dir), needed_bytes, free)
        if translated is error:
            raise
        raise translated from error


def translate_error(error: Exception, repository: str, revision: str) -> Exception:
    """Return the staging error for a huggingface_hub error, or ``error`` itself.

    Errors that are not network, Hub or disk errors (a progress callback's
    cancellation, a programming error) are returned unchanged.
    """
    if isinstance(error, StagingError):
        return error
    if isinstance(error, GatedRepoError):
        return SnapshotAccessError(repository, revision, gated=True)
    if isinstance(error, RepositoryNotFoundError):
        return SnapshotAccessError(repository, revision, gated=False)
    if isinstance(error, RevisionNotFoundError):
        return SnapshotRevisionNotFoundError(repository, revision)
    if isinstance(error, HfHubHTTPError):
        status = getattr(getattr(error, "response", None), "status_code", None)
        if status in (401, 403):
            return SnapshotAccessError(repository, revision, gated=False, detail=f"HTTP {status}")
    if isinstance(error, _TRANSLATED_ERRORS):
        detail = " ".join(str(error).split()) or type(error).__name__
        return SnapshotDownloadError(
            repository, revision, f"{type(error).__name__}: {detail[:500]}"
        )
    return error
