"""Small media files for tests, made on the spot with PyAV."""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

__all__ = ["build_text_pdf", "png_header", "png_stub", "write_large_png", "write_test_video"]

import numpy as np


def write_test_video(path: Path, *, frames: int = 20, fps: int = 10, size: int = 32) -> Path:
    """Write an MPEG-4 clip of a square moving across a grey field."""
    import av

    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("mpeg4", rate=fps)
        stream.width = size
        stream.height = size
        stream.pix_fmt = "yuv420p"
        for index in range(frames):
            pixels = np.full((size, size, 3), 96, dtype=np.uint8)
            x = (index * 3) % (size - 8)
            pixels[8:16, x : x + 8] = (255, 0, 0)
            frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def _pdf_string(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def build_text_pdf(pages: Sequence[str | None]) -> bytes:
    """A minimal valid PDF; each page shows its text (``None``: a blank page)."""
    objects: list[bytes] = []
    page_ids = [4 + 2 * number for number in range(len(pages))]
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    kids = " ".join(f"{page_id} 0 R" for page_id in page_ids)
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for number, text in enumerate(pages):
        content_id = page_ids[number] + 1
        objects.append(
            (
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                f"/Resources << /Font << /F1 3 0 R >> >> /Contents {content_id} 0 R >>"
            ).encode()
        )
        lines = [] if text is None else text.split("\n")
        body = "".join(
            f"BT /F1 12 Tf 72 {720 - 14 * row} Td ({_pdf_string(line)}) Tj ET\n"
            for row, line in enumerate(lines)
        ).encode("latin-1")
        objects.append(b"<< /Length %d >>\nstream\n" % len(body) + body + b"endstream")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))


def png_header(width: int, height: int) -> bytes:
    """The signature and IHDR of an 8-bit RGB PNG of this size (no pixel data).

    Enough for an image library to read the size: a "decompression bomb" probe.
    """
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr)


def png_stub(width: int, height: int) -> bytes:
    """A PNG that claims ``width`` x ``height`` but carries one row of pixels.

    Image libraries open it (the size comes from the header): the shape of
    a "decompression bomb", without gigabytes of test data.
    """
    row = zlib.compress(b"\x00" + bytes(3 * min(width, 64)))
    return png_header(width, height) + _png_chunk(b"IDAT", row) + _png_chunk(b"IEND", b"")


def write_large_png(path: Path, width: int, height: int) -> Path:
    """Write a real, complete 8-bit RGB PNG row by row (memory: one row).

    Rows are a horizontal gradient with a few coloured bands, so decoders do
    real work; the file stays small because rows repeat.
    """
    row = bytearray(width * 3)
    for x in range(width):
        row[3 * x] = x * 255 // max(1, width - 1)
        row[3 * x + 1] = 128
    compressor = zlib.compressobj(1)
    with path.open("wb") as handle:
        handle.write(png_header(width, height))
        for y in range(height):
            row[2::3] = bytes([(y * 8 // max(1, height)) * 32]) * width
            data = compressor.compress(b"\x00" + bytes(row))
            if data:
                handle.write(_png_chunk(b"IDAT", data))
        handle.write(_png_chunk(b"IDAT", compressor.flush()))
        handle.write(_png_chunk(b"IEND", b""))
    return path
