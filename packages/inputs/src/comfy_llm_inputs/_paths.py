"""Input paths: only regular files are read, and nothing ever waits on a pipe.

A path is checked with ``stat`` before it is opened, then opened with
``O_NONBLOCK`` (so a FIFO swapped in meanwhile cannot block the open) and
checked again on the open descriptor. A refused path gets a phrase that says
what it is (a directory, a named pipe, standard input, a device) instead of
"was not found".
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import BinaryIO

from .errors import InputError

__all__ = ["open_regular_file", "path_problem"]

_STDIN_PATHS = frozenset({"-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"})
_SAVE_FIRST = "save the data to a regular file and pass that path"
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device (a terminal or a device file)"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _mode_problem(path: str, mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory, not a file; pass the path of a file inside it"
    if path in _STDIN_PATHS:
        return (
            f"is standard input, here {_kind(mode)}, which is not read (it could wait "
            f"forever); {_SAVE_FIRST}"
        )
    return f"is {_kind(mode)}, not a regular file, and is not read (it could wait forever); " + (
        _SAVE_FIRST
    )


def path_problem(path: str | os.PathLike[str]) -> str | None:
    """Say what is wrong with reading ``path`` as a regular file, or None.

    Args:
        path: The path as the user gave it.

    Returns:
        A phrase to follow the input's name (``"was not found; check the
        path"``, ``"is a directory, not a file; ..."``), or None when it is a
        readable-looking regular file.
    """
    text = os.fspath(path)
    try:
        info = os.stat(text)
    except FileNotFoundError:
        return "was not found; check the path"
    except NotADirectoryError:
        return "was not found (a folder on its path is a file); check the path"
    except PermissionError:
        return "cannot be reached (permission denied on a folder of its path); check the path"
    except (OSError, ValueError) as error:  # ValueError: an embedded NUL
        reason = getattr(error, "strerror", None) or "the path is malformed"
        return f"cannot be read ({reason}); check the path"
    return _mode_problem(text, info.st_mode)


def open_regular_file(
    path: str | os.PathLike[str], fail: Callable[[str], InputError]
) -> tuple[BinaryIO, int]:
    """Open ``path`` for binary reading, but only when it is a regular file.

    Args:
        path: The path as the user gave it.
        fail: Builds the error to raise from a :func:`path_problem` phrase.

    Returns:
        ``(handle, size in bytes)``; the caller closes the handle.

    Raises:
        InputError: Whatever ``fail`` builds, for a missing path, a directory,
            a pipe, standard input, a device, or an unreadable file.
    """
    text = os.fspath(path)
    problem = path_problem(text)
    if problem is not None:
        raise fail(problem)
    try:
        descriptor = os.open(text, _OPEN_FLAGS)
    except OSError as error:
        raise fail(f"cannot be opened ({error.strerror}); check its permissions") from None
    try:
        info = os.fstat(descriptor)
        problem = _mode_problem(text, info.st_mode)
        if problem is not None:
            raise fail(problem)
        handle = os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise
    return handle, info.st_size
