"""Opening video files, finding their timeline, converting frames.

Helpers for :mod:`._video_file`: a reopenable source (path or seekable
stream), the video stream choice (cover art skipped), the stream's start and
duration (stream, else container, else a packet scan that reads timestamps
without decoding), upright RGB conversion, and the fallback for raw streams
without timestamps.
"""

from __future__ import annotations

import dataclasses
import io
import math
import os
from fractions import Fraction
from typing import Any

import av
from PIL import Image

from ._limits import ProgressCallback, report
from ._paths import path_problem
from .errors import VideoInputError

_END_MARGIN_SECONDS = 2
_PIL_ROTATE = {90: Image.Transpose.ROTATE_90, 180: Image.Transpose.ROTATE_180}
_PIL_ROTATE[270] = Image.Transpose.ROTATE_270


@dataclasses.dataclass
class FileSamplerStats:
    """Counters of the work one file-backed sampling did (tests, benchmarks).

    Attributes:
        duration_source: ``"stream"``, ``"container"`` or ``"packet scan"``.
        seeks: Seeks made (reopening at the start counts as one).
        packets_decoded: Packets fully decoded.
        packets_skipped: Packets sent with ``skip_frame=NONREF``.
        frames_decoded: Frames the decoder produced.
    """

    duration_source: str = ""
    seeks: int = 0
    packets_decoded: int = 0
    packets_skipped: int = 0
    frames_decoded: int = 0


def fail(name: str, what: str, fix: str, error: BaseException | None = None) -> VideoInputError:
    """Build a :class:`VideoInputError` naming the video, the problem and the fix.

    Args:
        name: The video's name.
        what: What is wrong.
        fix: What to do.
        error: The underlying error, quoted when it has a message.

    Returns:
        The error (to raise).
    """
    # FFmpeg and OS errors quote the full path: keep only their reason.
    reason = getattr(error, "strerror", None) or (str(error) if error is not None else "")
    detail = f" ({reason})" if reason else ""
    return VideoInputError(f"Video {name!r} {what}{detail}; {fix}", source=name)


class Source:
    """Opens the same video again and again (a path or a seekable stream)."""

    def __init__(self, source: Any, name: str) -> None:
        self.name = name
        if isinstance(source, (str, os.PathLike)):
            path = os.fspath(source)
            problem = path_problem(path)
            if problem is not None:
                raise VideoInputError(f"Video {name!r} {problem}", source=name)
            self.source: Any = path
        elif callable(getattr(source, "seekable", None)) and not source.seekable():
            self.source = io.BytesIO(source.read())
        else:
            self.source = source

    def open(self) -> av.container.InputContainer:
        if not isinstance(self.source, str):
            self.source.seek(0)
        try:
            return av.open(self.source, mode="r")
        except (av.FFmpegError, OSError, ValueError) as error:
            raise fail(
                self.name,
                "could not be opened as a video: it is empty, corrupt or not a video",
                "re-export it as MP4 (H.264) or WebM",
                error,
            ) from error


def video_stream(container: av.container.InputContainer, name: str) -> Any:
    for stream in container.streams.video:
        if not stream.disposition & av.stream.Disposition.attached_pic:
            return stream
    raise fail(name, "has no video stream", "connect a file that contains video")


# Codecs of still images: a file whose only video stream holds one such frame
# is a picture with a video's extension, not a video (an MJPEG or GIF clip of
# many frames is still a video).
_IMAGE_CODECS = frozenset(
    {"png", "apng", "mjpeg", "jpeg2000", "jpegls", "bmp", "gif", "webp", "tiff", "qoi"}
)


def _packets_up_to(source: Source, limit: int) -> int:
    """Count the video stream's packets, demuxing (not decoding) at most ``limit``."""
    count = 0
    with source.open() as scan:
        for packet in scan.demux(video_stream(scan, source.name)):
            if packet.size:
                count += 1
                if count >= limit:
                    break
    return count


def refuse_still_image(source: Source, container: av.container.InputContainer, stream: Any) -> None:
    """Refuse a picture that only carries a video's name (a PNG renamed ``.mp4``).

    FFmpeg opens any image as a one-frame "video" through its image demuxers
    (``png_pipe``, ``jpeg_pipe``, ``image2``...), so sampling would quietly
    caption the picture as a video. Checked once, where the file enters; a
    still-image codec in a real container costs a demux of two packets at most.

    Raises:
        VideoInputError: The file is an image, or its only video stream is a
            single still-image frame.
    """
    demuxer = container.format.name
    codec = stream.codec_context.name
    still = demuxer.endswith("_pipe") or demuxer in {"image2", "image2pipe"}
    if not still and codec in _IMAGE_CODECS:
        try:
            still = (stream.frames or _packets_up_to(source, 2)) <= 1
        except (av.FFmpegError, OSError):
            still = False  # left to the sampler, which names the read error
    if still:
        raise fail(
            source.name,
            f"is not a video: it holds a single {codec.upper()} image",
            "connect it to an image input instead, or pick a video file (MP4, WebM, MOV)",
        )


@dataclasses.dataclass
class Timeline:
    """Where a stream's frames lie, in stream time-base units.

    Attributes:
        start: Presentation time of the first frame (time 0.0 of the video).
        span: From ``start`` to the last frame's presentation time when it
            was found, else the stream's duration; ``None`` when the stream
            has no timestamps at all.
        frame_count: Frames counted by a packet scan, when one was made.
    """

    start: int
    span: int | None
    frame_count: int | None = None


def _last_pts(container: Any, stream: Any, before_end: int) -> int | None:
    """The last frame's presentation time, by demuxing (not decoding) the end.

    Reading starts at ``before_end`` (a margin before the end): a frame shown
    last may be stored well before the last packet (B-frame reordering), and
    some demuxers (MPEG-TS) do not seek to keyframes.
    """
    try:
        container.seek(before_end, stream=stream, backward=True)
        stamps = [packet.pts for packet in container.demux(stream) if packet.pts is not None]
    except (av.FFmpegError, OSError):
        return None
    return max(stamps) if stamps else None


def find_timeline(container: Any, stream: Any, source: Source, stats: FileSamplerStats) -> Timeline:
    """Find the start and span of the video stream, cheaply.

    The duration comes from the stream, else the container; the last
    frame's time is then read from the packets of the last two seconds (a
    duration can be wrong: MP4 takes it from decode times). Without
    either duration, every packet's timestamp is scanned (no decoding).

    Args:
        container: An open container (it is seeked).
        stream: Its video stream.
        source: The video, to reopen for a packet scan.
        stats: ``duration_source`` is set.

    Returns:
        The timeline.

    Raises:
        VideoInputError: The stream has no packets.
    """
    time_base = stream.time_base
    start = stream.start_time
    duration = None
    if stream.duration:
        stats.duration_source = "stream"
        duration = int(stream.duration)
    elif container.duration:
        stats.duration_source = "container"
        duration = int(Fraction(container.duration, av.time_base) / time_base)
        if start is None:
            start = int(Fraction(container.start_time or 0, av.time_base) / time_base)
    if duration is not None:
        start = start or 0
        margin = int(Fraction(_END_MARGIN_SECONDS) / time_base)
        last = _last_pts(container, stream, start + max(0, duration - margin))
        if last is not None and last >= start:
            return Timeline(start, last - start)
        return Timeline(start, duration)
    stats.duration_source = "packet scan"
    first = last = None
    count = 0
    with source.open() as scan:
        for packet in scan.demux(video_stream(scan, source.name)):
            if not packet.size:
                continue
            count += 1
            if packet.pts is not None:
                first = packet.pts if first is None else min(first, packet.pts)
                last = packet.pts if last is None else max(last, packet.pts)
    if count == 0:
        raise fail(source.name, "has zero frames", "connect a video with at least one frame")
    if first is None or last is None:
        return Timeline(0, None, count)
    return Timeline(first, last - first, count)


def upright(frame: Any) -> Image.Image:
    """Convert a decoded frame to RGB, rotated as its display matrix says.

    Args:
        frame: An ``av.VideoFrame``.

    Returns:
        The upright RGB image.
    """
    # ~6x faster than VideoFrame.to_image() at 1080p, and needs no numpy.
    rgb = frame.reformat(format="rgb24")
    plane = rgb.planes[0]
    image = Image.frombuffer(
        "RGB", (rgb.width, rgb.height), bytes(plane), "raw", "RGB", plane.line_size, 1
    )
    rotation = round((frame.rotation or 0) / 90) * 90 % 360
    if rotation in _PIL_ROTATE:
        return image.transpose(_PIL_ROTATE[rotation])
    return image


def uniform_indices(frame_count: int, count: int) -> list[int]:
    """Pick ``count`` frame indices spread evenly over ``frame_count`` frames.

    Both ends are included when ``count >= 2``; a video with fewer frames
    than requested gives all of its frames (no duplicates); ``count == 1``
    gives the first frame.

    Args:
        frame_count: Frames in the video (>= 1).
        count: Frames wanted (>= 1).

    Returns:
        Sorted, unique indices in ``0..frame_count-1``.
    """
    if count >= frame_count:
        return list(range(frame_count))
    if count == 1:
        return [0]
    step = Fraction(frame_count - 1, count - 1)
    return sorted({math.floor(k * step + Fraction(1, 2)) for k in range(count)})


def sample_without_timestamps(
    reader: Source,
    count: int,
    *,
    frame_count: int,
    rate: Fraction,
    progress: ProgressCallback | None,
    stats: FileSamplerStats,
) -> list[tuple[float, Image.Image]]:
    """Sample a raw stream without timestamps: decode forward once, pick by index.

    Args:
        reader: The video.
        count: Frames wanted.
        frame_count: Frames counted by the packet scan.
        rate: Frames per second, for the timestamps.
        progress: Optional ``progress(message, done, total)`` callback.
        stats: Counters to fill.

    Returns:
        ``(seconds, image)`` pairs in order.

    Raises:
        VideoInputError: The stream cannot be decoded or has no frames.
    """
    wanted = set(uniform_indices(frame_count, count))
    picked: dict[int, Image.Image] = {}
    last: tuple[int, Any] | None = None
    try:
        with reader.open() as container:
            stream = video_stream(container, reader.name)
            for index, frame in enumerate(container.decode(stream)):
                stats.frames_decoded += 1
                last = (index, frame)
                if index in wanted:
                    picked[index] = upright(frame)
                    report(progress, "Sampling video frames", len(picked), len(wanted))
                    if len(picked) == len(wanted):
                        break
    except av.FFmpegError as error:
        raise fail(reader.name, "could not be decoded", "re-export the video", error) from error
    if last is None:
        raise fail(reader.name, "has zero decodable frames", "re-export the video")
    if len(picked) < len(wanted) and last[0] not in picked:
        picked[last[0]] = upright(last[1])
    return [(float(index / rate), picked[index]) for index in sorted(picked)]
