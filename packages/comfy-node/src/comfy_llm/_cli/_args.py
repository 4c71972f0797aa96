"""What the CLI's subcommands share: reading their file arguments, the default model.

The flags that carry a request's inputs (``--image``, ``--video``, ``--file``)
are one table, :data:`INPUT_FLAGS`: each row says its flag, the
``prepare_inputs`` keyword it fills and how a bad path is refused, so a new
kind of input is a row, not a flag, a check and a keyword in three places.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeAlias

from comfy_llm._targets import detect_target

__all__ = [
    "INPUT_FLAGS",
    "AddCommon",
    "InputFlag",
    "Subcommands",
    "add_input_flags",
    "check_paths",
    "default_model",
    "input_values",
    "load_image_files",
    "read_schema_file",
]

Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""What ``add_subparsers`` returns: each subcommand module adds its parser to it."""
AddCommon: TypeAlias = Callable[[argparse.ArgumentParser], None]
"""Adds the options every subcommand shares (``_main``)."""


def load_image_files(paths: list[str]) -> list[Any] | None:
    """Decode image files as RGB with bounded memory (``comfy_llm_inputs.images_from_files``).

    Raises:
        ImageInputError: A path is not a regular file, not an image, or over
            the pixel limit; the message names the file.
    """
    if not paths:
        return None
    from comfy_llm_inputs import images_from_files

    return list(images_from_files(paths))


def _image_refusal(flag: str, path: str, index: int, problem: str) -> Exception:
    from comfy_llm_inputs import ImageInputError

    return ImageInputError(f"{flag} {path!r} {problem}", index=index)


def _video_refusal(flag: str, path: str, index: int, problem: str) -> Exception:
    from comfy_llm_inputs import VideoInputError

    return VideoInputError(f"{flag} {path!r} {problem}", source=path)


def _file_refusal(flag: str, path: str, index: int, problem: str) -> Exception:
    from comfy_llm_inputs import FileInputError

    return FileInputError(f"{flag} {path!r} {problem}", filename=path)


@dataclasses.dataclass(frozen=True)
class InputFlag:
    """A flag whose paths are one of the request's inputs.

    Attributes:
        flag: The option (``--image``).
        name: The ``comfy_llm_inputs.prepare_inputs`` keyword it fills (``images``).
        help: Its ``--help`` line.
        refuse: ``(flag, path, index, problem) -> error`` for a path that cannot be read.
        repeatable: Given several times (a list), else once (one path).
        load: Reads the paths before any model work (a bad image fails in a second),
            else the paths go to the inputs package as they are.
    """

    flag: str
    name: str
    help: str
    refuse: Callable[[str, str, int, str], Exception]
    repeatable: bool = True
    load: Callable[[list[str]], object] | None = None

    @property
    def dest(self) -> str:
        """The ``argparse`` attribute (``--image`` → ``image``)."""
        return self.flag.removeprefix("--").replace("-", "_")

    def paths(self, args: argparse.Namespace) -> list[str]:
        """The paths given (none: an empty list)."""
        value = getattr(args, self.dest)
        return list(value) if self.repeatable else ([] if value is None else [value])


INPUT_FLAGS: tuple[InputFlag, ...] = (
    InputFlag(
        "--image",
        "images",
        "an image file (repeatable; downscaled to fit 4096x4096 as it is decoded)",
        _image_refusal,
        load=load_image_files,
    ),
    InputFlag("--video", "video", "a video file", _video_refusal, repeatable=False),
    InputFlag("--file", "files", "a text or PDF file (repeatable)", _file_refusal),
)
"""``comfy-llm run``'s input flags, in ``--help`` order."""


def add_input_flags(parser: argparse.ArgumentParser) -> None:
    """Add every :data:`INPUT_FLAGS` flag to ``parser``."""
    for row in INPUT_FLAGS:
        if row.repeatable:
            parser.add_argument(row.flag, action="append", default=[], help=row.help)
        else:
            parser.add_argument(row.flag, help=row.help)


def check_paths(args: argparse.Namespace) -> None:
    """Refuse a missing path, a directory, a pipe or a device before any model work.

    The full checks (and the reading itself) happen in the inputs package;
    this only makes a typo fail in a second instead of after a download.
    """
    from comfy_llm_inputs import path_problem

    for row in INPUT_FLAGS:
        for index, path in enumerate(row.paths(args)):
            problem = path_problem(path)
            if problem is not None:
                raise row.refuse(row.flag, path, index, problem)


def input_values(args: argparse.Namespace) -> dict[str, object]:
    """The request's inputs the flags give, by ``prepare_inputs`` keyword (read where asked)."""
    values: dict[str, object] = {}
    for row in INPUT_FLAGS:
        paths = row.paths(args)
        if not paths:
            continue
        if row.load is not None:
            values[row.name] = row.load(paths)
        else:
            values[row.name] = paths if row.repeatable else paths[0]
    return values


def default_model(target: str | None) -> str:
    """The curated model ``comfy-llm run`` uses when ``--model`` is omitted (the list's default)."""
    from comfy_llm_profiles import load_curated_registry

    return load_curated_registry().default_for(detect_target(target)).id


def read_schema_file(path: str | None) -> str | None:
    """The text of ``--schema FILE`` (checked later, with the settings), or None."""
    if not path:
        return None
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"--schema {path!r} is not a file: give a JSON Schema file")
    return file.read_text(encoding="utf-8")
