"""File-backed videos: sampled by seeking with PyAV, never decoded whole."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from comfy_llm_core import VideoLimits
from comfy_llm_inputs import FileSamplerStats, VideoInputError, sample_video_frames


def _times(frames) -> list[float]:
    return [round(frame.timestamp_seconds, 4) for frame in frames]


def _red(frame) -> int:
    """The frame number encoded in the red channel (see conftest.frame_pixels)."""
    pixels = np.asarray(frame.image)
    return round(float(pixels[20:, 20:, 0].mean()) / 8)


def test_samples_evenly_with_both_ends(make_video) -> None:
    path = make_video(frames=30)
    frames = sample_video_frames(path, 4)
    # instants 0, 9.67, 19.33 and 29 frame periods: the nearest frames
    assert _times(frames) == [0.0, round(10 / 30, 4), round(19 / 30, 4), round(29 / 30, 4)]
    assert [frame.index for frame in frames] == [0, 1, 2, 3]
    assert [_red(frame) for frame in frames] == [0, 10, 19, 29]
    for frame in frames:
        assert frame.image.mode == "RGB"
        assert frame.image.size == (64, 48)


def test_single_frame_request_gives_first_frame(make_video) -> None:
    frames = sample_video_frames(make_video(frames=30), 1)
    assert _times(frames) == [0.0]


def test_short_video_gives_each_frame_once(make_video) -> None:
    frames = sample_video_frames(make_video(frames=3), 8)
    assert _times(frames) == [0.0, round(1 / 30, 4), round(2 / 30, 4)]
    assert [_red(frame) for frame in frames] == [0, 1, 2]


def test_single_frame_video(make_video) -> None:
    frames = sample_video_frames(make_video(frames=1), 8)
    assert len(frames) == 1
    assert frames[0].timestamp_seconds == 0.0


def test_variable_frame_rate_is_sampled_by_time(make_video) -> None:
    pts = [0, 10, 20, 500, 520, 1500, 1510, 1520, 3000, 3010]
    path = make_video(frames=len(pts), pts_ms=pts)
    frames = sample_video_frames(path, 3)
    # the middle instant 1.505 s is as near 1.50 s as 1.51 s: ties go to the later frame
    assert _times(frames) == [0.0, 1.51, 3.01]
    assert [_red(frame) for frame in frames] == [0, 6, 9]


def test_rotated_stream_is_turned_upright(make_video) -> None:
    path = make_video(frames=5, rotation=90)
    frame = sample_video_frames(path, 1)[0]
    assert frame.image.size == (48, 64)
    pixels = np.asarray(frame.image)
    # rotated 90 degrees counter-clockwise: the top-left mark ends bottom-left
    assert pixels[-4, 3].min() > 200
    assert pixels[3, 3].max() < 60


@pytest.mark.parametrize("rotation", [180, -90])
def test_other_rotations(make_video, rotation: int) -> None:
    frame = sample_video_frames(make_video(frames=3, rotation=rotation), 1)[0]
    pixels = np.asarray(frame.image)
    if rotation == 180:
        assert frame.image.size == (64, 48)
        assert pixels[-4, -4].min() > 200
    else:
        assert frame.image.size == (48, 64)
        assert pixels[3, -4].min() > 200


def test_stream_without_duration_falls_back_to_packet_scan(make_video) -> None:
    path = make_video(".mkv", frames=30, container_format="matroska", non_seekable=True)
    stats = FileSamplerStats()
    frames = sample_video_frames(path, 3, stats=stats)
    assert stats.duration_source == "packet scan"
    assert [_red(frame) for frame in frames] == [0, 14, 29]  # 1 ms timestamps: 467 < 500


def test_mpegts_with_nonzero_start(make_video) -> None:
    frames = sample_video_frames(make_video(".ts", frames=30, container_format="mpegts"), 3)
    assert _times(frames)[0] == 0.0
    assert [_red(frame) for frame in frames] == [0, 15, 29]


def test_raw_h264_without_timestamps(make_video) -> None:
    path = make_video(".h264", frames=30, container_format="h264")
    stats = FileSamplerStats()
    frames = sample_video_frames(path, 3, stats=stats)
    assert stats.duration_source == "packet scan"
    assert [_red(frame) for frame in frames] == [0, 15, 29]
    assert _times(frames) == [0.0, 0.5, round(29 / 30, 4)]


def test_mpeg4_part2(make_video) -> None:
    frames = sample_video_frames(make_video(frames=25, rate=25, codec="mpeg4"), 5)
    assert _times(frames) == [0.0, 0.24, 0.48, 0.72, 0.96]


def test_many_frames_decode_only_what_samples_need(tmp_path: Path, video_writer) -> None:
    path = video_writer(tmp_path / "long.mp4", frames=300, gop=30)
    stats = FileSamplerStats()
    frames = sample_video_frames(path, 4, stats=stats)
    assert [_red(frame) % 32 for frame in frames] == [0, 100 % 32, 199 % 32, 299 % 32]
    # each target costs at most one GOP of 30 packets (+ reorder), not 300
    assert stats.packets_decoded + stats.packets_skipped <= 4 * 30 + 20
    assert stats.frames_decoded <= 80
    assert stats.seeks >= 2


def test_one_long_gop_is_decoded_once(tmp_path: Path, video_writer) -> None:
    path = video_writer(tmp_path / "onegop.mp4", frames=120, gop=250)
    stats = FileSamplerStats()
    sample_video_frames(path, 12, stats=stats)
    # nothing is decoded twice: every packet goes to the decoder at most once
    assert stats.packets_decoded + stats.packets_skipped <= 120
    assert stats.seeks == 0
    # non-reference frames that are not sampled are skipped, not decoded
    assert stats.packets_skipped > 0


def test_bytes_and_stream_sources(make_video) -> None:
    data = make_video(frames=30).read_bytes()
    from_bytes = sample_video_frames(data, 3)
    from_stream = sample_video_frames(io.BytesIO(data), 3)
    assert _times(from_bytes) == _times(from_stream) == [0.0, 0.5, round(29 / 30, 4)]


def test_frame_count_bounds(make_video) -> None:
    path = make_video(frames=10)
    with pytest.raises(VideoInputError, match=r"video_frames=9 exceeds .* limit of 4") as info:
        sample_video_frames(path, 9, limits=VideoLimits(max_video_frames=4))
    assert (info.value.value, info.value.limit) == (9, 4)
    with pytest.raises(VideoInputError, match=r"at least one frame"):
        sample_video_frames(path, 0)


def test_missing_empty_and_corrupt_files(tmp_path: Path) -> None:
    with pytest.raises(VideoInputError, match=r"'nope.mp4' was not found"):
        sample_video_frames(tmp_path / "nope.mp4", 3)
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    with pytest.raises(VideoInputError, match=r"'empty.mp4' could not be opened") as info:
        sample_video_frames(empty, 3)
    assert info.value.source == "empty.mp4"
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"\x00\x01garbage" * 500)
    with pytest.raises(VideoInputError, match=r"corrupt"):
        sample_video_frames(junk, 3)
    assert str(tmp_path) not in str(info.value)


def test_truncated_file_is_refused_or_sampled(make_video) -> None:
    data = make_video(frames=30).read_bytes()
    try:
        frames = sample_video_frames(data[: len(data) // 2], 4)
    except VideoInputError as error:
        assert "stream" in str(error)
    else:
        assert 1 <= len(frames) <= 4


def test_audio_only_file_has_no_video_stream(tmp_path: Path) -> None:
    import av

    path = tmp_path / "tone.m4a"
    with av.open(str(path), "w") as out:
        stream = out.add_stream("aac", rate=8000)
        frame = av.AudioFrame.from_ndarray(
            np.zeros((1, 1024), np.float32), format="fltp", layout="mono"
        )
        frame.sample_rate = 8000
        for packet in stream.encode(frame):
            out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    with pytest.raises(VideoInputError, match=r"has no video stream"):
        sample_video_frames(path, 2)


def test_zero_frame_video(tmp_path: Path) -> None:
    import av

    path = tmp_path / "zero.mkv"
    with av.open(str(path), "w") as out:
        stream = out.add_stream("mpeg4", rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
    with pytest.raises(VideoInputError, match=r"zero|could not be opened|no video"):
        sample_video_frames(path, 2)


def test_progress_reports_each_frame_and_may_cancel(make_video) -> None:
    path = make_video(frames=30)
    seen: list[tuple[str, int, int]] = []
    sample_video_frames(path, 3, progress=lambda *event: seen.append(event))
    assert seen == [("Sampling video frames", k, 3) for k in (1, 2, 3)]

    class Cancelled(Exception):
        pass

    def cancel(message: str, done: int, total: int) -> None:
        raise Cancelled

    with pytest.raises(Cancelled):
        sample_video_frames(path, 3, progress=cancel)


def test_oracle_agrees_on_gop8(clips, oracle_seconds) -> None:
    expected = oracle_seconds(clips["gop8"])
    frames = sample_video_frames(clips["gop8"], 40, limits=VideoLimits(max_video_frames=40))
    assert [frame.timestamp_seconds for frame in frames] == pytest.approx(expected)


class VideoFromFile:
    """A trimmed ComfyUI 0.33 ``VideoFromFile`` as the Video Slice node makes it:
    the stream source is the whole file; the trim window says which part is the video."""

    def __init__(self, file: str, *, start_time: float = 0, duration: float = 0) -> None:
        self._file, self._window = file, (start_time, duration)

    def get_stream_source(self) -> str:
        return self._file

    def get_active_trim_window(self) -> tuple[float, float]:
        return self._window


def test_trimmed_video_is_sampled_inside_its_window_only(make_video) -> None:
    path = str(make_video(frames=90, gop=10))  # 3 s at 30 fps
    stats = FileSamplerStats()
    frames = sample_video_frames(VideoFromFile(path, start_time=1.0, duration=1.0), 4, stats=stats)
    # the clip is frames 30..59 (ComfyUI keeps start <= t < start + duration); the
    # instants 0, 1/3, 2/3 and 1 s of the window, the last one inside it
    assert [_red(frame) for frame in frames] == [n % 32 for n in (30, 40, 50, 59)]
    assert _times(frames) == [0.0, round(10 / 30, 4), round(20 / 30, 4), round(29 / 30, 4)]
    assert stats.frames_decoded < 60  # the part before the window is skipped by seeking


def test_trim_window_without_duration_runs_to_the_end(make_video) -> None:
    path = str(make_video(frames=60))
    frames = sample_video_frames(VideoFromFile(path, start_time=1.5), 2)
    assert [_red(frame) for frame in frames] == [n % 32 for n in (45, 59)]


def test_trim_window_past_the_end_is_refused(make_video) -> None:
    path = str(make_video(frames=30))
    with pytest.raises(VideoInputError, match="trim window"):
        sample_video_frames(VideoFromFile(path, start_time=5.0, duration=1.0), 2)


@pytest.mark.parametrize(("pil_format", "codec"), [("PNG", "PNG"), ("JPEG", "MJPEG")])
def test_picture_renamed_mp4_is_not_a_video(tmp_path: Path, pil_format: str, codec: str) -> None:
    from PIL import Image

    path = tmp_path / "photo.mp4"
    Image.new("RGB", (64, 48), "red").save(path, pil_format)
    expected = rf"'photo.mp4' is not a video.*single {codec}"
    with pytest.raises(VideoInputError, match=expected) as info:
        sample_video_frames(path, 4)
    assert info.value.source == "photo.mp4"
    assert str(tmp_path) not in str(info.value)


def test_single_png_frame_in_a_video_container_is_not_a_video(make_video) -> None:
    path = make_video(".mov", frames=1, codec="png", container_format="mov", pix_fmt="rgb24")
    with pytest.raises(VideoInputError, match=r"is not a video.*single PNG"):
        sample_video_frames(path, 2)


@pytest.mark.parametrize("codec", ["libx264", "mjpeg"])
def test_tiny_real_videos_are_still_accepted(make_video, codec: str) -> None:
    # one H.264 frame is a video; MJPEG of many frames is a video
    frames = 1 if codec == "libx264" else 5
    pix_fmt = "yuv420p" if codec == "libx264" else "yuvj420p"
    path = make_video(frames=frames, codec=codec, container_format="matroska", pix_fmt=pix_fmt)
    assert len(sample_video_frames(path, 8)) == frames
