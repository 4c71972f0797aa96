"""A video clip on the caption chunk wire: its sampled frames as typed ``video_frame`` parts."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_modal_remote import ChunkFrame, ChunkImage, encode_video_file
from comfy_llm_modal_remote.errors import RemoteExecutionError
from comfy_llm_modal_remote.wire._chunk_wire import CHUNK_WIRE_VERSION, ChunkRequest
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.media import write_test_video
from comfy_llm_testworld.modal_strict import StrictTransport


def _request(*images: ChunkImage) -> ChunkRequest:
    return ChunkRequest(
        request_id="r",
        chunk_id=0,
        attempt=0,
        profile={},
        snapshot="s",
        prompt="Caption it.",
        system_prompt=None,
        settings={},
        images=images,
        batch_size=1,
    )


def test_a_clip_travels_as_its_sampled_frames_and_comes_back_equal(tmp_path: Path) -> None:
    from comfy_llm_inputs import sample_video_frames

    clip = write_test_video(tmp_path / "walk.mp4", frames=20, fps=10, size=32)
    sent = encode_video_file(clip, index=3, name="clips/walk.mp4", frames=5)
    assert sent.data == b"" and (sent.width, sent.height) == (32, 32)
    local = sample_video_frames(str(clip), 5)  # what the describe node gives the model
    assert [f.timestamp_seconds for f in sent.frames] == [f.timestamp_seconds for f in local]
    assert [f.index for f in sent.frames] == [0, 1, 2, 3, 4]
    assert all(frame.data[:3] == b"\xff\xd8\xff" for frame in sent.frames)  # JPEG
    assert sent.wire_bytes == sum(len(frame.data) for frame in sent.frames)
    wire = _request(sent).to_wire()
    assert wire["version"] == CHUNK_WIRE_VERSION == 3
    assert {frame["kind"] for frame in wire["images"][0]["frames"]} == {"video_frame"}
    back = ChunkRequest.from_wire(wire)
    assert back.images == (sent,) and back.image_bytes == sent.wire_bytes


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"kind": "image"}, "kind 'image'"),
        ({"timestamp_seconds": math.nan}, "not finite"),
        ({"data": "not bytes"}, "not bytes"),
    ],
)
def test_a_malformed_frame_is_refused_where_the_chunk_enters(
    change: dict[str, object], problem: str
) -> None:
    frame = ChunkFrame(b"\xff\xd8\xff", 8, 8, 0.5, 0)
    wire = _request(ChunkImage(0, "a.mp4", b"", 8, 8, frames=(frame,))).to_wire()
    wire["images"][0]["frames"][0].update(change)
    with pytest.raises(RemoteExecutionError, match="caption chunk request is malformed") as raised:
        ChunkRequest.from_wire(wire)
    assert problem in str(raised.value)


@pytest.mark.slow
def test_a_model_without_video_refuses_the_clip_alone_on_the_worker(
    model_hub: FakeHub, transport: StrictTransport, tmp_path: Path
) -> None:
    from comfy_llm_modal_remote import Dispatcher, FanOutImage, FanOutJob, caption_fan_out
    from comfy_llm_residency.backend import GenerationSettings
    from comfy_llm_testworld.families import build_family_files

    model_hub.add_repo("tiny/gemma3", build_family_files("gemma3"))  # images only
    clip = write_test_video(tmp_path / "walk.mp4", frames=6)
    images = [
        FanOutImage(
            0, "walk.mp4", lambda: encode_video_file(clip, index=0, name="walk.mp4", frames=4)
        )
    ]
    job = FanOutJob(
        model="tiny/gemma3",
        prompt="Caption it.",
        system_prompt=None,
        settings=GenerationSettings(temperature=0.0, max_new_tokens=4),
        gpu="H100",
        reserve_gb=0.0,
    )
    answers: list[Any] = []

    class Collector:
        def captions(self, result: Any) -> None:
            answers.extend(result.captions)

        def failed(self, indices: Any, message: str) -> None:
            raise AssertionError(f"the chunk failed: {message}")

    report = caption_fan_out(Dispatcher(transport), job, images, Collector())
    [answer] = answers
    assert answer.error is not None
    assert "'walk.mp4' is a video clip (4 frames) and this model takes no video" in answer.error
    assert "exclude_patterns" in answer.error
    assert report.captioned == 0
    assert report.chunk_images == 96  # unchosen, Transformers: the default
