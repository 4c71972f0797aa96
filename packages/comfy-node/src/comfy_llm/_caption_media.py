"""Which files of a folder a caption batch takes, and what each is given to the model as.

Images and videos, directly in the folder or (asked for) in its subfolders,
sorted by their path below the folder; hidden files and folders are skipped,
and a symlink is followed only when it stays inside the folder. A video is
given to the model as the describe node gives one: ``video_frames`` frames
sampled evenly across the clip (``comfy_llm_inputs``), so a clip's caption
is what the describe node would answer for it.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from comfy_llm_core import defaults

from comfy_llm.errors import CaptionFolderError

if TYPE_CHECKING:
    from comfy_llm_profiles import ModelProfile

__all__ = [
    "IMAGE_SUFFIXES",
    "MAX_CAPTION_IMAGES",
    "VIDEO_SUFFIXES",
    "find_media",
    "is_video",
    "media_input",
    "select_media",
    "split_patterns",
]

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif", ".tif", ".tiff"})
VIDEO_SUFFIXES = frozenset({".mp4", ".mov", ".webm", ".mkv", ".avi", ".m4v"})
MAX_CAPTION_IMAGES = 10_000
MAX_SUBFOLDER_DEPTH = 16


def is_video(path: Path | None) -> bool:
    """Whether a folder item is a video (by its extension)."""
    return path is not None and path.suffix.lower() in VIDEO_SUFFIXES


def find_media(
    folder: str | Path,
    *,
    limit: int = MAX_CAPTION_IMAGES,
    subfolders: bool = False,
    videos: bool = True,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    at_most: int = 0,
) -> list[Path]:
    """The images (and videos) in ``folder``, sorted by their path below it.

    ``include``/``exclude``/``at_most`` select among them (``select_media``).

    Raises:
        CaptionFolderError: Not a folder, a symlink leaving it, subfolders
            deeper than ``MAX_SUBFOLDER_DEPTH``, more than ``limit`` files, or
            patterns no file matches.
    """
    base = Path(folder).expanduser()
    if not base.is_dir():
        raise CaptionFolderError(str(base), "is not a folder")
    real_base = base.resolve()
    suffixes = IMAGE_SUFFIXES | VIDEO_SUFFIXES if videos else IMAGE_SUFFIXES
    found: list[Path] = []
    pending = [(base, 0)]
    while pending:
        current, depth = pending.pop()
        for entry in sorted(current.iterdir(), key=lambda p: p.name):
            if entry.name.startswith("."):
                continue
            if entry.is_symlink() and not entry.resolve().is_relative_to(real_base):
                if entry.suffix.lower() in suffixes or (subfolders and entry.is_dir()):
                    what = "a folder" if entry.is_dir() else "a file"
                    raise CaptionFolderError(
                        str(base),
                        f"{_below(entry, base)!r} is a symlink to {what} outside the folder",
                    )
                continue
            if subfolders and entry.is_dir() and not entry.is_symlink():
                if depth + 1 > MAX_SUBFOLDER_DEPTH:
                    raise CaptionFolderError(
                        str(base),
                        f"has subfolders deeper than {MAX_SUBFOLDER_DEPTH} levels "
                        f"({_below(entry, base)!r})",
                    )
                pending.append((entry, depth + 1))
            elif entry.suffix.lower() in suffixes and entry.is_file():
                found.append(entry)
        if len(found) > limit:
            break
    if len(found) > limit:
        what = "images and videos" if videos else "images"
        raise CaptionFolderError(
            str(base), f"holds {len(found)} {what} or more, more than the limit of {limit}"
        )
    ordered = sorted(found, key=lambda p: _below(p, base))
    return select_media(ordered, base, include=include, exclude=exclude, limit=at_most)


def split_patterns(text: str) -> tuple[str, ...]:
    """Glob patterns from one text input: separated by commas or new lines."""
    return tuple(p.strip() for p in text.replace("\n", ",").split(",") if p.strip())


def _matches(name: str, patterns: Sequence[str]) -> bool:
    """A pattern with ``/`` matches the path below the folder, one without it the file name.

    Case-insensitive (``*.png`` takes ``A.PNG``); ``*`` also crosses ``/``
    (``fnmatch``), so ``sub/*`` takes everything below ``sub``.
    """
    lowered = name.lower()
    base = lowered.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(lowered if "/" in p else base, p.lower()) for p in patterns)


def select_media(
    found: Sequence[Path],
    folder: str | Path,
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    limit: int = 0,
) -> list[Path]:
    """The files of ``found`` the patterns keep, at most ``limit`` (0: all), in their order.

    Raises:
        CaptionFolderError: Patterns were given and no file matches them.
    """
    base = Path(folder).expanduser()
    kept = [
        path
        for path in found
        if (not include or _matches(_below(path, base), include))
        and not _matches(_below(path, base), exclude)
    ]
    if found and not kept:
        raise CaptionFolderError(
            str(base),
            f"none of its {len(found)} files matches include {list(include)} / exclude "
            f"{list(exclude)}: patterns match the file name (*.png) or, with a /, the path "
            "below the folder (sub/*)",
        )
    return kept[:limit] if limit else kept


def _below(path: Path, base: Path) -> str:
    return os.path.relpath(path, base).replace(os.sep, "/")


def item_name(path: Path, folder: str | Path) -> str:
    """A folder item's name: its path below the folder (``sub/a.png``)."""
    return _below(path, Path(folder).expanduser())


def media_input(pixels: Any, path: Path | None, profile: ModelProfile) -> dict[str, Any]:
    """The ``LLMRequest.inputs`` of one item: its image, or its video's frames.

    A clip gets the describe node's default frame count, lowered to what
    the model takes per request (the describe node refuses more; a batch
    cannot ask).
    """
    if pixels is not None:
        return {"images": pixels}
    if is_video(path):
        limit = profile.limits.media.video.max_video_frames
        frames = min(defaults.VIDEO_FRAMES, limit) if limit else defaults.VIDEO_FRAMES
        return {"video": str(path), "video_frames": frames}
    from comfy_llm_inputs import images_from_files

    return {"images": list(images_from_files([str(path)]))}
