"""Typed progress events shared by every package.

Every slow step (inspection, download, input preparation, admission,
loading, generation) reports through a callable taking one
:class:`ProgressEvent`. The ComfyUI node maps events onto ComfyUI's progress
bar and interrupt check; the Modal dispatcher ships them over the wire
unchanged, so the event is a plain frozen dataclass of JSON-friendly fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from enum import StrEnum
from typing import Any


class ProgressStage(StrEnum):
    """The stages of one request, in the order they normally happen."""

    INSPECT = "inspect"
    DOWNLOAD = "download"
    PREPARE_INPUTS = "prepare_inputs"
    ADMISSION = "admission"
    LOAD = "load"
    ENGINE = "engine"
    """An engine is rebuilt in another mode (vLLM's promotion to throughput)."""
    GENERATE = "generate"
    DONE = "done"


@dataclasses.dataclass(frozen=True, slots=True)
class ProgressEvent:
    """One progress report.

    Attributes:
        stage: Which part of the request is running.
        message: Short human text, e.g. ``"Downloading model.safetensors"``.
        value: Work done so far in ``unit``; ``None`` when unknown.
        maximum: Total work in ``unit``; ``None`` when unknown.
        unit: ``"bytes"``, ``"files"``, ``"tokens"``, ``"frames"`` or ``""``.
        indeterminate: True when no real completion fraction exists.
        elapsed_seconds: Seconds since the stage started.
        time_to_first_token_seconds: Set during generation once known.
        tokens_per_second: Set during generation once known.
        text: Text generated so far (generation only), for live previews.
        token_id: The token just generated (generation only).
        prompt_opened_reasoning: The backend's report that the rendered prompt
            opened a ``<think>`` block, so generation starts inside the
            reasoning (generation only; the same value the final reasoning
            parse gets); ``None`` when the backend did not report it.
    """

    stage: ProgressStage
    message: str = ""
    value: float | None = None
    maximum: float | None = None
    unit: str = ""
    indeterminate: bool = False
    elapsed_seconds: float | None = None
    time_to_first_token_seconds: float | None = None
    tokens_per_second: float | None = None
    text: str | None = None
    token_id: int | None = None
    prompt_opened_reasoning: bool | None = None

    @property
    def fraction(self) -> float | None:
        """Completion in 0..1, or None when the stage has no real fraction."""
        if self.indeterminate or self.value is None or not self.maximum:
            return None
        return max(0.0, min(1.0, self.value / self.maximum))

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (stage as its string value)."""
        data = dataclasses.asdict(self)
        data["stage"] = self.stage.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProgressEvent:
        """Rebuild an event from :meth:`to_dict` output."""
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields}
        values["stage"] = ProgressStage(values["stage"])
        return cls(**values)


ProgressCallback = Callable[[ProgressEvent], None]
"""What every package accepts for progress: called synchronously, may raise
to cancel (the node's interrupt check raises ComfyUI's exception)."""


def ignore_progress(event: ProgressEvent) -> None:
    """A no-op progress callback, the default everywhere."""
    del event
