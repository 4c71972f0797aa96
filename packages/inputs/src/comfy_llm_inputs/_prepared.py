"""The prepared, engine-neutral request inputs and their wire form."""

from __future__ import annotations

import dataclasses
import io
import math
from collections.abc import Mapping
from typing import Any

from PIL import Image, UnidentifiedImageError

from ._video import VideoFrame
from .errors import InputError

WIRE_VERSION = 1
_PNG_COMPRESS_LEVEL = 1  # lossless either way; level 1 is several times faster


@dataclasses.dataclass(frozen=True)
class PreparedInputs:
    """Everything a backend needs from the node's inputs; no engine objects.

    Attributes:
        prompt: The user prompt with the video-timestamp line and the file
            sections already assembled.
        system_prompt: The system prompt, or ``None``.
        images: The IMAGE batch as RGB images.
        video_frames: Sampled video frames with timestamps, in time order.
        file_names: Names of the files whose text is in ``prompt``.
    """

    prompt: str
    system_prompt: str | None = None
    images: tuple[Image.Image, ...] = ()
    video_frames: tuple[VideoFrame, ...] = ()
    file_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Normalise sequences to tuples and images to RGB.

        Raises:
            InputError: A field has the wrong type.
        """
        if not isinstance(self.prompt, str):
            raise InputError(f"PreparedInputs.prompt must be a str, not {type(self.prompt)}")
        if self.system_prompt is not None and not isinstance(self.system_prompt, str):
            raise InputError("PreparedInputs.system_prompt must be a str or None")
        images = tuple(self.images)
        for image in images:
            if not isinstance(image, Image.Image):
                raise InputError(f"PreparedInputs.images holds a {type(image).__name__}")
        frames = tuple(self.video_frames)
        for frame in frames:
            if not isinstance(frame, VideoFrame):
                raise InputError(f"PreparedInputs.video_frames holds a {type(frame).__name__}")
        object.__setattr__(self, "images", tuple(_rgb(image) for image in images))
        object.__setattr__(self, "video_frames", frames)
        object.__setattr__(self, "file_names", tuple(str(name) for name in self.file_names))

    @property
    def image_count(self) -> int:
        """Number of images."""
        return len(self.images)

    @property
    def video_frame_count(self) -> int:
        """Number of sampled video frames."""
        return len(self.video_frames)

    @property
    def file_count(self) -> int:
        """Number of files in the prompt."""
        return len(self.file_names)

    @property
    def video_timestamps(self) -> tuple[float, ...]:
        """Seconds from the start of the video of each sampled frame."""
        return tuple(frame.timestamp_seconds for frame in self.video_frames)

    def to_wire(self) -> dict[str, Any]:
        """Return plain values (str, int, float, None, bytes, lists, dicts).

        Images become PNG bytes, so the result can be pickled, msgpack'ed or
        CBOR-encoded and shipped to a remote worker.

        Returns:
            A dict that :meth:`from_wire` turns back into an equal object.
        """
        return {
            "version": WIRE_VERSION,
            "prompt": self.prompt,
            "system_prompt": self.system_prompt,
            "images": [_png(image) for image in self.images],
            "video_frames": [
                {
                    "image": _png(frame.image),
                    "timestamp_seconds": frame.timestamp_seconds,
                    "index": frame.index,
                }
                for frame in self.video_frames
            ],
            "file_names": list(self.file_names),
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> PreparedInputs:
        """Rebuild prepared inputs from :meth:`to_wire` output.

        Args:
            data: The wire dict.

        Returns:
            The prepared inputs.

        Raises:
            InputError: Unknown version, missing or mistyped fields, or
                image bytes that are not a PNG.
        """
        if not isinstance(data, Mapping) or data.get("version") != WIRE_VERSION:
            version = data.get("version") if isinstance(data, Mapping) else None
            raise InputError(
                f"Prepared inputs wire version {version!r} is not {WIRE_VERSION}; update "
                "comfy-llm-inputs on both sides to the same version"
            )
        try:
            frames = tuple(
                VideoFrame(
                    image=_unpng(item["image"]),
                    timestamp_seconds=_number(item["timestamp_seconds"]),
                    index=int(item["index"]),
                )
                for item in data["video_frames"]
            )
            return cls(
                prompt=data["prompt"],
                system_prompt=data.get("system_prompt"),
                images=tuple(_unpng(item) for item in data["images"]),
                video_frames=frames,
                file_names=tuple(data["file_names"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            if isinstance(error, InputError):
                raise
            raise InputError(f"Prepared inputs wire data is malformed: {error!r}") from error


def _rgb(image: Image.Image) -> Image.Image:
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
            return _rgb(image)
    except (UnidentifiedImageError, OSError) as error:
        raise InputError(f"Prepared inputs wire image is not a PNG: {error}") from error


def _number(value: Any) -> float:
    number = float(value)
    if not math.isfinite(number):
        raise InputError(f"Prepared inputs wire timestamp {value!r} is not finite")
    return number
