"""The typed parts of a prepared request, each with its own wire codec.

A request is a system prompt plus a tuple of parts in the order the model
sees them: the media first (each :class:`ImagePart`, then each sampled
:class:`VideoFramePart` in time order), then one :class:`TextPart` holding
the prompt (the video's timestamps and the files' sections already in it).
A part names its :class:`~comfy_llm_core.Modality`, the ``kind`` it is
tagged with on the wire, the metadata key that counts it, and the entry it
becomes in a chat message. A new kind of input (audio) is a new part class,
which registers itself in :data:`PART_KINDS` by being defined, not a field
threaded through every package.
"""

from __future__ import annotations

import dataclasses
import io
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from comfy_llm_core import Modality
from PIL import Image, UnidentifiedImageError

from .errors import InputError

__all__ = [
    "PART_KINDS",
    "ImagePart",
    "Part",
    "TextPart",
    "VideoFramePart",
    "part_from_wire",
]

_PNG_COMPRESS_LEVEL = 1  # lossless either way; level 1 is several times faster
_KINDS: dict[str, type[Part]] = {}


class Part:
    """A piece of a request (a frozen dataclass of one of the kinds below).

    Class attributes:
        kind: The tag of this kind of part on the wire.
        modality: What kind of input it is.
        count_key: The metadata key counting parts of this kind, or None.
        chat_type: The ``type`` of its entry in a chat message's content list.
    """

    __slots__ = ()

    kind: ClassVar[str]
    modality: ClassVar[Modality]
    count_key: ClassVar[str | None] = None
    chat_type: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Register each kind of part by its wire tag (a slotted dataclass: its final class)."""
        super().__init_subclass__(**kwargs)
        kind = vars(cls).get("kind")
        if isinstance(kind, str):
            _KINDS[kind] = cls

    def chat_entry(self) -> dict[str, Any]:
        """Its entry in a Hugging Face chat message's content list."""
        return {"type": self.chat_type}

    def to_wire(self) -> dict[str, Any]:
        """Plain data (str, int, float, None, bytes), tagged with :attr:`kind`."""
        raise NotImplementedError

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Part:
        """Rebuild the part from :meth:`to_wire` output."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True, slots=True)
class TextPart(Part):
    """Text the user turn carries.

    Attributes:
        text: The text, as the model sees it.
    """

    text: str
    kind: ClassVar[str] = "text"
    modality: ClassVar[Modality] = Modality.TEXT
    chat_type: ClassVar[str] = "text"

    def __post_init__(self) -> None:
        """Raises InputError: ``text`` is not a str."""
        if not isinstance(self.text, str):
            raise InputError(f"TextPart.text must be a str, not {type(self.text).__name__}")

    def chat_entry(self) -> dict[str, Any]:
        """``{"type": "text", "text": ...}``."""
        return {"type": "text", "text": self.text}

    def to_wire(self) -> dict[str, Any]:
        """``{"kind": "text", "text": ...}``."""
        return {"kind": self.kind, "text": self.text}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> TextPart:
        """Rebuild from :meth:`to_wire` output."""
        return cls(data["text"])


@dataclasses.dataclass(frozen=True, slots=True)
class ImagePart(Part):
    """One image of the IMAGE input.

    Attributes:
        image: The image, RGB (converted on the way in).
    """

    image: Image.Image
    kind: ClassVar[str] = "image"
    modality: ClassVar[Modality] = Modality.IMAGE
    count_key: ClassVar[str | None] = "image_count"
    chat_type: ClassVar[str] = "image"

    def __post_init__(self) -> None:
        """Raises InputError: ``image`` is not a Pillow image."""
        object.__setattr__(self, "image", _rgb(self.image, "ImagePart.image"))

    def to_wire(self) -> dict[str, Any]:
        """``{"kind": "image", "image": <PNG bytes>}``."""
        return {"kind": self.kind, "image": _png(self.image)}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> ImagePart:
        """Rebuild from :meth:`to_wire` output (only a PNG is accepted)."""
        return cls(_unpng(data["image"]))


@dataclasses.dataclass(frozen=True, slots=True)
class VideoFramePart(Part):
    """One frame sampled from the VIDEO input; it goes to the model as an image.

    Attributes:
        image: The decoded frame as an RGB image.
        timestamp_seconds: Seconds from the start of the video.
        index: Position among the sampled frames (0-based).
    """

    image: Image.Image
    timestamp_seconds: float
    index: int
    kind: ClassVar[str] = "video_frame"
    modality: ClassVar[Modality] = Modality.VIDEO
    count_key: ClassVar[str | None] = "video_frame_count"
    chat_type: ClassVar[str] = "image"

    def __post_init__(self) -> None:
        """Raises InputError: ``image`` is not a Pillow image."""
        object.__setattr__(self, "image", _rgb(self.image, "VideoFramePart.image"))

    def to_wire(self) -> dict[str, Any]:
        """``{"kind": "video_frame", "image": <PNG bytes>, "timestamp_seconds", "index"}``."""
        return {
            "kind": self.kind,
            "image": _png(self.image),
            "timestamp_seconds": self.timestamp_seconds,
            "index": self.index,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> VideoFramePart:
        """Rebuild from :meth:`to_wire` output (a finite timestamp, a PNG)."""
        return cls(
            image=_unpng(data["image"]),
            timestamp_seconds=_finite(data["timestamp_seconds"]),
            index=int(data["index"]),
        )


PART_KINDS: Mapping[str, type[Part]] = MappingProxyType(_KINDS)
"""Every part kind by its wire tag, in the order they were defined (their counts'
order in metadata)."""


def part_from_wire(data: Mapping[str, Any]) -> Part:
    """Rebuild one part from its wire form, by its ``kind`` tag.

    Raises:
        InputError: An unknown kind, or missing, mistyped or non-PNG data.
    """
    if not isinstance(data, Mapping):
        raise InputError(f"Prepared inputs wire part is a {type(data).__name__}, not a mapping")
    kind = PART_KINDS.get(str(data.get("kind")))
    if kind is None:
        raise InputError(
            f"Prepared inputs wire part kind {data.get('kind')!r} is unknown (known: "
            f"{', '.join(PART_KINDS)}); update comfy-llm-inputs on both sides to the same version"
        )
    try:
        return kind.from_wire(data)
    except (KeyError, TypeError, ValueError) as error:
        if isinstance(error, InputError):
            raise
        raise InputError(
            f"Prepared inputs wire {kind.kind} part is malformed: {error!r}"
        ) from error


def _rgb(image: Any, name: str) -> Image.Image:
    if not isinstance(image, Image.Image):
        raise InputError(f"{name} must be a Pillow image, not {type(image).__name__}")
    return image if image.mode == "RGB" else image.convert("RGB")


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=_PNG_COMPRESS_LEVEL)
    return buffer.getvalue()


def _unpng(data: Any) -> Image.Image:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InputError(f"Prepared inputs wire image is a {type(data).__name__}, not bytes")
    try:
        with Image.open(io.BytesIO(bytes(data)), formats=["PNG"]) as image:
            image.load()
            return image if image.mode == "RGB" else image.convert("RGB")
    except (UnidentifiedImageError, OSError) as error:
        raise InputError(f"Prepared inputs wire image is not a PNG: {error}") from error


def _finite(value: Any) -> float:
    number = float(value)
    if not math.isfinite(number):
        raise InputError(f"Prepared inputs wire timestamp {value!r} is not finite")
    return number
