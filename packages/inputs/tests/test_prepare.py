"""prepare_inputs end to end, PreparedInputs and its wire form, limits."""

from __future__ import annotations

import base64
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from comfy_llm_inputs import (
    FileInputError,
    ImageInputError,
    InputError,
    InputLimits,
    PreparedInputs,
    VideoFrame,
    VideoInputError,
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
    assert (prepared.image_count, prepared.video_frame_count, prepared.file_count) == (0, 0, 0)


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
    assert (prepared.image_count, prepared.video_frame_count, prepared.file_count) == (2, 3, 1)
    assert prepared.system_prompt == "Be brief."
    assert prepared.file_names == ("notes.txt",)
    assert prepared.video_timestamps == (0.0, 0.5, pytest.approx(29 / 30))
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
    assert prepared.prompt == "" and prepared.image_count == 1


def test_mixed_image_and_video_only_where_allowed(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"images or a video in one request, not both"):
        prepare_inputs(
            "q",
            images=np.zeros((1, 2, 2, 3), np.float32),
            video=tmp_path / "never-opened.mp4",
            limits=InputLimits(allow_mixed_image_video=False),
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
    assert restored.video_timestamps == prepared.video_timestamps
    for before, after in zip(prepared.images, restored.images, strict=True):
        assert np.array_equal(np.asarray(before), np.asarray(after))
    for before, after in zip(prepared.video_frames, restored.video_frames, strict=True):
        assert np.array_equal(np.asarray(before.image), np.asarray(after.image))
        assert after.index == before.index
    assert isinstance(wire["images"][0], bytes) and wire["images"][0][:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("wire", "pattern"),
    [
        ({"version": 99}, "wire version 99"),
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
    frame = VideoFrame(image=Image.new("RGB", (2, 2)), timestamp_seconds=0.0, index=0)
    prepared = PreparedInputs(prompt="p", images=[rgba], video_frames=[frame], file_names=["a"])
    assert prepared.images[0].mode == "RGB"
    assert isinstance(prepared.video_frames, tuple) and prepared.file_names == ("a",)
    with pytest.raises(InputError):
        PreparedInputs(prompt="p", images=["not an image"])  # type: ignore[list-item]


@pytest.mark.parametrize(
    "options",
    [
        {"max_images": -1},
        {"max_pdf_pages": 1.5},
        {"max_file_bytes": True},
        {"allow_mixed_image_video": 1},
    ],
)
def test_limits_are_validated(options: dict) -> None:
    with pytest.raises(InputError, match=r"InputLimits"):
        InputLimits(**options)


def test_limit_defaults() -> None:
    limits = InputLimits()
    assert (limits.max_images, limits.max_video_frames, limits.max_pdf_pages) == (8, 32, 200)
    assert (limits.max_file_bytes, limits.max_total_file_bytes) == (8 << 20, 32 << 20)
    assert limits.allow_mixed_image_video is True


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
    limits = InputLimits(max_video_frames=0)
    with pytest.raises(VideoInputError) as caught:
        prepare_inputs("q", video="clip.mp4", video_frames=1, limits=limits)
    message = str(caught.value)
    assert "takes no video" in message and "disconnect the VIDEO input" in message
    assert "video_frames to 0" not in message and "qwen2.5-vl-3b-instruct" in message
