"""Sample frames from a video file by seeking with PyAV.

Cost is bounded by what the sampled frames need, not by the video's length:

* Targets are evenly spaced instants from the first to the last frame (see
  :func:`._video_source.find_timeline`); each gets the frame whose
  presentation time is nearest (ties go to the later frame), so variable
  frame rate videos are sampled by time.
* Targets are served in order. When the demuxer index shows a keyframe
  between the current position and the next target, the sampler seeks to
  it; otherwise it keeps decoding forward (no GOP is decoded twice).
* Packets whose frame is already known not to be wanted (a later frame at
  or before the target has been demuxed) are sent with
  ``skip_frame=NONREF``, so non-reference frames are dropped undecoded;
  only reference frames and the wanted frame are decoded. Only wanted
  frames are converted to RGB.
* A seek that lands after the target (or on no keyframe) is retried from
  further back, down to a fresh read from the start; streams that cannot
  seek are read forward once.
* A trim window (ComfyUI's ``VideoFromFile.get_active_trim_window()``, set by
  core's Video Slice node) limits the frames to ``start <= pts < end`` as
  ComfyUI's own decoder does; targets are spread over the window, seeking to
  its start, so a short clip of a long file costs little.
"""

from __future__ import annotations

import bisect
import collections
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import av
from PIL import Image

from ._limits import ProgressCallback, report
from ._video_source import (
    FileSamplerStats,
    Source,
    Timeline,
    fail,
    find_timeline,
    refuse_still_image,
    sample_without_timestamps,
    upright,
    video_stream,
)

_LAST = 1 << 62  # target meaning "the last frame"
_LOOKAHEAD = 16  # packets demuxed ahead of the decoder to decide what to skip
_MAX_RETRIES = 6


class _Sampler:
    """Serves ascending targets (pts) from one container, seeking as needed."""

    def __init__(self, source: Source, start: int, stats: FileSamplerStats) -> None:
        self.source = source
        self.start = start
        self.stats = stats
        self.container: Any = None
        self.stream: Any = None
        self.can_seek = True
        self.end = start
        self.keyframes: list[int] = []
        self.indexed = 0
        self.index_trusted: bool | None = None
        self.low = -_LAST  # the trim window: frames with low <= pts < high
        self.high: int | None = None
        self.window_last: Any = None  # the last frame seen inside the window

    # -- runs: one forward pass from a keyframe (or from the start) --------
    def _begin(self, seek_to: int | None) -> None:
        """Start a forward run: seek to ``seek_to`` or, for ``None``, reopen."""
        if self.container is not None:
            self.stats.seeks += 1
        if seek_to is not None and self.can_seek:
            try:
                self.container.seek(seek_to, stream=self.stream, backward=True)
            except (av.FFmpegError, OSError):
                self.can_seek = False
                seek_to = None
        else:
            seek_to = None
        if seek_to is None:
            if self.container is not None:
                self.container.close()
            self.container = self.source.open()
            self.stream = video_stream(self.container, self.source.name)
            self.stream.thread_type = "SLICE"  # per-packet skip_frame takes effect at once
            if self.index_trusted is None:
                self.index_trusted = len(self.stream.index_entries) > 1
        self.stream.codec_context.flush_buffers()
        self.from_start = seek_to is None
        self.demuxer = self.container.demux(self.stream)
        self.pending: collections.deque[Any] = collections.deque()
        self.seen_pts: list[int] = []
        self.key_pts: int | None = None if seek_to is not None else -_LAST
        self.position: int | None = None
        self.eof = False
        self.target = 0
        self.carry: Any = None
        self.frames = self._decode()

    def _demux_one(self) -> bool:
        for packet in self.demuxer:
            if packet.size == 0:
                continue
            if self.key_pts is None:  # after a seek: start at a keyframe
                if not packet.is_keyframe:
                    continue
                self.key_pts = packet.pts if packet.pts is not None else packet.dts
            if packet.pts is not None and packet.pts >= self.key_pts:
                bisect.insort(self.seen_pts, packet.pts)
            stamp = packet.dts if packet.dts is not None else packet.pts
            if stamp is not None:
                self.position = stamp
            self.pending.append(packet)
            return True
        self.eof = True
        return False

    def _best_known(self) -> int | None:
        index = bisect.bisect_right(self.seen_pts, self.target)
        return self.seen_pts[index - 1] if index else None

    def _decode(self) -> Iterator[Any]:
        context = self.stream.codec_context
        while True:
            while not self.eof and (
                len(self.pending) <= _LOOKAHEAD
                and (self.position is None or self.position <= self.target)
            ):
                self._demux_one()
            if not self.pending and not self._demux_one():
                break
            packet = self.pending.popleft()
            best = self._best_known()
            skip = packet.pts is not None and best is not None and packet.pts < best
            context.skip_frame = "NONREF" if skip else "DEFAULT"
            if skip:
                self.stats.packets_skipped += 1
            else:
                self.stats.packets_decoded += 1
            for frame in context.decode(packet):
                self.stats.frames_decoded += 1
                yield frame
        context.skip_frame = "DEFAULT"
        for frame in context.decode(None):
            self.stats.frames_decoded += 1
            yield frame

    def _serve(self, target: int) -> Any:
        """Return the frame nearest ``target`` (ties: the later), or ``None`` to retry."""
        self.target = target
        lowest = max(self.key_pts if self.key_pts is not None else -_LAST, self.low)
        candidate = None  # the latest frame at or before the target
        while True:
            frame = self.carry if self.carry is not None else next(self.frames, None)
            self.carry = None
            if frame is None:
                return candidate
            if frame.pts is None or frame.pts < lowest:
                continue
            if self.high is not None and frame.pts >= self.high:
                self.carry = frame  # past the window: the window's last frame is the answer
                return candidate if candidate is not None else self.window_last
            self.window_last = frame
            if frame.pts > target:
                self.carry = frame  # the first frame after the target; never skipped
                break
            candidate = frame
        if candidate is None:
            return self.carry if self.from_start else None  # a seek landed too late
        if self.carry.pts - target <= target - candidate.pts:
            return self.carry
        return candidate

    # -- seeking decisions ---------------------------------------------------
    def _should_seek(self, target: int, gap: int) -> bool:
        if not self.can_seek or self.eof or self.position is None or target <= self.position:
            return False
        entries = self.stream.index_entries
        if len(entries) != self.indexed:
            self.indexed = len(entries)
            self.keyframes = sorted(entry.timestamp for entry in entries if entry.is_keyframe)
        index = bisect.bisect_right(self.keyframes, target)
        if index and self.keyframes[index - 1] > self.position:
            return True  # a keyframe lies between here and the target
        if self.index_trusted:
            return False  # complete index (MP4, MKV cues): no keyframe in between
        return target - self.position > gap

    def frame_at(self, target: int, gap: int) -> Any:
        """Return the frame on screen at ``target`` (``_LAST``: the last one).

        Args:
            target: Presentation time in stream time-base units.
            gap: Distance beyond which to seek when the index cannot tell.

        Returns:
            A decoded ``av.VideoFrame`` or ``None`` when the video has none.
        """
        where = min(target, self.end)
        if self.container is None:
            self._begin(None)
        elif self._should_seek(where, gap):
            self._begin(where)
        backoff = gap
        for _ in range(_MAX_RETRIES):
            frame = self._serve(target)
            if frame is not None or self.from_start:
                return frame
            seek_to = where - backoff
            backoff *= 2
            self._begin(seek_to if seek_to > self.start else None)
        self._begin(None)
        return self._serve(target)

    def close(self) -> None:
        """Close the open container, if any."""
        if self.container is not None:
            self.container.close()


def _plan(timeline: Timeline, count: int, last: int = _LAST) -> list[int]:
    if count == 1 or not timeline.span:
        return [timeline.start]
    step = Fraction(timeline.span, count - 1)
    return [timeline.start + int(k * step) for k in range(count - 1)] + [last]


def _trim(
    timeline: Timeline, window: tuple[float, float], time_base: Fraction, name: str
) -> tuple[Timeline, int]:
    """The part of ``timeline`` inside ``window`` and its exclusive end (pts).

    Raises:
        VideoInputError: No frame lies inside the window.
    """
    start_seconds, duration_seconds = window
    end = timeline.start + (timeline.span or 0)
    low = max(timeline.start, int(Fraction(start_seconds) / time_base))
    high = end + 1
    if duration_seconds > 0:
        high = min(high, int(Fraction(start_seconds + duration_seconds) / time_base))
    if low >= high or low > end:
        raise fail(
            name,
            f"has no frames in its trim window (start {start_seconds:g} s, duration "
            f"{duration_seconds:g} s)",
            "set the Video Slice start_time inside the video",
        )
    return Timeline(low, high - 1 - low), high


def sample_file_frames(
    source: Any,
    count: int,
    *,
    name: str,
    progress: ProgressCallback | None = None,
    stats: FileSamplerStats | None = None,
    window: tuple[float, float] | None = None,
) -> list[tuple[float, Image.Image]]:
    """Sample up to ``count`` frames of a file-backed video by seeking.

    Args:
        source: A path or a seekable binary stream (a non-seekable one is
            read into memory first).
        count: Frames wanted (>= 1; already checked against the limits).
        name: How to name the video in messages (no directories).
        progress: Optional ``progress(message, done, total)`` callback.
        stats: Optional counters to fill.
        window: ``(start seconds, duration seconds)`` to sample within
            (duration 0: to the end), from ``get_active_trim_window()``.

    Returns:
        ``(seconds from the start of the video or of the window, RGB image)``
        pairs in time order, unique.

    Raises:
        VideoInputError: Missing, empty, corrupt or undecodable file, no
            video stream, a still image, zero frames, no frame inside the window.
    """
    stats = stats if stats is not None else FileSamplerStats()
    reader = Source(source, name)
    with reader.open() as probe:
        stream = video_stream(probe, name)
        refuse_still_image(reader, probe, stream)
        time_base = stream.time_base or Fraction(1, 1000)
        rate = stream.guessed_rate or stream.average_rate or Fraction(25)
        try:
            timeline = find_timeline(probe, stream, reader, stats)
        except av.FFmpegError as error:
            raise fail(name, "could not be read", "re-export the video", error) from error
    if timeline.span is None:
        return sample_without_timestamps(
            reader,
            count,
            frame_count=timeline.frame_count or 1,
            rate=rate,
            progress=progress,
            stats=stats,
        )
    sampler = _Sampler(reader, timeline.start, stats)
    last = _LAST
    if window is not None:
        timeline, sampler.high = _trim(timeline, window, time_base, name)
        sampler.low = timeline.start
        last = timeline.start + (timeline.span or 0)
    assert timeline.span is not None
    sampler.end = timeline.start + timeline.span
    gap = max(1, int(Fraction(2) / time_base))
    results: dict[int, Image.Image] = {}
    targets = _plan(timeline, count, last)
    try:
        for done, target in enumerate(targets, start=1):
            frame = sampler.frame_at(target, gap)
            if frame is not None and frame.pts not in results:
                results[frame.pts] = upright(frame)
            report(progress, "Sampling video frames", done, len(targets))
    except (av.FFmpegError, OSError) as error:
        raise fail(name, "could not be decoded", "re-export the video", error) from error
    finally:
        sampler.close()
    if not results:
        raise fail(name, "has zero decodable frames", "re-export the video")
    return [
        (max(0.0, float((pts - timeline.start) * time_base)), results[pts])
        for pts in sorted(results)
    ]
