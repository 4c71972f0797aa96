"""Small media files for tests, made on the spot with PyAV."""

from __future__ import annotations

from pathlib import Path

__all__ = ["write_test_video"]

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
