"""What a request may carry: its modalities and, per modality, its bounds.

A model profile says which modalities its model takes and how much of each
(``comfy_llm_profiles.ProfileLimits`` holds a :class:`MediaLimits`); the
inputs package prepares each input within its own modality's bounds; each
backend declares the modalities its engine accepts. The bounds a profile does
not carry (an image file's pixels and side, the characters of all files
together) keep the defaults here.

A modality's bounds are data: its record names the bounds a profile carries
(``profile_bounds``, the manifest's flat keys) and the bound that counts its
inputs (``count_bound``, zero for a model without the modality), and
:class:`MediaLimits` holds one record per modality under the modality's
value. Profiles read both generically, so a new modality is a member of
:class:`Modality`, its record, and its field here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, ClassVar, Final

__all__ = [
    "FileLimits",
    "ImageLimits",
    "MediaLimits",
    "Modality",
    "VideoLimits",
]

MIB: Final = 1024 * 1024


class Modality(StrEnum):
    """A kind of input a model takes (the value is the profile's spelling)."""

    TEXT = "text"
    IMAGE = "image"
    VIDEO = "video"
    FILE = "file"


def _check(record: object) -> None:
    """Every bound is a whole number >= 0 (a bool field is True or False)."""
    for field in dataclasses.fields(record):  # type: ignore[arg-type]
        value = getattr(record, field.name)
        name = f"{type(record).__name__}.{field.name}"
        if field.type in (bool, "bool"):
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be True or False, not {value!r}")
        elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(
                f"{name} must be a whole number >= 0, not {value!r}; fix the profile's limits"
            )


@dataclasses.dataclass(frozen=True, slots=True)
class ImageLimits:
    """Bounds on the IMAGE input.

    Attributes:
        max_images: Most images in one request.
        max_image_pixels: Most pixels (width x height) in one image file,
            checked from its header before anything is decoded.
        max_image_side: Image files are downscaled (aspect kept) to at most
            this many pixels wide and high as they are decoded.
    """

    max_images: int = 8
    max_image_pixels: int = 150_000_000
    max_image_side: int = 4096
    profile_bounds: ClassVar[tuple[str, ...]] = ("max_images",)
    count_bound: ClassVar[str | None] = "max_images"

    def __post_init__(self) -> None:
        """Refuse a bound that is not a whole number >= 0 (ValueError)."""
        _check(self)


@dataclasses.dataclass(frozen=True, slots=True)
class VideoLimits:
    """Bounds on the VIDEO input.

    Attributes:
        max_video_frames: Most frames sampled from one video.
        allow_mixed_image_video: Whether one request may carry images beside
            the video (some models take only one kind per prompt).
    """

    max_video_frames: int = 32
    allow_mixed_image_video: bool = True
    profile_bounds: ClassVar[tuple[str, ...]] = ("max_video_frames", "allow_mixed_image_video")
    count_bound: ClassVar[str | None] = "max_video_frames"

    def __post_init__(self) -> None:
        """Refuse a bound of the wrong kind (ValueError)."""
        _check(self)


@dataclasses.dataclass(frozen=True, slots=True)
class FileLimits:
    """Bounds on the text and PDF files of one request.

    Attributes:
        max_file_bytes: Most bytes in one file (decoded, before extraction).
        max_total_file_bytes: Most bytes across all files.
        max_file_characters: Most characters extracted from one file.
        max_total_characters: Most characters extracted from all files.
        max_pdf_pages: Most pages in one PDF.
    """

    max_file_bytes: int = 8 * MIB
    max_total_file_bytes: int = 32 * MIB
    max_file_characters: int = 200_000
    max_total_characters: int = 400_000
    max_pdf_pages: int = 200
    profile_bounds: ClassVar[tuple[str, ...]] = (
        "max_file_bytes",
        "max_total_file_bytes",
        "max_file_characters",
        "max_pdf_pages",
    )
    count_bound: ClassVar[str | None] = None  # every model reads files (their text)

    def __post_init__(self) -> None:
        """Refuse a bound that is not a whole number >= 0 (ValueError)."""
        _check(self)


MediaBounds = ImageLimits | VideoLimits | FileLimits
"""One modality's bounds record."""


@dataclasses.dataclass(frozen=True, slots=True)
class MediaLimits:
    """One request's bounds, one record per modality, each under the modality's value.

    ``limits[Modality.IMAGE]`` is ``limits.image``; :meth:`records` lists them all.
    """

    image: ImageLimits = ImageLimits()
    video: VideoLimits = VideoLimits()
    file: FileLimits = FileLimits()

    def __getitem__(self, modality: Modality) -> MediaBounds:
        """The bounds of ``modality`` (KeyError for one without bounds, e.g. text)."""
        name = Modality(modality).value
        if name not in self.__dataclass_fields__:
            raise KeyError(modality)
        bounds: MediaBounds = getattr(self, name)
        return bounds

    @classmethod
    def of(cls, bounds: Mapping[Modality, Mapping[str, Any]]) -> MediaLimits:
        """Limits from some bounds per modality (``{IMAGE: {"max_images": 2}}``); others default.

        Raises:
            ValueError: A bound of the wrong kind. TypeError: An unknown bound.
        """
        records = cls.records()
        built = {m.value: record(**bounds.get(m, {})) for m, record in records.items()}
        return cls(**built)  # type: ignore[arg-type]  # each name gets its own record's type

    @classmethod
    def records(cls) -> dict[Modality, type[MediaBounds]]:
        """Each modality with bounds and its record's class, in field order."""
        return {Modality(name): type(getattr(_DEFAULT, name)) for name in cls.__dataclass_fields__}


_DEFAULT: Final = MediaLimits()
