"""The progress callback preparation reports through (the bounds are core's ``MediaLimits``)."""

from __future__ import annotations

from collections.abc import Callable

ProgressCallback = Callable[[str, int, int], None]
"""``progress(message, done, total)``: called as preparation advances.

``message`` names the step (``"Sampling video frames"``, ``"Reading files"``,
``"Extracting PDF text from report.pdf"``), ``done`` and ``total`` count its
units (images, frames, files or pages). The callable may raise to cancel the
preparation (the exception propagates; open videos and files are closed).
The ComfyUI node adapts this to ``comfy_llm_core.ProgressEvent`` with
stage ``PREPARE_INPUTS``.
"""


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
