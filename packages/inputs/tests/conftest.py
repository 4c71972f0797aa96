"""Small videos (PyAV) and PDFs (hand-written) generated at test time."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
from comfy_llm_testworld.media import build_text_pdf as build_pdf
from pypdf import PdfReader, PdfWriter

WIDTH, HEIGHT = 64, 48


def frame_pixels(index: int, width: int = WIDTH, height: int = HEIGHT) -> np.ndarray:
    """A frame whose red level encodes ``index`` and with a white top-left mark."""
    pixels = np.zeros((height, width, 3), np.uint8)
    pixels[..., 0] = (index * 8) % 256
    pixels[:8, :8] = 255
    return pixels


class _WriteOnly:
    """A non-seekable sink: muxers cannot go back to write durations or cues."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, chunk: bytes) -> int:
        self.data += chunk
        return len(chunk)


def write_video(
    path: Path,
    *,
    frames: int = 30,
    rate: int = 30,
    codec: str = "libx264",
    container_format: str | None = None,
    pts_ms: Sequence[int] | None = None,
    rotation: int | None = None,
    gop: int | None = None,
    non_seekable: bool = False,
    width: int = WIDTH,
    height: int = HEIGHT,
    pix_fmt: str = "yuv420p",
) -> Path:
    """Encode a small test clip; ``pts_ms`` gives a variable frame rate."""
    sink = _WriteOnly() if non_seekable else None
    with av.open(sink if sink is not None else str(path), "w", format=container_format) as out:
        stream = out.add_stream(codec, rate=rate)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        if gop is not None:
            stream.codec_context.gop_size = gop
            if codec == "libx264":
                stream.options = {"x264-params": f"keyint={gop}:scenecut=0"}
        if pts_ms is not None:
            stream.codec_context.time_base = Fraction(1, 1000)
            stream.time_base = Fraction(1, 1000)
        if rotation is not None:
            stream.set_display_rotation(rotation)
        for index in range(frames):
            frame = av.VideoFrame.from_ndarray(frame_pixels(index, width, height), format="rgb24")
            if pts_ms is not None:
                frame.pts = pts_ms[index]
                frame.time_base = Fraction(1, 1000)
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    if sink is not None:
        path.write_bytes(bytes(sink.data))
    return path


def decoded_pts_seconds(path: Path) -> list[float]:
    """Every frame's presentation time, from a full decode (the test oracle)."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        start = stream.start_time or 0
        return sorted(
            float((frame.pts - start) * stream.time_base)
            for frame in container.decode(stream)
            if frame.pts is not None
        )


def encrypt_pdf(data: bytes, password: str = "secret") -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password=password, owner_password=password, algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@pytest.fixture
def make_video(tmp_path: Path) -> Callable[..., Path]:
    counter = iter(range(1_000_000))

    def make(suffix: str = ".mp4", **options: object) -> Path:
        return write_video(tmp_path / f"clip{next(counter)}{suffix}", **options)  # type: ignore[arg-type]

    return make


@pytest.fixture(scope="session")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Clips shared by property tests (built once per session)."""
    root = tmp_path_factory.mktemp("clips")
    vfr = [0, 10, 20, 500, 520, 1500, 1510, 1520, 3000, 3010, *[3100 + 33 * i for i in range(10)]]
    return {
        "h264": write_video(root / "h264.mp4", frames=30),
        "mpeg4": write_video(root / "mpeg4.mp4", frames=25, rate=25, codec="mpeg4"),
        "vfr": write_video(root / "vfr.mp4", frames=len(vfr), pts_ms=vfr),
        "gop8": write_video(root / "gop8.mp4", frames=40, gop=8),
        "mpegts": write_video(root / "ts.ts", frames=30, container_format="mpegts"),
        "nodur": write_video(
            root / "pipe.mkv", frames=30, container_format="matroska", non_seekable=True
        ),
    }


@pytest.fixture
def video_writer() -> Callable[..., Path]:
    """``write_video(path, **options)``, for tests that pick their own path."""
    return write_video


@pytest.fixture
def oracle_seconds() -> Callable[[Path], list[float]]:
    """Every frame's time from a full decode: what sampling is checked against."""
    return decoded_pts_seconds


@pytest.fixture
def pdf_bytes() -> Callable[[Sequence[str | None]], bytes]:
    return build_pdf


@pytest.fixture
def encrypted_pdf_bytes() -> bytes:
    return encrypt_pdf(build_pdf(["Top secret page"]))
