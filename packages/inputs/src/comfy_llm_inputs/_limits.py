"""Bounds on what one request may carry, and the progress callback type."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from .errors import InputError

MIB = 1024 * 1024

ProgressCallback = Callable[[str, int, int], None]
"""``progress(message, done, total)``: called as preparation advances.

``message`` names the step (``"Sampling video frames"``, ``"Reading files"``,
``"Extracting PDF text from report.pdf"``), ``done`` and ``total`` count its
units (images, frames, files or pages). The callable may raise to cancel the
preparation (the exception propagates; open videos and files are closed).
The ComfyUI node adapts this to ``comfy_llm_core.ProgressEvent`` with
stage ``PREPARE_INPUTS``; this package does not depend on that one.
"""


@dataclasses.dataclass(frozen=True, slots=True)
class InputLimits:
    """Bounds on one request's inputs; the node builds it from the profile.

    Attributes:
        max_images: Most images in the IMAGE batch.
        max_video_frames: Most frames sampled from the VIDEO input.
        max_file_bytes: Most bytes in one file (decoded, before extraction).
        max_total_file_bytes: Most bytes across all files of the request.
        max_file_characters: Most characters extracted from one file.
        max_total_characters: Most characters extracted from all files.
        max_pdf_pages: Most pages in one PDF.
        max_image_pixels: Most pixels (width x height) in one image file;
            checked from its header, before anything is decoded.
        max_image_side: Image files are downscaled (aspect kept) to at most
            this many pixels wide and high as they are decoded.
        allow_mixed_image_video: Whether one request may carry both IMAGE
            and VIDEO inputs (some models take only one kind per prompt).
    """

    max_images: int = 8
    max_video_frames: int = 32
    max_file_bytes: int = 8 * MIB
    max_total_file_bytes: int = 32 * MIB
    max_file_characters: int = 200_000
    max_total_characters: int = 400_000
    max_pdf_pages: int = 200
    max_image_pixels: int = 150_000_000
    max_image_side: int = 4096
    allow_mixed_image_video: bool = True

    def __post_init__(self) -> None:
        """Check that every bound is a non-negative integer.

        Raises:
            InputError: A bound is negative or not an integer.
        """
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "allow_mixed_image_video":
                if not isinstance(value, bool):
                    raise InputError(
                        f"InputLimits.{field.name} must be True or False, not {value!r}"
                    )
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InputError(
                    f"InputLimits.{field.name} must be an integer >= 0, not {value!r}; "
                    "fix the profile's limits"
                )


def report(progress: ProgressCallback | None, message: str, done: int, total: int) -> None:
    """Call ``progress`` when one was given.

    Args:
        progress: The caller's callback, or ``None``.
        message: What is being done.
        done: Units finished.
        total: Units in all.
    """
    if progress is not None:
        progress(message, done, total)
