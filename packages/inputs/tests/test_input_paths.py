"""Input paths that are not regular files, and image files too large to decode naively."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import ImageLimits, MediaLimits
from comfy_llm_inputs import (
    FileInputError,
    ImageInputError,
    InputError,
    VideoInputError,
    prepare_inputs,
    read_input_files,
    sample_video_frames,
)
from comfy_llm_testworld.media import png_stub, write_large_png
from PIL import Image

READERS: dict[str, tuple[Callable[[str], Any], type[InputError], str]] = {
    "image": (lambda path: prepare_inputs("hi", images=[path]), ImageInputError, "Image"),
    "file": (lambda path: read_input_files([path]), FileInputError, "File"),
    "video": (lambda path: sample_video_frames(path, 2), VideoInputError, "Video"),
}


def _finishes(call: Callable[[], Any], fifo: Path, seconds: float = 30.0) -> BaseException:
    """Run ``call`` in a thread; fail (and unblock it) if it waits on the FIFO."""
    outcome: list[BaseException] = []

    def target() -> None:
        try:
            call()
        except BaseException as error:
            outcome.append(error)

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        with fifo.open("wb"):  # a writer releases the blocked reader, then EOF
            pass
        worker.join(seconds)
        pytest.fail(f"reading the FIFO {fifo.name} blocked for {seconds:.0f} s")
    assert outcome, "a FIFO was accepted as an input"
    return outcome[0]


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_fifo_is_refused_at_once_and_named(reader: str, tmp_path: Path) -> None:
    read, error_class, label = READERS[reader]
    fifo = tmp_path / "input.png"
    os.mkfifo(fifo)
    error = _finishes(lambda: read(str(fifo)), fifo)
    assert isinstance(error, error_class), error
    assert f"{label} 'input.png' is a named pipe (FIFO)" in str(error)
    assert "not found" not in str(error)


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_directory_and_a_device_say_what_they_are(reader: str, tmp_path: Path) -> None:
    read, error_class, label = READERS[reader]
    folder = tmp_path / "photos"
    folder.mkdir()
    with pytest.raises(error_class, match=rf"{label} 'photos' is a directory, not a file"):
        read(str(folder))
    with pytest.raises(error_class, match=rf"{label} 'null' is a character device"):
        read(os.devnull)
    with pytest.raises(error_class, match=rf"{label} 'gone' was not found"):
        read(str(tmp_path / "gone"))


def test_a_decompression_bomb_gets_our_message_naming_the_input(tmp_path: Path) -> None:
    bomb = tmp_path / "huge.png"
    bomb.write_bytes(png_stub(100_000, 100_000))
    with pytest.raises(ImageInputError) as caught:
        prepare_inputs("hi", images=[str(bomb)])
    message = str(caught.value)
    assert "Image 'huge.png'" in message and "10,000,000,000 pixels" in message
    assert f"{ImageLimits().max_image_pixels:,} pixels" in message
    assert "decompression bomb" not in message.lower()
    assert caught.value.value == 10_000_000_000
    assert caught.value.limit == ImageLimits().max_image_pixels


def test_over_the_pixel_limit_is_refused_from_the_header_with_the_numbers(
    tmp_path: Path,
) -> None:
    from comfy_llm_inputs import image_from_file

    path = tmp_path / "wide.png"
    Image.new("RGB", (40, 30)).save(path)
    with pytest.raises(ImageInputError, match=r"'wide.png' is 40x30 \(1,200 pixels\).*1,000"):
        image_from_file(path, limits=ImageLimits(max_image_pixels=1000))
    # Pillow's own warning band (above its MAX_IMAGE_PIXELS) is ours to report too.
    assert image_from_file(path, limits=ImageLimits(max_image_pixels=1200)).size == (40, 30)


def test_image_files_are_downscaled_and_alpha_goes_onto_white(tmp_path: Path) -> None:
    from comfy_llm_inputs import image_from_file

    path = tmp_path / "clear.png"
    Image.new("RGBA", (300, 150), (10, 20, 30, 0)).save(path)
    image = image_from_file(path, limits=ImageLimits(max_image_side=100))
    assert image.mode == "RGB" and image.size == (100, 50)
    assert image.getpixel((50, 25)) == (255, 255, 255)
    palette = tmp_path / "palette.gif"
    Image.new("P", (64, 64), 3).save(palette)
    assert image_from_file(palette).mode == "RGB"


def test_too_many_image_files_are_refused_before_decoding(tmp_path: Path) -> None:
    with pytest.raises(ImageInputError, match="at most 2"):
        prepare_inputs(
            "hi",
            images=[str(tmp_path / "never-read.png")] * 3,
            limits=MediaLimits(image=ImageLimits(max_images=2)),
        )


_PEAK_RSS = """
import json, resource, sys
from comfy_llm_inputs import prepare_inputs
images = prepare_inputs("describe", images=[sys.argv[1]]).images_in_order()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
peak_mib = peak / 1024**2 if sys.platform == "darwin" else peak / 1024
print(json.dumps({"size": list(images[0].size), "peak_mib": peak_mib}))
"""
PEAK_RSS_BOUND_MIB = 1536  # generous: ~850 MiB measured; ~6500 MiB before (bench_images.py)


@pytest.mark.slow
def test_a_12000_square_png_decodes_within_a_bounded_peak(tmp_path: Path) -> None:
    path = write_large_png(tmp_path / "huge.png", 12000, 12000)
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    report = json.loads(done.stdout)
    assert report["size"] == [4096, 4096]
    assert report["peak_mib"] < PEAK_RSS_BOUND_MIB, report
