"""The one way comfy-llm writes a file that someone else may be reading.

Manifests, pinned facts, caption files and the ComfyUI shim are all written
the same way: a temporary file in the target's own folder (same filesystem,
so the rename is atomic), fsynced, then ``os.replace``-d over the target. A
reader sees the old file or the new one, never half of one; a failure
(Cancel, a full disk) leaves the old file and no temporary behind.

The file is created with mode 0644 minus the process umask, as an editor
would create it (``tempfile.mkstemp`` makes 0600, a bare ``os.open`` 0755
with some callers' flags), and the temporary is opened with ``O_NOFOLLOW``
and ``O_EXCL`` so a planted link is never written through. A target that is
itself a symlink is refused: the caller asked for a file in that folder,
not wherever the link points.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
from pathlib import Path

from comfy_llm_core._errors import DiskFullError

__all__ = [
    "DEFAULT_FILE_MODE",
    "DISK_FULL_ERRNOS",
    "disk_full",
    "make_folder",
    "write_atomically",
]

DEFAULT_FILE_MODE = 0o644
"""Before the umask: owner read/write, everyone else read."""

_GIB = 1024**3
DISK_FULL_ERRNOS = frozenset(
    code for code in (errno.ENOSPC, getattr(errno, "EDQUOT", None)) if code is not None
)
"""OSError numbers that mean "no room": bytes, a quota, or (ENOSPC too) inodes."""


def disk_full(path: Path, what: str) -> DiskFullError:
    """The :class:`DiskFullError` for a write to ``path`` that found no room.

    The free space is read on the nearest folder of ``path`` that exists (a
    folder that could not be created on the full disk has none to ask).
    """
    folder = path.parent
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    try:
        available = shutil.disk_usage(folder).free
        stats = os.statvfs(folder) if hasattr(os, "statvfs") else None
    except OSError:
        available, stats = 0, None
    inodes = stats is not None and stats.f_files > 0 and stats.f_favail == 0
    return DiskFullError(str(path), available, inodes_exhausted=inodes, what=what)


def make_folder(folder: Path, what: str) -> None:
    """``mkdir -p folder``; a full disk (bytes, quota or inodes) is a :class:`DiskFullError`.

    Creating a folder needs an inode and a directory block: on a full disk it
    fails with ``[Errno 28]`` before any file write could say so.

    Args:
        folder: The folder to create (with its parents; an existing one is fine).
        what: What will be written there, for the message ("the Hub facts cache").

    Raises:
        DiskFullError: No room to create it.
        OSError: Any other reason (``errno`` tells: EACCES, ENOTDIR, ...).
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        if error.errno not in DISK_FULL_ERRNOS:
            raise
        raise disk_full(folder, what) from None


_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)


def write_atomically(
    path: str | os.PathLike[str],
    data: str | bytes,
    *,
    mode: int = DEFAULT_FILE_MODE,
    keep_existing: bool = False,
    what: str | None = None,
) -> bool:
    """Write ``data`` (text as UTF-8) to ``path`` atomically; return whether it was written.

    Args:
        path: The file to write; its folder must exist.
        data: The whole content.
        mode: Permission bits before the umask (default 0644).
        keep_existing: When the target exists by the time the data is on disk
            (another process won a race), leave it and return False.
        what: What the file is, for a disk-full message ("the model manifest").

    Raises:
        DiskFullError: No room (ENOSPC, EDQUOT, inodes); the target is unchanged.
        OSError: ``path`` is a symlink (``errno.ELOOP``: never written through), or
            the folder cannot be written (``errno`` tells why: ENOSPC, EDQUOT,
            EACCES, ...); the target is unchanged and no temporary stays.
    """
    target = Path(path)
    if target.is_symlink():
        raise OSError(errno.ELOOP, "is a symlink; comfy-llm never writes through it", str(target))
    payload = data.encode("utf-8") if isinstance(data, str) else data
    temporary = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        return _write(temporary, target, payload, mode=mode, keep_existing=keep_existing)
    except OSError as error:
        if isinstance(error, DiskFullError) or error.errno not in DISK_FULL_ERRNOS:
            raise
        raise disk_full(target, what or f"the file {target.name!r}") from None


def _write(
    temporary: Path, target: Path, payload: bytes, *, mode: int, keep_existing: bool
) -> bool:
    fd = os.open(temporary, _FLAGS, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        if keep_existing and os.path.lexists(target):
            temporary.unlink()
            return False
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return True
