"""Checks of downloaded files against the Hub metadata, and the free-disk check.

Every file is checked for size. LFS files (the weights) are checked against
their LFS sha256; files stored in git against their git blob id (sha1 of
``"blob <size>"``, a NUL byte, then the content). A file that fails is
deleted, together with huggingface_hub's bookkeeping for it, so the next
staging fetches it afresh.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from . import _settings
from ._hub import RemoteFile
from .errors import InsufficientDiskSpaceError, SnapshotVerificationError

_CHUNK_BYTES = 8 * 1024 * 1024


def hash_file(path: Path, on_bytes: Callable[[int], None] | None = None) -> tuple[str, str]:
    """Return (sha256, git blob sha1) of a file, in one pass.

    Args:
        path: The file.
        on_bytes: Called with the size of every chunk read.

    Returns:
        Both digests as lower-case hex.

    Raises:
        OSError: The file cannot be read.
    """
    sha256 = hashlib.sha256()
    git_sha1 = hashlib.sha1(usedforsecurity=False)
    git_sha1.update(f"blob {path.stat().st_size}\0".encode())
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK_BYTES):
            sha256.update(chunk)
            git_sha1.update(chunk)
            if on_bytes is not None:
                on_bytes(len(chunk))
    return sha256.hexdigest(), git_sha1.hexdigest()


def local_size(directory: Path, remote: RemoteFile) -> int | None:
    """Return the size of ``remote``'s local copy under ``directory``, or None if absent."""
    try:
        return (directory / remote.path).stat().st_size
    except OSError:
        return None


def discard(directory: Path, relative: str) -> None:
    """Delete a local file and huggingface_hub's download metadata for it."""
    (directory / relative).unlink(missing_ok=True)
    metadata = directory / ".cache" / "huggingface" / "download" / f"{relative}.metadata"
    with contextlib.suppress(OSError):
        metadata.unlink(missing_ok=True)


def verify_file(
    directory: Path, remote: RemoteFile, on_bytes: Callable[[int], None] | None = None
) -> dict[str, int | str]:
    """Check one downloaded file; delete it and raise when it does not match.

    Args:
        directory: The in-progress snapshot directory.
        remote: The file's Hub metadata.
        on_bytes: Called with the size of every chunk hashed.

    Returns:
        The marker record ``{"size", "sha256"}``.

    Raises:
        SnapshotVerificationError: Missing file, wrong size, or wrong digest.
    """
    path = directory / remote.path
    size = local_size(directory, remote)
    if size is None:
        raise SnapshotVerificationError(remote.path, "size", remote.size, "missing (no file)")
    if size != remote.size:
        discard(directory, remote.path)
        raise SnapshotVerificationError(remote.path, "size", remote.size, size)
    sha256, git_sha1 = hash_file(path, on_bytes)
    if remote.sha256 is not None and sha256 != remote.sha256:
        discard(directory, remote.path)
        raise SnapshotVerificationError(remote.path, "sha256", remote.sha256, sha256)
    if remote.sha256 is None and remote.blob_id and git_sha1 != remote.blob_id.lower():
        discard(directory, remote.path)
        raise SnapshotVerificationError(remote.path, "git-sha1", remote.blob_id, git_sha1)
    return {"size": size, "sha256": sha256}


def bytes_missing(directory: Path, files: Iterable[RemoteFile]) -> int:
    """Return how many bytes are still to download (files absent or of the wrong size)."""
    return sum(remote.size for remote in files if local_size(directory, remote) != remote.size)


def check_free_space(directory: Path, missing_bytes: int) -> None:
    """Refuse to start a download that cannot fit.

    Args:
        directory: An existing directory on the target volume.
        missing_bytes: Bytes still to download.

    Raises:
        InsufficientDiskSpaceError: Free space is below ``missing_bytes`` plus
            the safety margin.
    """
    if missing_bytes <= 0:
        return
    needed = missing_bytes + _settings.DISK_MARGIN_BYTES
    available = shutil.disk_usage(directory).free
    if available < needed:
        raise InsufficientDiskSpaceError(str(directory), needed, available)
