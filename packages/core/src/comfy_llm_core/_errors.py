"""The error base every comfy-llm package derives its own base from.

Two things are decided here, once, for every package:

* **Pickling.** Errors cross process boundaries (the Modal dispatcher ships
  them back from a worker). Subclasses take their own ``__init__`` arguments,
  so the default ``BaseException`` pickling breaks; this base pickles as
  (class, message, attributes) and restores without calling ``__init__``.
* **What the caller should do.** ``action`` says whether the user must fix an
  input, a retry may succeed (transient), or this worker should give up
  (fatal). The CLI and the dispatcher read it instead of parsing messages.
"""

from __future__ import annotations

import enum
from typing import Any

__all__ = ["ComfyLLMError", "DiskFullError", "ErrorAction", "rebuild_error"]

_HEAPTYPE = 1 << 9


class ErrorAction(enum.StrEnum):
    """What a caller should do about an error."""

    FIX_INPUT = "fix_input"
    """The request, a setting or the model choice is wrong: change it."""
    RETRY = "retry"
    """Transient (network, a busy lease, memory another job holds): try again."""
    FATAL = "fatal"
    """This worker or installation cannot serve the request: give up on it."""


_IMPORT_ERROR_FIELDS = ("name", "path")
"""ImportError keeps these in slots, not in ``__dict__``: carried separately."""


def _restore(
    cls: type[ComfyLLMError],
    message: str,
    state: dict[str, Any],
    slots: dict[str, Any] | None = None,
) -> ComfyLLMError:
    # Allocate through the builtin that lays the instance out (OSError, MemoryError, ...):
    # the first non-heap class on the __base__ chain, as CPython's own safety check wants.
    layout: Any = cls
    while layout.__flags__ & _HEAPTYPE:
        layout = layout.__base__
    error: ComfyLLMError = layout.__new__(cls, message)
    BaseException.__init__(error, message)
    error.__dict__.update(state)
    for name, value in (slots or {}).items():
        setattr(error, name, value)
    return error


def rebuild_error(
    cls: type[ComfyLLMError],
    message: str,
    fields: dict[str, Any],
    slots: dict[str, Any] | None = None,
) -> ComfyLLMError:
    """An instance of ``cls`` with this message and attributes, ``__init__`` not called.

    The contract every subclass keeps (message plus attributes is the whole
    error) is what lets a plain-data wire (the Modal worker's answers) carry an
    error as its class name and fields; the caller allow-lists ``cls``.
    """
    if not (isinstance(cls, type) and issubclass(cls, ComfyLLMError)):
        raise TypeError(f"{cls!r} is not a ComfyLLMError class")
    error = _restore(cls, message, dict(fields), slots)
    if "action" in fields:
        error.action = ErrorAction(fields["action"])
    return error


class ComfyLLMError(Exception):
    """Base of every package's base error.

    Subclasses set ``action`` as a class attribute where it differs from the
    base's; an instance may override it when only the raise site knows.
    """

    action: ErrorAction = ErrorAction.FATAL

    def __reduce__(self) -> tuple[Any, ...]:
        slots = (
            {name: getattr(self, name) for name in _IMPORT_ERROR_FIELDS}
            if isinstance(self, ImportError)
            else {}
        )
        return (_restore, (type(self), str(self), dict(self.__dict__), slots))


_GIB = 1024**3


class DiskFullError(ComfyLLMError, OSError):
    """A write failed because the disk (or a quota) has no room: never a bare ``[Errno 28]``.

    Not an input to fix: the same request works once there is room, so the
    action is ``RETRY`` and the CLI exits with its own code for it (74,
    EX_IOERR). Staging's :class:`InsufficientDiskSpaceError` is one too.

    Attributes:
        path: The file (or folder) being written.
        available_bytes: Free bytes there when the write failed.
        inodes_exhausted: The volume ran out of inodes, not bytes.
    """

    action = ErrorAction.RETRY

    def __init__(
        self,
        path: str,
        available_bytes: int,
        *,
        inodes_exhausted: bool = False,
        what: str = "a file",
        message: str | None = None,
    ) -> None:
        self.path = path
        self.available_bytes = available_bytes
        self.inodes_exhausted = inodes_exhausted
        if message is None:
            if inodes_exhausted:
                problem = (
                    "ran out of inodes (free file entries); free bytes "
                    f"({available_bytes / _GIB:.2f} GiB) do not help while no inode is free"
                )
            else:
                problem = f"is full ({available_bytes / _GIB:.2f} GiB free there now)"
            message = (
                f"The disk holding {path} {problem}: writing {what} failed and nothing was "
                "changed. Free some space on that disk, or point "
                "COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT at a volume with more room, then try again."
            )
        super().__init__(message)
