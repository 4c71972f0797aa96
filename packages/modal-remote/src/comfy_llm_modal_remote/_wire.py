"""The wire between dispatcher and workers: plain data, versioned, checked once.

Requests and results are dicts of str/int/float/bool/None/bytes/lists built
from the shared dataclasses' own ``to_dict``/``to_wire`` forms. A worker
never lets an ordinary exception escape: it returns an error envelope
holding the pickled error (every comfy-llm error pickles with its class,
message and attributes) plus its class name and message, so the dispatcher
re-raises the original class, or a :class:`RemoteExecutionError` naming it
when that class does not exist locally. Cancellation (a ``BaseException``)
is not wrapped.
"""

from __future__ import annotations

import dataclasses
import pickle
import time
from collections.abc import Callable, Mapping
from typing import Any

from comfy_llm_profiles import ProgressEvent, ProgressStage
from comfy_llm_residency import GenerationSettings, InferenceResult

from ._container import ProgressChannel
from .errors import RemoteExecutionError

__all__ = [
    "WIRE_VERSION",
    "EngineRequest",
    "EventSender",
    "StageRequest",
    "StageResult",
    "error_envelope",
    "ok_envelope",
    "result_from_wire",
    "unwrap",
]

WIRE_VERSION = 1


def _check_version(data: Mapping[str, Any], what: str) -> None:
    if not isinstance(data, Mapping) or data.get("version") != WIRE_VERSION:
        found = data.get("version") if isinstance(data, Mapping) else type(data).__name__
        raise RemoteExecutionError(
            "WireVersionError",
            f"{what} wire version {found!r} is not {WIRE_VERSION}: the deployed Modal app runs "
            "another comfy-llm version; it is redeployed when the node's version changes",
        )


@dataclasses.dataclass(frozen=True, slots=True)
class StageRequest:
    """Ask the ModelStager to resolve ``reference`` for ``modal`` and stage it."""

    request_id: str
    reference: str

    def to_wire(self) -> dict[str, Any]:
        """Plain data."""
        return {"version": WIRE_VERSION, **dataclasses.asdict(self)}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> StageRequest:
        """Rebuild from :meth:`to_wire` output."""
        _check_version(data, "Stage request")
        return cls(request_id=str(data["request_id"]), reference=str(data["reference"]))


@dataclasses.dataclass(frozen=True, slots=True)
class StageResult:
    """What the stager did.

    Attributes:
        profile: The resolved profile's ``to_dict()``.
        snapshot: The snapshot folder relative to the remote storage root.
        downloaded: Weights were fetched by this call.
        manifest_created: The profile manifest was written by this call.
        committed: The Volume was committed (downloaded or manifest_created).
        seconds: Wall time inside the stager.
        bytes_downloaded: Bytes fetched by this call.
    """

    profile: dict[str, Any]
    snapshot: str
    downloaded: bool
    manifest_created: bool
    committed: bool
    seconds: float
    bytes_downloaded: int

    def to_wire(self) -> dict[str, Any]:
        """Plain data."""
        return {"version": WIRE_VERSION, **dataclasses.asdict(self)}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> StageResult:
        """Rebuild from :meth:`to_wire` output."""
        _check_version(data, "Stage result")
        names = [f.name for f in dataclasses.fields(cls)]
        return cls(**{name: data[name] for name in names})


@dataclasses.dataclass(frozen=True, slots=True)
class EngineRequest:
    """One generation for the RemoteEngine: ``(profile, inputs, settings, reserve, prompt id)``.

    Attributes:
        request_id: Names the progress partition.
        profile: ``ModelProfile.to_dict()``.
        snapshot: The snapshot folder relative to the remote storage root.
        inputs: ``PreparedInputs.to_wire()`` (images and frames as PNG bytes).
        settings: ``GenerationSettings.to_dict()``.
        reserve_gb: VRAM to keep free, or None for the worker's default.
        keep_loaded: Keep the model resident after the request.
        prompt_id: The ComfyUI prompt id (feeds the execution-mode controller).
        promotion_state: Exported vLLM execution state to import first (retry).
    """

    request_id: str
    profile: dict[str, Any]
    snapshot: str
    inputs: dict[str, Any]
    settings: dict[str, Any]
    reserve_gb: float | None = None
    keep_loaded: bool = True
    prompt_id: str | None = None
    promotion_state: dict[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        """Plain data."""
        return {"version": WIRE_VERSION, **dataclasses.asdict(self)}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> EngineRequest:
        """Rebuild from :meth:`to_wire` output."""
        _check_version(data, "Engine request")
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def generation_settings(self) -> GenerationSettings:
        """The validated settings."""
        return GenerationSettings.from_dict(self.settings)


def ok_envelope(value: dict[str, Any]) -> dict[str, Any]:
    """A successful worker answer."""
    return {"version": WIRE_VERSION, "ok": value}


def error_envelope(error: BaseException) -> dict[str, Any]:
    """A failed worker answer: the pickled error plus its class and message."""
    cls = type(error)
    try:
        pickled: bytes | None = pickle.dumps(error)
    except Exception:
        pickled = None
    return {
        "version": WIRE_VERSION,
        "error": {
            "class": f"{cls.__module__}.{cls.__qualname__}",
            "message": str(error),
            "pickle": pickled,
        },
    }


def unwrap(envelope: Mapping[str, Any]) -> dict[str, Any]:
    """Return the answer's value, or raise the remote error locally.

    Raises:
        Exception: The remote error, with its original class, message and
            attributes; :class:`RemoteExecutionError` when it cannot be rebuilt.
    """
    _check_version(envelope, "Worker answer")
    if "ok" in envelope:
        value: dict[str, Any] = envelope["ok"]
        return value
    failure = envelope["error"]
    error: BaseException | None = None
    if failure.get("pickle") is not None:
        try:
            error = pickle.loads(failure["pickle"])
        except Exception:
            error = None
    if not isinstance(error, Exception):
        error = RemoteExecutionError(str(failure["class"]), str(failure["message"]))
    raise error


def result_from_wire(data: Mapping[str, Any]) -> InferenceResult:
    """Rebuild an :class:`InferenceResult` from its ``to_dict()``."""
    return InferenceResult(
        response=str(data["response"]),
        reasoning=str(data["reasoning"]),
        metadata=dict(data["metadata"]),
    )


class EventSender:
    """The worker's progress callback: ships events in order, coalescing tokens.

    The first event, a stage change, or ``interval`` seconds since the last
    send sends what is buffered (the body flushes the rest when it ends);
    consecutive GENERATE events collapse to the latest (its text and counts
    are cumulative), so a long generation costs a few sends a second.
    """

    def __init__(
        self,
        channel: ProgressChannel,
        *,
        interval: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._channel = channel
        self._interval = interval
        self._clock = clock
        self._buffer: list[ProgressEvent] = []
        self._last_sent = -float("inf")

    def __call__(self, event: ProgressEvent) -> None:
        """ProgressCallback."""
        buffer = self._buffer
        generating = event.stage is ProgressStage.GENERATE
        if generating and buffer and buffer[-1].stage is ProgressStage.GENERATE:
            buffer[-1] = event
        else:
            buffer.append(event)
        stage_changed = len(buffer) > 1 and buffer[-2].stage is not event.stage
        if stage_changed or self._clock() - self._last_sent >= self._interval:
            self.flush()

    def flush(self) -> None:
        """Send everything buffered."""
        if not self._buffer:
            return
        items = [event.to_dict() for event in self._buffer]
        self._buffer = []
        self._last_sent = self._clock()
        self._channel.put_many(items)
