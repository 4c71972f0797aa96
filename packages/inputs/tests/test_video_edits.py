"""VIDEO values with pending crop/resize edits (ComfyUI after 0.33) are sampled as the
artist sees them; ComfyUI 0.33's VideoFromFile (no edits) keeps the seeking sampler.

The VIDEO classes are the ComfyUI stand-in's (testing/comfyui_standin, modelled on
upstream's comfy_api/latest/_input_impl/video_types.py after 0.33)."""

from __future__ import annotations

import numpy as np
import pytest
from comfy_llm_core import VideoLimits
from comfy_llm_inputs import sample_video_frames
from comfy_llm_inputs._video_source import FileSamplerStats
from comfy_llm_inputs.errors import VideoInputError
from comfy_llm_testworld.comfyui_standin import installed_standin


@pytest.fixture
def video_types():
    with installed_standin():
        from comfy_api.latest._input_impl import video_types

        yield video_types


def _white_corner(frame, side: int = 4) -> bool:
    pixels = np.asarray(frame.image.convert("RGB"), dtype=np.int32)
    return bool((pixels[:side, :side] > 200).all())


def test_cropped_video_gives_the_cropped_picture(make_video, video_types) -> None:
    path = str(make_video(frames=30))  # 64x48, white 8x8 mark top-left
    video = video_types.VideoFromFileWithEdits(path).as_cropped(16, 16, 32, 24)
    assert video.has_pending_frame_edits()
    frames = sample_video_frames(video, 4)
    assert len(frames) == 4
    assert {frame.image.size for frame in frames} == {(32, 24)}
    assert not any(_white_corner(frame) for frame in frames)


def test_resized_video_gives_the_resized_picture(make_video, video_types) -> None:
    path = str(make_video(frames=30))
    video = video_types.VideoFromFileWithEdits(path).as_resized(32, 16, "bilinear")
    frames = sample_video_frames(video, 3)
    assert {frame.image.size for frame in frames} == {(32, 16)}
    assert all(_white_corner(frame, side=2) for frame in frames)  # scaled, not cropped


def test_crop_then_resize_keeps_the_trim_window(make_video, video_types) -> None:
    path = str(make_video(frames=90, gop=10))  # 3 s at 30 fps; red level encodes the index
    video = (
        video_types.VideoFromFileWithEdits(path, start_time=1.0, duration=1.0)
        .as_cropped(16, 16, 32, 24)
        .as_resized(16, 12, "bilinear")
    )
    frames = sample_video_frames(video, 2)
    assert {frame.image.size for frame in frames} == {(16, 12)}
    reds = [int(np.asarray(frame.image.convert("RGB"))[6, 8, 0]) for frame in frames]
    # frames 30..59 of the file: red = index * 8 % 256 -> 240 for frame 30, 216 for 59
    assert abs(reds[0] - (30 * 8) % 256) <= 12 and abs(reds[1] - (59 * 8) % 256) <= 12


def test_comfyui_033_video_is_sampled_by_seeking_unchanged(make_video, video_types) -> None:
    path = str(make_video(frames=90, gop=10))
    stats = FileSamplerStats()
    video = video_types.VideoFromFile(path, start_time=1.0, duration=1.0)
    assert not hasattr(video, "has_pending_frame_edits")
    frames = sample_video_frames(video, 4, stats=stats)
    assert {frame.image.size for frame in frames} == {(64, 48)}
    assert all(_white_corner(frame) for frame in frames)
    assert 0.0 <= frames[0].timestamp_seconds < frames[-1].timestamp_seconds < 1.0  # window time
    assert stats.seeks >= 1 and stats.packets_decoded < 90  # sought, not decoded whole
    # The same with the newer class and no edit: still the seeking sampler.
    plain = video_types.VideoFromFileWithEdits(path, start_time=1.0, duration=1.0)
    assert not plain.has_pending_frame_edits()
    assert [f.timestamp_seconds for f in sample_video_frames(plain, 4)] == [
        f.timestamp_seconds for f in frames
    ]


def test_an_edited_video_too_big_to_decode_is_refused_before_decoding(
    make_video, video_types, monkeypatch
) -> None:
    path = str(make_video(frames=30))
    video = video_types.VideoFromFileWithEdits(path).as_resized(4000, 4000, "bilinear")
    decoded = []
    monkeypatch.setattr(video, "get_components", lambda: decoded.append(1))
    expected = r"30 frames at 4000x4000 need 5\.4 GiB \(limit 4 GiB\)"
    with pytest.raises(VideoInputError, match=expected):
        sample_video_frames(video, 4, limits=VideoLimits())
    assert decoded == []
