"""A video clip on the caption chunk wire: its sampled frames as typed ``video_frame`` parts."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from comfy_llm_modal_remote import ChunkFrame, ChunkImage, encode_video_file
from comfy_llm_modal_remote._chunk_wire import CHUNK_WIRE_VERSION, ChunkRequest
from comfy_llm_modal_remote.errors import RemoteExecutionError
from comfy_llm_testworld.media import write_test_video


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
