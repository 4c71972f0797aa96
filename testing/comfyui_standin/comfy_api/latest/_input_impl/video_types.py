"""Stand-in for ``comfy_api.latest._input_impl.video_types``: file-backed VIDEO values.

Two surfaces, each as strict as the ComfyUI it models:

* ``VideoFromFile``: ComfyUI 0.33. ``start_time``/``duration`` (Video Slice),
  ``get_stream_source()`` returns the whole, untrimmed file,
  ``get_active_trim_window()``, ``get_components()`` decodes every frame of the
  window. No frame edits.
* ``VideoFromFileWithEdits``: the surface after 0.33 (Comfy-Org/ComfyUI
  ``comfy_api/latest/_input_impl/video_types.py`` @2802bf95 and @0c6cfff6,
  ``_input/video_types.py`` and ``_util/video_types.py`` @df636417).
  ``as_cropped(x, y, width, height)`` and ``as_resized(width, height,
  upscale_method, crop="disabled")`` return a new video holding the edit;
  ``has_pending_frame_edits()`` is True while ``get_stream_source()`` still
  returns the *unedited* file (base class docstring); ``get_components()``
  and ``get_dimensions()`` apply the edits; ``as_trimmed`` keeps them.
  Crop rectangles follow upstream's ``normalize_crop_rect`` (clamped, even
  aligned; a full-frame or empty rectangle is no edit). Scaling uses
  ``torch.nn.functional.interpolate`` where upstream calls
  ``comfy.utils.common_upscale`` (same geometry; pixel values may differ).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import av
import numpy as np
import torch


@dataclass
class VideoComponents:
    """``comfy_api.latest._util.VideoComponents`` (images [N,H,W,C] float32, frame_rate)."""

    images: torch.Tensor
    frame_rate: Fraction
    audio: Any = None
    metadata: Any = None
    alpha: Any = None


def normalize_crop_rect(
    x: int, y: int, width: int, height: int, source_width: int, source_height: int
) -> tuple[int, int, int, int] | None:
    """Upstream ``_util/video_types.py`` @df636417, rule for rule."""
    width, height = int(width), int(height)
    if width <= 0 or height <= 0:
        return None
    x = max(0, min(int(x), source_width - 1))
    y = max(0, min(int(y), source_height - 1))
    x -= x % 2
    y -= y % 2
    width = min(width, source_width - x)
    height = min(height, source_height - y)
    if x == 0 and y == 0 and width == source_width and height == source_height:
        return None
    width -= width % 2
    height -= height % 2
    if width <= 0 or height <= 0:
        return None
    return x, y, width, height


class VideoFromFile:
    """ComfyUI 0.33's ``VideoFromFile`` (trim only)."""

    def __init__(self, file: str | io.BytesIO, *, start_time: float = 0, duration: float = 0):
        self._file = file
        self._start_time = float(start_time)
        self._duration = float(duration)

    def get_stream_source(self) -> str | io.BytesIO:
        if isinstance(self._file, io.BytesIO):
            self._file.seek(0)
        return self._file

    def get_active_trim_window(self) -> tuple[float, float]:
        return self._start_time, self._duration

    def _decode(self) -> tuple[list[np.ndarray], Fraction]:
        """Every frame of the trim window as float32 RGB arrays (get_components_internal)."""
        start, duration = self.get_active_trim_window()
        frames = []
        with av.open(self.get_stream_source(), mode="r") as container:
            stream = container.streams.video[0]
            rate = Fraction(stream.average_rate) if stream.average_rate else Fraction(1)
            for frame in container.decode(stream):
                seconds = float(frame.pts * stream.time_base) if frame.pts is not None else 0.0
                if seconds < start - 1e-9:
                    continue
                if duration and seconds >= start + duration - 1e-9:
                    break
                frames.append(frame.to_ndarray(format="rgb24").astype(np.float32) / 255.0)
        return frames, rate

    def get_components(self) -> VideoComponents:
        frames, rate = self._decode()
        images = torch.from_numpy(np.stack(frames)) if frames else torch.zeros(0, 0, 0, 3)
        return VideoComponents(images=images, frame_rate=rate)

    def get_dimensions(self) -> tuple[int, int]:
        with av.open(self.get_stream_source(), mode="r") as container:
            stream = container.streams.video[0]
            return stream.width, stream.height

    def get_frame_count(self) -> int:
        return len(self._decode()[0])

    def as_trimmed(
        self, start_time: float = 0, duration: float = 0, strict_duration: bool = True
    ) -> VideoFromFile:
        return VideoFromFile(
            self._file, start_time=self._start_time + start_time, duration=duration
        )


class VideoFromFileWithEdits(VideoFromFile):
    """``VideoFromFile`` after 0.33: trim plus pending crop/resize edits."""

    def __init__(
        self,
        file: str | io.BytesIO,
        *,
        start_time: float = 0,
        duration: float = 0,
        ops: tuple[tuple[Any, ...], ...] = (),
    ):
        super().__init__(file, start_time=start_time, duration=duration)
        self._ops = tuple(ops)

    def has_pending_frame_edits(self) -> bool:
        """True while get_stream_source() still returns the unedited stream."""
        return bool(self._ops)

    def as_cropped(self, x: int = 0, y: int = 0, width: int = 0, height: int = 0) -> Any:
        if int(width) <= 0 or int(height) <= 0:
            return self
        return VideoFromFileWithEdits(
            self._file,
            start_time=self._start_time,
            duration=self._duration,
            ops=(*self._ops, ("crop_aligned", x, y, width, height)),
        )

    def as_resized(
        self, width: int, height: int, upscale_method: str, crop: str = "disabled"
    ) -> Any:
        return VideoFromFileWithEdits(
            self._file,
            start_time=self._start_time,
            duration=self._duration,
            ops=(*self._ops, ("scale", int(width), int(height), upscale_method, crop)),
        )

    def as_trimmed(
        self, start_time: float = 0, duration: float = 0, strict_duration: bool = True
    ) -> VideoFromFileWithEdits:
        return VideoFromFileWithEdits(
            self._file,
            start_time=self._start_time + start_time,
            duration=duration,
            ops=self._ops,
        )

    def _apply(self, images: torch.Tensor) -> torch.Tensor:
        work = images.movedim(-1, 1)  # N,C,H,W
        for op in self._ops:
            if op[0] == "scale":
                work = torch.nn.functional.interpolate(
                    work, size=(op[2], op[1]), mode="bilinear", align_corners=False
                )
            else:
                rect = normalize_crop_rect(*op[1:5], work.shape[-1], work.shape[-2])
                if rect is not None:
                    x, y, w, h = rect
                    work = work[..., y : y + h, x : x + w]
        return work.movedim(1, -1).contiguous()

    def get_components(self) -> VideoComponents:
        components = super().get_components()
        if components.images.shape[0]:
            components.images = self._apply(components.images)
        return components

    def get_dimensions(self) -> tuple[int, int]:
        width, height = super().get_dimensions()
        for op in self._ops:
            if op[0] == "scale":
                width, height = op[1], op[2]
            else:
                rect = normalize_crop_rect(*op[1:5], width, height)
                if rect is not None:
                    width, height = rect[2], rect[3]
        return width, height
