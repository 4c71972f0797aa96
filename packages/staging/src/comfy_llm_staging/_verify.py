"""Checks of downloaded files against the Hub metadata, and the free-disk check.

Every file's local path comes from ``_layout.file_in`` (proven inside the
in-progress folder), so checking or deleting never reaches outside it.
Every file is checked for size. LFS files (the weights) are checked against
their LFS sha256; files stored in git against their git blob id (sha1 of
``"blob <size>"``, a NUL byte, then the content). A file that fails is
deleted, together with huggingface_hub's bookkeeping for it, so the next
staging fetches it afresh.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from comfy_llm_profiles import hash_file

from . import _layout, _settings
from ._hub import RemoteFile
from .errors import InsufficientDiskSpaceError, SnapshotVerificationError


class Checker:
    """Checks files of one in-progress snapshot folder against their Hub metadata.

    Args:
        directory: The in-progress snapshot folder.
        repository: ``owner/name`` (for errors).
        revision: The 40-hex commit (for errors).
    """

    def __init__(self, directory: Path, repository: str, revision: str) -> None:
        self.directory = directory
        self.repository = repository
        self.revision = revision

    def path(self, relative: str) -> Path:
        """The local path of a repository file, proven inside the folder."""
        return _layout.file_in(
            self.directory, relative, repository=self.repository, revision=self.revision
        )

    def local_size(self, remote: RemoteFile) -> int | None:
        """Size of ``remote``'s local regular file, or None if absent (or not a regular file)."""
        try:
            stat = os.lstat(self.path(remote.path))
        except OSError:
            return None
        return stat.st_size if (stat.st_mode & 0o170000) == 0o100000 else None

    def discard(self, relative: str) -> None:
        """Delete a local file and huggingface_hub's download metadata for it."""
        self.path(relative).unlink(missing_ok=True)
        metadata = self.directory / ".cache" / "huggingface" / "download" / f"{relative}.metadata"
        with contextlib.suppress(OSError):
            if not any(p.is_symlink() for p in (metadata, *metadata.parents)):
                metadata.unlink(missing_ok=True)

    def verify(
        self, remote: RemoteFile, on_bytes: Callable[[int], None] | None = None
    ) -> dict[str, int | str]:
        """Check one downloaded file; delete it and raise when it does not match.

        Returns:
            The marker record ``{"size", "sha256"}``.

        Raises:
            SnapshotVerificationError: Missing file, wrong size, or wrong digest.
            UnsafeSnapshotPathError: The path would leave the folder.
        """
        size = self.local_size(remote)
        if size is None:
            raise SnapshotVerificationError(remote.path, "size", remote.size, "missing (no file)")
        if size != remote.size:
            self.discard(remote.path)
            raise SnapshotVerificationError(remote.path, "size", remote.size, size)
        sha256, git_sha1 = hash_file(self.path(remote.path), on_bytes)
        if remote.sha256 is not None and sha256 != remote.sha256:
            self.discard(remote.path)
            raise SnapshotVerificationError(remote.path, "sha256", remote.sha256, sha256)
        if remote.sha256 is None and remote.blob_id and git_sha1 != remote.blob_id.lower():
            self.discard(remote.path)
            raise SnapshotVerificationError(remote.path, "git-sha1", remote.blob_id, git_sha1)
        return {"size": size, "sha256": sha256}

    def bytes_missing(self, files: Iterable[RemoteFile]) -> int:
        """Bytes still to download (files absent or of the wrong size)."""
        return sum(remote.size for remote in files if self.local_size(remote) != remote.size)

    def bytes_present(self, files: Iterable[RemoteFile]) -> int:
        """Bytes of the listed files already on disk (whole or partial)."""
        return sum(self.local_size(remote) or 0 for remote in files)


def free_inodes(directory: Path) -> int | None:
    """Inodes an unprivileged process may still create on ``directory``'s volume (None: unknown)."""
    try:
        stats = os.statvfs(directory)
    except (AttributeError, OSError):  # Windows has no statvfs
        return None
    return None if stats.f_files == 0 else stats.f_favail  # f_files 0: no inode accounting


def check_free_space(
    directory: Path,
    missing_bytes: int,
    *,
    missing_files: int = 0,
    snapshot_bytes: int = 0,
    reclaimable_bytes: int = 0,
) -> None:
    """Refuse to start a download that cannot fit, in bytes or in inodes.

    Args:
        directory: An existing directory on the target volume.
        missing_bytes: Bytes still to download.
        missing_files: Files still to create (each needs an inode, plus bookkeeping).
        snapshot_bytes: The snapshot's whole size (for the message).
        reclaimable_bytes: Bytes of this snapshot already on that disk (for the message).

    Raises:
        InsufficientDiskSpaceError: Free space is below ``missing_bytes`` plus
            the safety margin, or too few inodes are free.
    """
    if missing_bytes <= 0 and missing_files <= 0:
        return
    needed = missing_bytes + _settings.DISK_MARGIN_BYTES
    available = shutil.disk_usage(directory).free
    inodes = free_inodes(directory)
    short_of_inodes = inodes is not None and inodes < 4 * missing_files + 16
    if available < needed or short_of_inodes:
        raise InsufficientDiskSpaceError(
            str(directory),
            needed,
            available,
            snapshot_bytes=snapshot_bytes,
            reclaimable_bytes=reclaimable_bytes,
            inodes_exhausted=short_of_inodes and available >= needed,
            margin_bytes=_settings.DISK_MARGIN_BYTES,
        )
