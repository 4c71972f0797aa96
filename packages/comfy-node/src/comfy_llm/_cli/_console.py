"""Progress on stderr for the CLI.

On a terminal the current stage redraws in place as a bar; otherwise (CI,
pipes) it prints a throttled line per stage change or every few seconds.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from comfy_llm_core import ProgressEvent

__all__ = ["ConsoleProgress", "format_bytes"]

_BAR_WIDTH = 28


def format_bytes(value: float) -> str:
    """Human-readable byte count (binary units)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # pragma: no cover - loop always returns


class ConsoleProgress:
    """A ProgressCallback that draws progress events on a text stream."""

    def __init__(self, stream: TextIO | None = None, *, min_interval: float = 0.1) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._min_interval = min_interval if self._tty else 2.0
        self._last_draw = 0.0
        self._last_stage: str | None = None
        self._open_line = False

    def __call__(self, event: ProgressEvent) -> None:
        """Draw one event (throttled, stage changes always drawn)."""
        now = time.monotonic()
        stage_changed = event.stage.value != self._last_stage
        finished = event.maximum is not None and event.value == event.maximum
        if not (stage_changed or finished) and now - self._last_draw < self._min_interval:
            return
        self._last_draw = now
        self._last_stage = event.stage.value
        line = self._render(event)
        if self._tty:
            end = "\n" if finished else ""
            self._stream.write("\r\x1b[2K" + line + end)
            self._open_line = not finished
        else:
            self._stream.write(line + "\n")
        self._stream.flush()

    def close(self) -> None:
        """End an open in-place line so later output starts cleanly."""
        if self._open_line:
            self._stream.write("\n")
            self._stream.flush()
            self._open_line = False

    @staticmethod
    def _render(event: ProgressEvent) -> str:
        label = f"[{event.stage.value}] {event.message}".rstrip()
        fraction = event.fraction
        if fraction is None:
            return label
        filled = round(fraction * _BAR_WIDTH)
        bar = "#" * filled + "-" * (_BAR_WIDTH - filled)
        if event.unit == "bytes":
            amount = f"{format_bytes(event.value or 0)} / {format_bytes(event.maximum or 0)}"
        else:
            amount = f"{event.value:.0f} / {event.maximum:.0f} {event.unit}".rstrip()
        return f"{label} [{bar}] {fraction * 100:5.1f}% {amount}"
