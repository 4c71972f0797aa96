"""What the CLI's subcommands share: reading their file arguments, the default model."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeAlias

from comfy_llm._targets import detect_target

__all__ = [
    "AddCommon",
    "Subcommands",
    "check_paths",
    "default_model",
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


def check_paths(args: argparse.Namespace) -> None:
    """Refuse a missing path, a directory, a pipe or a device before any model work.

    The full checks (and the reading itself) happen in the inputs package;
    this only makes a typo fail in a second instead of after a download.
    """
    from comfy_llm_inputs import FileInputError, ImageInputError, VideoInputError, path_problem

    for index, path in enumerate(args.image):
        problem = path_problem(path)
        if problem is not None:
            raise ImageInputError(f"--image {path!r} {problem}", index=index)
    for path in args.file:
        problem = path_problem(path)
        if problem is not None:
            raise FileInputError(f"--file {path!r} {problem}", filename=path)
    if args.video is not None:
        problem = path_problem(args.video)
        if problem is not None:
            raise VideoInputError(f"--video {args.video!r} {problem}", source=args.video)


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
