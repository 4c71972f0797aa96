"""Errors raised while preparing request inputs.

Every error a user can cause names the input, the value that was refused,
the limit it broke (when there is one) and what to do about it. All of them
derive from :class:`InputError`, itself a :class:`ValueError`, so callers
that only care about "bad input" can catch one class.
"""

from __future__ import annotations

from comfy_llm_core import ComfyLLMError, ErrorAction

__all__ = [
    "FileInputError",
    "ImageInputError",
    "InputError",
    "VideoInputError",
]


class InputError(ComfyLLMError, ValueError):
    """A request input was refused.

    Attributes:
        value: The offending value when it is a number worth reporting (a
            count, a size), else ``None``.
        limit: The limit that ``value`` broke, else ``None``.
    """

    action = ErrorAction.FIX_INPUT

    def __init__(
        self,
        message: str,
        *,
        value: int | float | None = None,
        limit: int | float | None = None,
    ) -> None:
        super().__init__(message)
        self.value = value
        self.limit = limit


class ImageInputError(InputError):
    """The IMAGE input was refused.

    Attributes:
        index: Position in the batch of the offending image, when one image
            (rather than the whole batch) is at fault.
    """

    def __init__(
        self,
        message: str,
        *,
        index: int | None = None,
        value: int | float | None = None,
        limit: int | float | None = None,
    ) -> None:
        super().__init__(message, value=value, limit=limit)
        self.index = index


class VideoInputError(InputError):
    """The VIDEO input was refused or could not be read.

    Attributes:
        source: A short description of the video (a file name, ``"stream"``
            or ``"frames tensor"``), never a full machine path.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        value: int | float | None = None,
        limit: int | float | None = None,
    ) -> None:
        super().__init__(message, value=value, limit=limit)
        self.source = source


class FileInputError(InputError):
    """A file input was refused.

    Attributes:
        filename: The name of the file at fault (as the user gave it, without
            directories), or ``None`` for errors about the set of files.
    """

    def __init__(
        self,
        message: str,
        *,
        filename: str | None = None,
        value: int | float | None = None,
        limit: int | float | None = None,
    ) -> None:
        super().__init__(message, value=value, limit=limit)
        self.filename = filename
