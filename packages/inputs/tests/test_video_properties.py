"""Sampling properties, checked against a full decode (the oracle)."""

from __future__ import annotations

import io
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest
from comfy_llm_core import VideoLimits
from comfy_llm_inputs import VideoInputError, sample_video_frames
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

LIMITS = VideoLimits(max_video_frames=64)
CFR_CLIPS = ("h264", "mpeg4", "gop8", "mpegts", "nodur")
ORACLE: dict[str, list[float]] = {}


def _oracle(clips, oracle_seconds, name: str) -> list[float]:
    if name not in ORACLE:
        ORACLE[name] = oracle_seconds(clips[name])
    return ORACLE[name]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(name=st.sampled_from((*CFR_CLIPS, "vfr")), count=st.integers(1, 64))
def test_file_sampling_matches_the_oracle(clips, oracle_seconds, name: str, count: int) -> None:
    truth = _oracle(clips, oracle_seconds, name)
    times = [
        frame.timestamp_seconds for frame in sample_video_frames(clips[name], count, limits=LIMITS)
    ]
    assert times == sorted(set(times)), "sorted and unique"
    assert all(any(abs(t - o) < 1e-6 for o in truth) for t in times), "real frames only"
    assert times[0] == 0.0 == truth[0]
    if count >= 2:
        assert times[-1] == pytest.approx(truth[-1])
    else:
        assert len(times) == 1
    if name in CFR_CLIPS:
        assert len(times) == min(count, len(truth))
    else:
        assert len(times) <= count
    if count >= 2:
        tolerance = 0.0021  # timestamps are stored in whole milliseconds or finer
        span = truth[-1]
        for k in range(count):
            target = k * span / (count - 1)
            best = min(abs(o - target) for o in truth)
            assert any(abs(t - target) <= best + tolerance for t in times), (k, target)


@settings(max_examples=60, deadline=None)
@given(
    frame_count=st.integers(1, 60),
    fps=st.fractions(min_value=Fraction(1, 2), max_value=Fraction(120)),
    count=st.integers(1, 32),
)
def test_components_sampling_properties(frame_count: int, fps: Fraction, count: int) -> None:
    images = np.linspace(0, 1, frame_count, dtype=np.float32)[:, None, None, None] * np.ones(
        (1, 2, 3, 3), np.float32
    )
    video = SimpleNamespace(images=images, frame_rate=fps)
    frames = sample_video_frames(video, count)
    times = [frame.timestamp_seconds for frame in frames]
    assert len(frames) == min(count, frame_count)
    assert times == sorted(set(times))
    assert times[0] == 0.0
    assert all(0.0 <= t <= (frame_count - 1) / fps + 1e-9 for t in times)
    if count >= 2:
        assert times[-1] == pytest.approx(float((frame_count - 1) / fps))
    assert [frame.index for frame in frames] == list(range(len(frames)))
    # the picked frames are the ones at those times
    for frame, seconds in zip(frames, times, strict=True):
        index = round(seconds * fps)
        expected = float(images[index, 0, 0, 0]) * 255
        assert abs(int(np.asarray(frame.image)[0, 0, 0]) - expected) <= 0.5 + 1e-3


class VideoFromComponents:
    """Stand-in named like ComfyUI's class: its stream source would re-encode."""

    def __init__(self, images, frame_rate) -> None:
        self._components = SimpleNamespace(images=images, frame_rate=frame_rate, audio=None)

    def get_components(self):
        return self._components

    def get_stream_source(self):
        raise AssertionError("must not encode a components video to a stream")


class VideoFromFile:
    """Stand-in for ComfyUI's file-backed VIDEO: get_components decodes everything."""

    def __init__(self, source) -> None:
        self._source = source

    def get_stream_source(self):
        if isinstance(self._source, io.BytesIO):
            self._source.seek(0)
        return self._source

    def get_components(self):
        raise AssertionError("get_components() decodes every frame; never call it")


def test_comfy_video_from_components_with_torch() -> None:
    torch = pytest.importorskip("torch")
    images = torch.linspace(0, 1, 10).reshape(10, 1, 1, 1).expand(10, 4, 6, 3).contiguous()
    frames = sample_video_frames(VideoFromComponents(images, Fraction(5)), 3)
    assert [frame.timestamp_seconds for frame in frames] == [0.0, 1.0, 1.8]
    assert frames[0].image.size == (6, 4)


def test_comfy_video_from_file_path_and_stream(clips) -> None:
    path = clips["h264"]
    by_path = sample_video_frames(VideoFromFile(str(path)), 3)
    by_stream = sample_video_frames(VideoFromFile(io.BytesIO(path.read_bytes())), 3)
    assert [f.timestamp_seconds for f in by_path] == [f.timestamp_seconds for f in by_stream]
    assert len(by_path) == 3


def test_components_errors() -> None:
    def video(images, rate=Fraction(24)):
        return SimpleNamespace(images=images, frame_rate=rate)

    with pytest.raises(VideoInputError, match=r"zero frames"):
        sample_video_frames(video(np.zeros((0, 4, 4, 3), np.float32)), 2)
    with pytest.raises(VideoInputError, match=r"shape \[4, 4, 3\]"):
        sample_video_frames(video(np.zeros((4, 4, 3), np.float32)), 2)
    with pytest.raises(VideoInputError, match=r"frame rate"):
        sample_video_frames(video(np.zeros((2, 4, 4, 3), np.float32), rate=0), 2)
    bad = np.zeros((3, 4, 4, 3), np.float32)
    bad[2, 0, 0, 0] = np.nan
    with pytest.raises(VideoInputError, match=r"NaN"):
        sample_video_frames(video(bad), 3)


def test_unsupported_video_value() -> None:
    with pytest.raises(VideoInputError, match=r"int is not supported"):
        sample_video_frames(42, 2)
