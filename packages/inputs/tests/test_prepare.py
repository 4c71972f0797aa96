"""prepare_inputs end to end, PreparedInputs and its wire form, limits."""

from __future__ import annotations

import base64
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from comfy_llm_core import FileLimits, ImageLimits, MediaLimits, Modality, VideoLimits
from comfy_llm_inputs import (
    FileInputError,
    ImageInputError,
    ImagePart,
    InputError,
    PreparedInputs,
    TextPart,
    VideoFramePart,
    VideoInputError,
    chat_messages,
    prepare_inputs,
)
from PIL import Image


def text_file(name: str, text: str) -> dict[str, str]:
    return {
        "filename": name,
        "file_data": "data:text/plain;base64," + base64.b64encode(text.encode()).decode(),
    }


def test_prompt_only() -> None:
    prepared = prepare_inputs("Hello", system_prompt="  ")
    assert prepared.prompt == "Hello"
    assert prepared.system_prompt is None
    assert prepared.parts == (TextPart("Hello"),)
    assert prepared.counts() == {"image_count": 0, "video_frame_count": 0, "file_count": 0}
    assert prepared.modalities == {Modality.TEXT}


def test_everything_together(make_video) -> None:
    torch = pytest.importorskip("torch")
    events: list[tuple[str, int, int]] = []
    prepared = prepare_inputs(
        "What happens?",
        system_prompt="Be brief.",
        images=torch.rand(2, 8, 8, 3),
        video=make_video(frames=30),
        video_frames=3,
        files=[text_file("notes.txt", "the notes")],
        progress=lambda *event: events.append(event),
    )
    assert prepared.counts() == {"image_count": 2, "video_frame_count": 3, "file_count": 1}
    assert prepared.system_prompt == "Be brief."
    assert prepared.file_names == ("notes.txt",)
    # the media in the order the model sees them, the prompt last
    assert [type(part) for part in prepared.parts] == [ImagePart] * 2 + [VideoFramePart] * 3 + [
        TextPart
    ]
    frames = [part for part in prepared.parts if isinstance(part, VideoFramePart)]
    assert [f.timestamp_seconds for f in frames] == [0.0, 0.5, pytest.approx(29 / 30)]
    assert prepared.modalities == set(Modality)
    assert len(prepared.images_in_order()) == 5
    lines = prepared.prompt.split("\n")
    assert lines[0] == "What happens?"
    assert lines[2].startswith("Video: 3 frames, in order, at 0.00s, 0.50s, 0.97s")
    assert 'name="notes.txt"' in prepared.prompt and "\nthe notes\n" in prepared.prompt
    assert {message for message, _, _ in events} == {
        "Preparing images",
        "Reading files",
        "Sampling video frames",
    }


@pytest.mark.parametrize("files", [None, []])
def test_empty_request_is_refused(files) -> None:
    with pytest.raises(InputError, match=r"request is empty"):
        prepare_inputs(" \n", files=files)


def test_media_without_prompt_is_fine() -> None:
    prepared = prepare_inputs("", images=np.zeros((1, 2, 2, 3), np.float32))
    assert prepared.prompt == "" and prepared.counts()["image_count"] == 1


def test_mixed_image_and_video_only_where_allowed(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"images or a video in one request, not both"):
        prepare_inputs(
            "q",
            images=np.zeros((1, 2, 2, 3), np.float32),
            video=tmp_path / "never-opened.mp4",
            limits=MediaLimits(video=VideoLimits(allow_mixed_image_video=False)),
        )


def test_cheap_checks_come_first(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.mp4"
    corrupt.write_bytes(b"not a video")
    with pytest.raises(VideoInputError, match=r"video_frames=99"):
        prepare_inputs("q", images=np.full((1, 1, 1, 3), np.nan), video=corrupt, video_frames=99)
    with pytest.raises(ImageInputError):
        prepare_inputs("q", images=np.full((1, 1, 1, 3), np.nan), video=corrupt)
    with pytest.raises(FileInputError, match=r"'x.png'"):
        prepare_inputs(
            "q",
            video=corrupt,
            files=[{"filename": "x.png", "file_data": "data:image/png;base64,AAAA"}],
        )


def test_prompt_must_be_text() -> None:
    with pytest.raises(InputError, match=r"prompt must be text"):
        prepare_inputs(None)  # type: ignore[arg-type]


def test_wire_round_trip(make_video) -> None:
    prepared = prepare_inputs(
        "q",
        system_prompt="s",
        images=np.random.default_rng(0).random((2, 5, 7, 3), dtype=np.float32),
        video=make_video(frames=10),
        video_frames=2,
        files=[text_file("a.txt", "A")],
    )
    wire = prepared.to_wire()
    restored = PreparedInputs.from_wire(pickle.loads(pickle.dumps(wire)))
    assert restored.prompt == prepared.prompt and restored.system_prompt == "s"
    assert restored.file_names == ("a.txt",)
    assert [type(p) for p in restored.parts] == [type(p) for p in prepared.parts]
    for before, after in zip(prepared.parts, restored.parts, strict=True):
        if isinstance(before, TextPart):
            assert after == before
            continue
        assert np.array_equal(np.asarray(before.image), np.asarray(after.image))  # type: ignore[attr-defined]
        if isinstance(before, VideoFramePart):
            assert (after.index, after.timestamp_seconds) == (
                before.index,
                before.timestamp_seconds,
            )  # type: ignore[attr-defined]
    assert wire["version"] == 2 and wire["parts"][0]["kind"] == "image"
    assert (
        isinstance(wire["parts"][0]["image"], bytes) and wire["parts"][0]["image"][:4] == b"\x89PNG"
    )


@pytest.mark.parametrize(
    ("wire", "pattern"),
    [
        ({"version": 99}, "wire version 99"),
        ({"version": 2, "parts": [{"kind": "audio"}], "file_names": []}, "kind 'audio' is unknown"),
        (
            {"version": 2, "parts": [{"kind": "image", "image": b"GIF89a"}], "file_names": []},
            "not a PNG",
        ),
        ({"version": 2, "parts": [{"kind": "video_frame"}], "file_names": []}, "malformed"),
        ({"version": 1, "prompt": "q"}, "malformed"),
        (
            {
                "version": 1,
                "prompt": "q",
                "images": [b"GIF89a"],
                "video_frames": [],
                "file_names": [],
            },
            "not a PNG",
        ),
        (
            {"version": 1, "prompt": "q", "images": ["text"], "video_frames": [], "file_names": []},
            "not bytes",
        ),
    ],
)
def test_bad_wire_data(wire: dict, pattern: str) -> None:
    with pytest.raises(InputError, match=pattern):
        PreparedInputs.from_wire(wire)


def test_prepared_inputs_normalises_its_fields() -> None:
    rgba = Image.new("RGBA", (2, 2))
    frame = VideoFramePart(image=Image.new("RGB", (2, 2)), timestamp_seconds=0.0, index=0)
    prepared = PreparedInputs([ImagePart(rgba), frame, TextPart("p")], file_names=["a"])  # type: ignore[arg-type]
    assert prepared.images_in_order()[0].mode == "RGB"
    assert isinstance(prepared.parts, tuple) and prepared.file_names == ("a",)
    with pytest.raises(InputError):
        ImagePart("not an image")  # type: ignore[arg-type]
    with pytest.raises(InputError):
        PreparedInputs(("not a part",))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("record", "options"),
    [
        (ImageLimits, {"max_images": -1}),
        (FileLimits, {"max_pdf_pages": 1.5}),
        (FileLimits, {"max_file_bytes": True}),
        (VideoLimits, {"allow_mixed_image_video": 1}),
    ],
)
def test_limits_are_validated(record: type, options: dict) -> None:
    with pytest.raises(ValueError, match=rf"{record.__name__}\.{next(iter(options))}"):
        record(**options)


def test_limit_defaults_keyed_by_modality() -> None:
    limits = MediaLimits()
    assert limits[Modality.IMAGE] is limits.image and limits[Modality.FILE] is limits.file
    assert (limits.image.max_images, limits.video.max_video_frames) == (8, 32)
    assert limits.file.max_pdf_pages == 200
    assert (limits.file.max_file_bytes, limits.file.max_total_file_bytes) == (8 << 20, 32 << 20)
    assert limits.video.allow_mixed_image_video is True
    with pytest.raises(KeyError):
        limits[Modality.TEXT]


def test_chat_messages_are_the_one_conversation() -> None:
    frame = VideoFramePart(image=Image.new("RGB", (2, 2)), timestamp_seconds=1.5, index=0)
    prepared = PreparedInputs.text(
        "What is this?", ImagePart(Image.new("RGB", (2, 2))), frame, system_prompt="Be brief."
    )
    assert chat_messages(prepared) == [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {
            "role": "user",
            "content": [
                {"type": "image"},
                {"type": "image"},
                {"type": "text", "text": "What is this?"},
            ],
        },
    ]
    assert chat_messages(prepared, plain_text=True) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is this?"},
    ]
    blank = PreparedInputs.text("hi", system_prompt="  ")
    assert chat_messages(blank) == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def test_with_text_appends_to_the_prompt_part_only() -> None:
    prepared = PreparedInputs.text("Answer.", ImagePart(Image.new("RGB", (2, 2))))
    again = prepared.with_text(" As JSON.")
    assert again.prompt == "Answer. As JSON." and again.media == prepared.media
    assert prepared.prompt == "Answer."


def test_package_never_imports_torch(tmp_path: Path, video_writer, pdf_bytes) -> None:
    video = video_writer(tmp_path / "v.mp4", frames=5)
    pdf = tmp_path / "d.pdf"
    pdf.write_bytes(pdf_bytes(["text"]))
    code = (
        "import sys, numpy as np\n"
        "from comfy_llm_inputs import prepare_inputs\n"
        f"p = prepare_inputs('q', images=np.zeros((1, 2, 2, 3)), video={str(video)!r}, "
        f"video_frames=2, files=[{str(pdf)!r}])\n"
        "p.to_wire()\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_model_without_video_says_so_and_never_asks_for_zero_frames() -> None:
    limits = MediaLimits(video=VideoLimits(max_video_frames=0))
    with pytest.raises(VideoInputError) as caught:
        prepare_inputs("q", video="clip.mp4", video_frames=1, limits=limits)
    message = str(caught.value)
    assert "takes no video" in message and "disconnect the VIDEO input" in message
    assert "video_frames to 0" not in message and "qwen2.5-vl-3b-instruct" in message
