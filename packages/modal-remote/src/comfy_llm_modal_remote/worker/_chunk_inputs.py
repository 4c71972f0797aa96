"""A caption chunk's images as the engine takes them: decoded, prepared, each its own seed.

Runs on the chunk body's thread (the first sub-batch) or its one-thread
feeder (the others, while the engine runs the one before: ``_chunk_worker``),
so it touches nothing shared: it reads the request and returns what it made.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence

from comfy_llm_core import ImageLimits, MediaLimits, item_seed, render_error
from comfy_llm_inputs import (
    InputError,
    PreparedInputs,
    VideoFramePart,
    VideoInputError,
    assemble_prompt,
    prepare_inputs,
)
from comfy_llm_profiles import ModelProfile
from comfy_llm_residency.backend import BatchItem, GenerationSettings

from ..wire._chunk_wire import ChunkImage, ChunkRequest, ImageCaption, decode_wire_image

__all__ = ["SubBatch", "chunk_limits", "prepare_images"]


@dataclasses.dataclass
class SubBatch:
    """One sub-batch's prepared images and the answers of those that could not be."""

    ready: list[tuple[int, BatchItem]]
    failed: list[ImageCaption]


def chunk_limits(request: ChunkRequest) -> MediaLimits:
    """One image per request, as large as the chunk's largest (the client already bounded it)."""
    sides = [max(image.width, image.height) for image in request.images]
    return MediaLimits(image=ImageLimits(max_images=1, max_image_side=max([1, *sides])))


def prepare_images(
    request: ChunkRequest,
    images: Sequence[ChunkImage],
    *,
    profile: ModelProfile,
    settings: GenerationSettings,
    limits: MediaLimits,
    stop: threading.Event,
) -> SubBatch:
    """Decode and prepare ``images``; one that fails is that image's error, not raised.

    Each image gets its own seed, from the job's seed and its name, as
    locally; a clip's frames become its video frame parts. Stops at the next
    image once ``stop`` is set (the chunk ended: what was made is thrown away).
    """
    made = SubBatch([], [])
    for image in images:
        if stop.is_set():
            break
        try:
            prepared = (
                _clip_inputs(request, image, profile)
                if image.frames
                else prepare_inputs(
                    request.prompt,
                    system_prompt=request.system_prompt or None,
                    images=[decode_wire_image(image)],
                    limits=limits,
                )
            )
        except (InputError, ValueError, OSError) as error:
            made.failed.append(ImageCaption(image.index, error=render_error(error)))
        else:
            seeded = dataclasses.replace(settings, seed=item_seed(settings.seed, image.name))
            made.ready.append((image.index, BatchItem(prepared, seeded)))
    return made


def _clip_inputs(request: ChunkRequest, clip: ChunkImage, profile: ModelProfile) -> PreparedInputs:
    """A clip's request as ``prepare_inputs`` builds one for a video: frames, then the prompt.

    The prompt carries the frames' timestamps (``assemble_prompt``); a model
    that takes no video, or fewer frames than were sent, refuses this clip.

    Raises:
        VideoInputError: The model takes no video, or not this many frames.
        ImageInputError: A frame could not be decoded.
    """
    limit = profile.limits.media.video.max_video_frames
    if len(clip.frames) > limit:
        takes = f"at most {limit} frames per clip" if limit else "no video"
        raise VideoInputError(
            f"{clip.name!r} is a video clip ({len(clip.frames)} frames) and this model takes "
            f"{takes}: leave clips out (exclude_patterns *.mp4) or pick a model reviewed for "
            "video, e.g. the curated qwen2.5-vl-3b-instruct",
            value=len(clip.frames),
            limit=limit,
        )
    frames = tuple(
        VideoFramePart(
            decode_wire_image(
                ChunkImage(clip.index, f"{clip.name} frame {f.index}", f.data, f.width, f.height)
            ),
            timestamp_seconds=f.timestamp_seconds,
            index=f.index,
        )
        for f in clip.frames
    )
    text = assemble_prompt(request.prompt, video_timestamps=[f.timestamp_seconds for f in frames])
    system = (
        request.system_prompt if request.system_prompt and request.system_prompt.strip() else None
    )
    return PreparedInputs.text(text, *frames, system_prompt=system)
