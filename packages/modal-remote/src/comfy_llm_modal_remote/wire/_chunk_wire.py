"""A caption chunk on the wire: images as bytes worth sending, captions back.

One chunk is many images under one prompt and one set of sampling settings;
what crosses the network is plain data (str/int/float/bool/None/bytes,
lists, dicts), checked once where it enters.

Images travel as encoded bytes already reduced to what the model is given
(``max_side`` on the longer edge, the inputs package's own reduction), never
as tensors and never as originals larger than that: a JPEG file that already
fits is sent unchanged (its own bytes, no second lossy pass; a 1024² photo
is 0.1-0.4 MB), anything else is reduced and encoded as JPEG at
:data:`JPEG_QUALITY`. The worker decodes and prepares them exactly as the
local path prepares decoded files (``prepare_inputs`` with the profile's
limits), so an image the worker cannot decode is that image's error and the
rest of the chunk goes on.

A video clip travels as its sampled frames, typed ``video_frame`` parts
(:class:`ChunkFrame`: each frame's timestamp and position, the frame itself
reduced and encoded like an image): the clip is sampled here as the
describe node samples a video (``comfy_llm_inputs.sample_video_frames``,
evenly over the clip), and the worker rebuilds the
:class:`~comfy_llm_inputs.VideoFramePart` tuple and the prompt with the
frames' timestamps exactly as ``prepare_inputs`` does for a video. Frames
are JPEG, not the inputs wire's lossless PNG: twelve 1536-px frames are
~5 MB as JPEG and ~25 MB as PNG, per clip, per upload.
"""

from __future__ import annotations

import dataclasses
import io
import math
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ..errors import RemoteExecutionError
from ._plain import WireDict, WireMapping, WireValue, as_float, as_int, as_items, as_mapping

if TYPE_CHECKING:  # Pillow and core load when an image is encoded, not with the wire
    from comfy_llm_core import ImageLimits
    from PIL.Image import Image as PILImage

__all__ = [
    "CHUNK_WIRE_VERSION",
    "WIRE_VERSION_ERROR",
    "JPEG_QUALITY",
    "WIRE_IMAGE_SIDE",
    "ChunkFrame",
    "ChunkImage",
    "ChunkRequest",
    "ChunkResult",
    "ImageCaption",
    "decode_wire_image",
    "encode_image_file",
    "encode_pil_image",
    "encode_video_file",
]

CHUNK_WIRE_VERSION = 3
"""2: the request carries the dispatching machine's code fingerprint; 3: an item
may be a video clip's frames (:class:`ChunkFrame`). A worker of another version
answers ``WireVersionError``, which the fan-out treats as a deployment mismatch
(it redeploys once)."""
JPEG_QUALITY = 92
WIRE_IMAGE_SIDE = 1536
"""Longest side sent for captioning: above what the captioning VLMs of the
curated list use at their default processor settings for one image (Qwen-VL
tiles of 28 px up to ~1.3k on a side at 1.3 MP, SmolVLM 1536), so nothing the
model would see is lost and nothing it would throw away is uploaded."""
_MAX_PASSTHROUGH_BYTES = 8 * 1024 * 1024
WIRE_VERSION_ERROR = "WireVersionError"
"""The ``remote_class`` of a wire version refusal (another comfy-llm version deployed)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ChunkFrame:
    """One sampled frame of a video clip: a ``video_frame`` part with its image as bytes.

    Attributes:
        data: The frame, encoded (JPEG or PNG).
        width: Width of the encoded frame.
        height: Height of the encoded frame.
        timestamp_seconds: Seconds from the start of the clip (finite).
        index: Position among the clip's sampled frames (0-based).
    """

    data: bytes
    width: int
    height: int
    timestamp_seconds: float
    index: int
    kind: ClassVar[str] = "video_frame"

    def to_wire(self) -> WireDict:
        """Plain data, tagged with its kind as the inputs wire tags a part."""
        return {"kind": self.kind, **dataclasses.asdict(self)}

    @classmethod
    def from_wire(cls, data: WireMapping) -> ChunkFrame:
        """Rebuild, checking the tag, the bytes and the timestamp."""
        if data.get("kind") != cls.kind:
            raise ValueError(f"a clip part of kind {data.get('kind')!r}, not {cls.kind!r}")
        timestamp = as_float(data["timestamp_seconds"])
        if not math.isfinite(timestamp):
            raise ValueError(f"frame timestamp {timestamp!r} is not finite")
        return cls(
            data=_bytes(data["data"]),
            width=as_int(data["width"]),
            height=as_int(data["height"]),
            timestamp_seconds=timestamp,
            index=as_int(data["index"]),
        )


@dataclasses.dataclass(frozen=True, slots=True)
class ChunkImage:
    """One image of a chunk, or one video clip as its sampled frames.

    Attributes:
        index: The image's position in the whole job (the collector's key).
        name: Its name in the job (its seed derives from it), for messages.
        data: Encoded bytes (JPEG or PNG); empty for a clip.
        width: Width of the encoded image (a clip: its widest frame's).
        height: Height of the encoded image (a clip: its tallest frame's).
        original: True when ``data`` is the file's own bytes.
        frames: A clip's frames in time order; empty for an image.
    """

    index: int
    name: str
    data: bytes
    width: int
    height: int
    original: bool = False
    frames: tuple[ChunkFrame, ...] = ()

    def to_wire(self) -> WireDict:
        """Plain data."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {**fields, "frames": [frame.to_wire() for frame in self.frames]}

    @classmethod
    def from_wire(cls, data: WireMapping) -> ChunkImage:
        """Rebuild, checking types."""
        return cls(
            index=as_int(data["index"]),
            name=str(data["name"]),
            data=_bytes(data["data"]),
            width=as_int(data["width"]),
            height=as_int(data["height"]),
            original=bool(data.get("original", False)),
            frames=tuple(
                ChunkFrame.from_wire(as_mapping(frame))
                for frame in as_items(data.get("frames") or ())
            ),
        )

    @property
    def wire_bytes(self) -> int:
        """Bytes of image data it carries (a clip: all its frames)."""
        return len(self.data) + sum(len(frame.data) for frame in self.frames)


def _bytes(payload: WireValue) -> bytes:
    if not isinstance(payload, (bytes, bytearray)):
        raise TypeError(f"image data is a {type(payload).__name__}, not bytes")
    return bytes(payload)


@dataclasses.dataclass(frozen=True, slots=True)
class ChunkRequest:
    """One chunk for a RemoteEngine container.

    Attributes:
        request_id: Names the chunk's progress partition.
        chunk_id: The chunk's number in the job.
        attempt: 0 first, 1 for the one retry on another container.
        profile: ``ModelProfile.to_dict()``.
        snapshot: The snapshot folder relative to the remote storage root.
        prompt: The captioning instruction.
        system_prompt: Optional system prompt.
        settings: ``GenerationSettings.to_dict()`` (each image's seed derives from its seed).
        images: The chunk's images.
        batch_size: Images per ``run_batch`` call on the worker.
        reserve_gb: VRAM to keep free, or None for the worker's default.
        promotion_state: Exported vLLM execution state to import first (retry).
        code_fingerprint: The dispatching machine's code fingerprint; a worker
            whose image carries another refuses the chunk
            (``DeploymentMismatchError``), as the engine does for one request.
    """

    request_id: str
    chunk_id: int
    attempt: int
    profile: WireDict
    snapshot: str
    prompt: str
    system_prompt: str | None
    settings: WireDict
    images: tuple[ChunkImage, ...]
    batch_size: int
    reserve_gb: float | None = None
    promotion_state: WireDict | None = None
    code_fingerprint: str = ""

    def to_wire(self) -> WireDict:
        """Plain data."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["images"] = [image.to_wire() for image in self.images]
        return {"version": CHUNK_WIRE_VERSION, **data}

    @classmethod
    def from_wire(cls, data: WireMapping) -> ChunkRequest:
        """Rebuild from :meth:`to_wire` output."""
        _check_version(data, "Caption chunk request")
        try:
            return cls(
                request_id=str(data["request_id"]),
                chunk_id=as_int(data["chunk_id"]),
                attempt=as_int(data["attempt"]),
                profile=dict(as_mapping(data["profile"])),
                snapshot=str(data["snapshot"]),
                prompt=str(data["prompt"]),
                system_prompt=(
                    None if data.get("system_prompt") is None else str(data["system_prompt"])
                ),
                settings=dict(as_mapping(data["settings"])),
                images=tuple(
                    ChunkImage.from_wire(as_mapping(item)) for item in as_items(data["images"])
                ),
                batch_size=as_int(data["batch_size"]),
                reserve_gb=None if data.get("reserve_gb") is None else as_float(data["reserve_gb"]),
                promotion_state=(
                    None
                    if data.get("promotion_state") is None
                    else dict(as_mapping(data["promotion_state"]))
                ),
                code_fingerprint=str(data.get("code_fingerprint") or ""),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise RemoteExecutionError(
                "ChunkWireError", f"caption chunk request is malformed: {error!r}"
            ) from error

    @property
    def image_bytes(self) -> int:
        """Bytes of image data this chunk carries."""
        return sum(image.wire_bytes for image in self.images)


@dataclasses.dataclass(frozen=True, slots=True)
class ImageCaption:
    """One image's answer: a caption, or the error that image alone met.

    Attributes:
        index: The image's position in the whole job.
        response: The caption ("" on error).
        reasoning: Reasoning text, if the model thought first.
        metadata: The request metadata (tokens, timings, batch facts).
        error: ``"Class: message"`` when this image failed, else None.
    """

    index: int
    response: str = ""
    reasoning: str = ""
    metadata: WireDict = dataclasses.field(default_factory=dict)
    error: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class ChunkResult:
    """What a container answers for one chunk.

    Attributes:
        chunk_id: The chunk's number.
        captions: One entry per image, in the chunk's order.
        worker_seconds: Wall time inside the worker (load included).
        container: A name for the container that served it (telemetry).
    """

    chunk_id: int
    captions: tuple[ImageCaption, ...]
    worker_seconds: float
    container: str = ""

    def to_wire(self) -> WireDict:
        """Plain data."""
        return {
            "version": CHUNK_WIRE_VERSION,
            "chunk_id": self.chunk_id,
            "captions": [dataclasses.asdict(caption) for caption in self.captions],
            "worker_seconds": self.worker_seconds,
            "container": self.container,
        }

    @classmethod
    def from_wire(cls, data: WireMapping) -> ChunkResult:
        """Rebuild from :meth:`to_wire` output."""
        _check_version(data, "Caption chunk result")
        try:
            captions = tuple(
                ImageCaption(
                    index=as_int(item["index"]),
                    response=str(item.get("response") or ""),
                    reasoning=str(item.get("reasoning") or ""),
                    metadata=dict(as_mapping(item.get("metadata") or {})),
                    error=None if item.get("error") is None else str(item["error"]),
                )
                for item in map(as_mapping, as_items(data["captions"]))
            )
            return cls(
                chunk_id=as_int(data["chunk_id"]),
                captions=captions,
                worker_seconds=as_float(data["worker_seconds"]),
                container=str(data.get("container") or ""),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise RemoteExecutionError(
                "ChunkWireError", f"caption chunk result is malformed: {error!r}"
            ) from error


def _check_version(data: WireMapping, what: str) -> None:
    if not isinstance(data, Mapping) or data.get("version") != CHUNK_WIRE_VERSION:
        found = data.get("version") if isinstance(data, Mapping) else type(data).__name__
        raise RemoteExecutionError(
            WIRE_VERSION_ERROR,
            f"{what} wire version {found!r} is not {CHUNK_WIRE_VERSION}: the deployed Modal app "
            "runs another comfy-llm version",
        )


# -- images ------------------------------------------------------------------
def encode_image_file(
    path: str | os.PathLike[str], *, index: int, max_side: int = WIRE_IMAGE_SIDE
) -> ChunkImage:
    """One image file as the bytes worth sending (see the module docstring).

    Raises:
        ImageInputError: Not a regular file, not an image, corrupt, or over
            the pixel limit (the inputs package's checks and messages).
    """
    from comfy_llm_core import ImageLimits
    from comfy_llm_inputs import ImageInputError, image_from_file, path_problem
    from PIL import Image

    file = Path(path)
    problem = path_problem(str(file))
    if problem is not None:
        raise ImageInputError(f"Image {file.name!r} {problem}", index=index)
    limits = ImageLimits()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(file) as header:
                kind, size, mode = header.format, header.size, header.mode
    except (OSError, ValueError, Image.DecompressionBombError):
        kind, size, mode = None, (0, 0), ""
    fits = 0 < max(size) <= max_side and size[0] * size[1] <= limits.max_image_pixels
    if kind == "JPEG" and fits and mode in {"RGB", "L"}:
        data = file.read_bytes() if file.stat().st_size <= _MAX_PASSTHROUGH_BYTES else b""
        if data:
            return ChunkImage(index, file.name, data, size[0], size[1], original=True)
    reduced = image_from_file(file, index=index, limits=_side_limits(max_side))
    return encode_pil_image(reduced, index=index, name=file.name, max_side=max_side)


def encode_pil_image(
    image: PILImage, *, index: int, name: str, max_side: int = WIRE_IMAGE_SIDE
) -> ChunkImage:
    """An RGB PIL image (a decoded file or an IMAGE slice) reduced and encoded as JPEG."""
    from PIL import Image

    if max(image.size) > max_side:
        image = image.copy()
        image.thumbnail((max_side, max_side), Image.Resampling.LANCZOS, reducing_gap=2.0)
    if image.mode != "RGB":
        image = image.convert("RGB")
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=JPEG_QUALITY)
    return ChunkImage(index, name, buffer.getvalue(), image.size[0], image.size[1])


def encode_video_file(
    path: str | os.PathLike[str],
    *,
    index: int,
    name: str,
    frames: int,
    max_side: int = WIRE_IMAGE_SIDE,
) -> ChunkImage:
    """A video clip as ``frames`` sampled frames, each reduced and encoded as an image.

    Sampled as the describe node samples a video (evenly over the clip, the
    first and last frames included), so the worker's request is the local one.

    Raises:
        VideoInputError: Not a readable video (the inputs package's checks and messages).
    """
    from comfy_llm_core import VideoLimits
    from comfy_llm_inputs import sample_video_frames

    limits = VideoLimits(max_video_frames=max(frames, 1))
    encoded = []
    for part in sample_video_frames(os.fspath(path), frames, limits=limits):
        image = encode_pil_image(part.image, index=index, name=name, max_side=max_side)
        encoded.append(
            ChunkFrame(image.data, image.width, image.height, part.timestamp_seconds, part.index)
        )
    width = max(frame.width for frame in encoded)
    height = max(frame.height for frame in encoded)
    return ChunkImage(index, name, b"", width, height, frames=tuple(encoded))


def decode_wire_image(image: ChunkImage) -> PILImage:
    """The worker's side: the RGB PIL image, refused when it is not what was declared.

    Raises:
        ImageInputError: Not a JPEG/PNG, larger than declared, or corrupt.
    """
    from comfy_llm_inputs import ImageInputError
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(image.data), formats=["JPEG", "PNG"]) as opened:
            if opened.size != (image.width, image.height):
                raise ImageInputError(
                    f"Image {image.name!r} is {opened.size[0]}x{opened.size[1]}, not the "
                    f"declared {image.width}x{image.height}; the chunk was corrupted in transit",
                    index=image.index,
                )
            opened.load()
            return opened.convert("RGB") if opened.mode != "RGB" else opened.copy()
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as error:
        raise ImageInputError(
            f"Image {image.name!r} could not be decoded on the worker ({type(error).__name__}); "
            "re-export it as PNG or JPEG",
            index=image.index,
        ) from None


def _side_limits(max_side: int) -> ImageLimits:
    from comfy_llm_core import ImageLimits

    return ImageLimits(max_image_side=max_side)
