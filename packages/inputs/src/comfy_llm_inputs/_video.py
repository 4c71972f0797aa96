"""VIDEO inputs to uniformly sampled, timestamped frames.

ComfyUI's VIDEO objects are duck-typed (``comfy_api`` is never imported):

* ``VideoFromFile``: ``get_stream_source()`` returns a path or a seekable
  stream; it is sampled by seeking with PyAV (see :mod:`._video_file`),
  within ``get_active_trim_window()`` where the object has one (ComfyUI
  >= 0.33: the stream source is always the whole, untrimmed file).
  ``get_components()`` is never called on it, since it decodes every frame,
  except when ``has_pending_frame_edits()`` (ComfyUI after 0.33) says crop or
  resize edits are waiting: the stream source is still the unedited file, so
  the edit-aware ``get_components()`` (which honours the trim window too) is
  the only way to the picture the artist sees; its decoded size is checked
  first (:data:`EDITED_VIDEO_MAX_BYTES`).
* ``VideoFromComponents`` (and any object with ``get_components()`` but no
  stream source, or a bare components object with ``images`` and
  ``frame_rate``): frames are picked straight from the ``[N, H, W, C]``
  tensor; only the picked frames are converted.
* ``str`` / ``os.PathLike`` paths (the CLI), ``bytes`` and binary file-like
  objects.
"""

from __future__ import annotations

import io
import os
from fractions import Fraction
from typing import Any

from comfy_llm_core import VideoLimits

from ._images import check_pixels, pixels_to_image, shape_of, to_numpy
from ._limits import ProgressCallback, report
from ._parts import VideoFramePart
from ._video_file import sample_file_frames
from ._video_source import FileSamplerStats, uniform_indices
from .errors import ImageInputError, VideoInputError


def check_frame_count(count: int, limits: VideoLimits) -> None:
    """Refuse a requested frame count outside ``1..limits.max_video_frames``.

    A model without video (``max_video_frames`` 0) is refused as such, never
    with a frame count the node's widget cannot take.

    Args:
        count: Frames requested.
        limits: Bounds.

    Raises:
        VideoInputError: The count is not a positive integer or exceeds the
            limit.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise VideoInputError(
            f"video_frames must be a whole number >= 1, got {count!r}; ask for at least one frame",
            value=None,
        )
    if limits.max_video_frames == 0:
        # Never "lower video_frames to 0": the widget's minimum is 1 (issue 29).
        raise VideoInputError(
            "This model takes no video (its review found no video training or no video "
            "input in its processor); disconnect the VIDEO input, or pick a model reviewed "
            "for video, e.g. the curated qwen2.5-vl-3b-instruct or smolvlm2-500m-video-instruct",
            value=count,
            limit=0,
        )
    if count > limits.max_video_frames:
        raise VideoInputError(
            f"video_frames={count} exceeds this model's limit of {limits.max_video_frames} "
            f"frames per request; lower video_frames to {limits.max_video_frames} or fewer",
            value=count,
            limit=limits.max_video_frames,
        )


def _source_name(source: Any) -> str:
    if isinstance(source, (str, os.PathLike)):
        return os.path.basename(os.fspath(source)) or "video"
    name = getattr(source, "name", None)
    if isinstance(name, str) and name:
        return os.path.basename(name)
    return "stream"


def _is_components(value: Any) -> bool:
    return hasattr(value, "images") and hasattr(value, "frame_rate")


def _classify(video: Any) -> tuple[str, Any]:
    """Return ``("file", source)`` or ``("components", components)``.

    Raises:
        VideoInputError: The value is not a video this package understands.
    """
    if isinstance(video, (str, os.PathLike)):
        return "file", video
    if isinstance(video, (bytes, bytearray, memoryview)):
        return "file", io.BytesIO(bytes(video))
    if _is_components(video):
        return "components", video
    class_names = {cls.__name__ for cls in type(video).__mro__}
    get_components = getattr(video, "get_components", None)
    if "VideoFromComponents" in class_names and callable(get_components):
        # Its get_stream_source() would encode every frame to a new file.
        return "components", get_components()
    if callable(get_components) and _has_pending_edits(video):
        _check_edited_size(video)
        return "components", get_components()
    get_stream_source = getattr(video, "get_stream_source", None)
    if callable(get_stream_source):
        return "file", get_stream_source()
    if callable(get_components):
        return "components", get_components()
    if hasattr(video, "read") and hasattr(video, "seek"):
        return "file", video
    raise VideoInputError(
        f"VIDEO input of type {type(video).__name__} is not supported; connect a ComfyUI VIDEO "
        "output (Load Video) or pass a video file path",
        source=type(video).__name__,
    )


EDITED_VIDEO_MAX_BYTES = 4 * 1024**3
"""Most bytes ComfyUI may decode (float32 RGB) to apply a VIDEO's pending edits."""


def _has_pending_edits(video: Any) -> bool:
    """ComfyUI after 0.33: crop/resize edits its stream source does not hold yet."""
    pending = getattr(video, "has_pending_frame_edits", None)
    return bool(callable(pending) and pending() is True)


def _check_edited_size(video: Any) -> None:
    """Refuse before decoding when the edited window would not fit in memory.

    Raises:
        VideoInputError: frames x width x height x 3 float32 exceeds the limit.
    """
    try:
        frames = int(video.get_frame_count())
        width, height = (int(side) for side in video.get_dimensions())
    except (AttributeError, TypeError, ValueError, OSError):
        return  # no size to check before decoding; get_components() reports its own errors
    needed = frames * width * height * 3 * 4
    if needed > EDITED_VIDEO_MAX_BYTES:
        raise VideoInputError(
            f"VIDEO has pending crop/resize edits, which ComfyUI applies only by decoding every "
            f"frame: {frames} frames at {width}x{height} need {needed / 1024**3:.1f} GiB "
            f"(limit {EDITED_VIDEO_MAX_BYTES / 1024**3:.0f} GiB); trim it shorter with Video "
            "Slice before the crop or resize, or connect the uncropped video",
            source=type(video).__name__,
            value=needed,
            limit=EDITED_VIDEO_MAX_BYTES,
        )


def _trim_window(video: Any) -> tuple[float, float] | None:
    """``(start, duration)`` seconds of a trimmed ``VideoFromFile``; None when untrimmed.

    Raises:
        VideoInputError: The window is not two finite numbers >= 0.
    """
    get_window = getattr(video, "get_active_trim_window", None)
    if not callable(get_window):
        return None
    window = get_window()
    try:
        start, duration = (float(part) for part in window)
    except (TypeError, ValueError):
        start = duration = float("nan")
    if not (0 <= start < float("inf") and 0 <= duration < float("inf")):
        raise VideoInputError(
            f"VIDEO trim window {window!r} is not (start >= 0, duration >= 0) seconds; "
            "set the Video Slice start_time and duration to real numbers",
            source=type(video).__name__,
        )
    if start == 0 and duration == 0:
        return None
    return start, duration


def _frames_from_components(
    components: Any, count: int, progress: ProgressCallback | None
) -> tuple[VideoFramePart, ...]:
    images = components.images
    shape = shape_of(images)
    if len(shape) != 4 or shape[3] not in (1, 3, 4) or 0 in shape[1:3]:
        raise VideoInputError(
            f"VIDEO frames tensor has shape {list(shape)}; expected [frames, height, width, "
            "channels] with 1, 3 or 4 channels; rebuild the video from an IMAGE batch",
            source="frames tensor",
        )
    frame_count = shape[0]
    if frame_count == 0:
        raise VideoInputError(
            "VIDEO has zero frames; connect a video with at least one frame",
            source="frames tensor",
            value=0,
        )
    try:
        rate = Fraction(components.frame_rate)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        rate = Fraction(0)
    if rate <= 0:
        raise VideoInputError(
            f"VIDEO frame rate is {components.frame_rate!r}; it must be a positive number of "
            "frames per second; set the frame rate when creating the video",
            source="frames tensor",
        )
    indices = uniform_indices(frame_count, count)
    frames = []
    for position, frame_index in enumerate(indices):
        pixels = to_numpy(images[frame_index])
        try:
            check_pixels(pixels, what="VIDEO frame", index=frame_index)
        except ImageInputError as error:
            raise VideoInputError(str(error), source="frames tensor") from error
        frames.append(
            VideoFramePart(
                image=pixels_to_image(pixels),
                timestamp_seconds=float(frame_index / rate),
                index=position,
            )
        )
        report(progress, "Sampling video frames", position + 1, len(indices))
    return tuple(frames)


def sample_video_frames(
    video: Any,
    count: int = 8,
    *,
    limits: VideoLimits | None = None,
    progress: ProgressCallback | None = None,
    stats: FileSamplerStats | None = None,
) -> tuple[VideoFramePart, ...]:
    """Sample ``count`` frames uniformly over the whole video (or its trim window).

    The first and the last frame are included (for ``count >= 2``); the
    frames between are the ones on screen at evenly spaced instants, so
    variable frame rate videos are sampled by time, not by frame number. A
    video with fewer frames than ``count`` gives each frame once. File-backed
    videos are read by seeking: only the packets the sampled frames depend
    on are decoded (see :func:`comfy_llm_inputs._video_file.sample_file_frames`).

    Args:
        video: A ComfyUI VIDEO (``VideoFromFile``, ``VideoFromComponents``),
            a components object (``images`` + ``frame_rate``), a path, bytes
            or a binary stream.
        count: Frames wanted, ``1..limits.max_video_frames``.
        limits: Bounds.
        progress: Optional ``progress(message, done, total)`` callback.
        stats: Optional counters of decoder work, filled for file-backed
            videos (for tests and benchmarks).

    Returns:
        The frames in time order, ``index`` 0..n-1, ``n <= count``.

    Raises:
        VideoInputError: Unsupported value, bad frame count, missing or
            corrupt file, no video stream, zero frames, invalid frames
            tensor or frame rate.
    """
    limits = limits or VideoLimits()
    check_frame_count(count, limits)
    kind, payload = _classify(video)
    if kind == "components":
        return _frames_from_components(payload, count, progress)
    sampled = sample_file_frames(
        payload,
        count,
        name=_source_name(payload),
        progress=progress,
        stats=stats,
        window=_trim_window(video),
    )
    return tuple(
        VideoFramePart(image=image, timestamp_seconds=seconds, index=position)
        for position, (seconds, image) in enumerate(sampled)
    )
