"""The wire between dispatcher and workers: plain data, versioned, checked once.

Requests and results are dicts of str/int/float/bool/None/bytes/lists built
from the shared dataclasses' own ``to_dict``/``to_wire`` forms. A worker
never lets an ordinary exception escape: it returns an error envelope that
names the error's class (``<package>.<Class>``), its message and its
attributes as plain data, the fields core's error contract rebuilds it from
(:func:`comfy_llm_core.rebuild_error`). The dispatcher rebuilds only classes
of the allow-listed comfy-llm packages' ``errors`` modules; anything else
(another library's exception, a class this machine lacks) becomes a
:class:`RemoteExecutionError` carrying the class name and message. Nothing
on this wire is pickled by comfy-llm. Cancellation (a ``BaseException``) is
not wrapped.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import queue
import time
from collections.abc import Callable, Mapping
from pathlib import PurePath
from types import ModuleType

from comfy_llm_core import ComfyLLMError, ProgressEvent, ProgressStage, rebuild_error
from comfy_llm_residency import InferenceResult
from comfy_llm_residency.backend import GenerationSettings

from ..errors import RemoteExecutionError
from ._channel import ProgressChannel
from ._plain import WireDict, WireMapping, WireValue, as_float, as_int, as_mapping

__all__ = [
    "ERROR_PACKAGES",
    "WIRE_VERSION",
    "EngineRequest",
    "EventSender",
    "StageRequest",
    "StageResult",
    "error_envelope",
    "ok_envelope",
    "result_from_wire",
    "say_preempted",
    "unwrap",
]

logger = logging.getLogger("comfy_llm_modal_remote")

WIRE_VERSION = 2
"""2: errors as class name + fields (1 carried a pickle); the stage result echoes
the deployment's code fingerprint."""

ERROR_PACKAGES = frozenset(
    {
        "comfy_llm_core",
        "comfy_llm_profiles",
        "comfy_llm_staging",
        "comfy_llm_inputs",
        "comfy_llm_residency",
        "comfy_llm_reasoning",
        "comfy_llm_structured",
        "comfy_llm_backend_cuda",
        "comfy_llm_modal_remote",
    }
)
"""Packages whose ``errors`` module (core: its top level) may name a rebuilt error."""


def _check_version(data: WireMapping, what: str) -> None:
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

    def to_wire(self) -> WireDict:
        """Plain data."""
        return {"version": WIRE_VERSION, **dataclasses.asdict(self)}

    @classmethod
    def from_wire(cls, data: WireMapping) -> StageRequest:
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
        code_fingerprint: The deployment's fingerprint as baked into the
            stager's image (empty when the image carries none).
    """

    profile: WireDict
    snapshot: str
    downloaded: bool
    manifest_created: bool
    committed: bool
    seconds: float
    bytes_downloaded: int
    code_fingerprint: str = ""

    def to_wire(self) -> WireDict:
        """Plain data."""
        return {"version": WIRE_VERSION, **dataclasses.asdict(self)}

    @classmethod
    def from_wire(cls, data: WireMapping) -> StageResult:
        """Rebuild from :meth:`to_wire` output."""
        _check_version(data, "Stage result")
        return cls(
            profile=dict(as_mapping(data["profile"])),
            snapshot=str(data["snapshot"]),
            downloaded=bool(data["downloaded"]),
            manifest_created=bool(data["manifest_created"]),
            committed=bool(data["committed"]),
            seconds=as_float(data["seconds"]),
            bytes_downloaded=as_int(data["bytes_downloaded"]),
            code_fingerprint=str(data.get("code_fingerprint") or ""),
        )


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
        code_fingerprint: The code the dispatcher expects the app to run ("" skips the check).
    """

    request_id: str
    profile: WireDict
    snapshot: str
    inputs: WireDict
    settings: WireDict
    reserve_gb: float | None = None
    keep_loaded: bool = True
    prompt_id: str | None = None
    promotion_state: WireDict | None = None
    code_fingerprint: str = ""

    def to_wire(self) -> WireDict:
        """Plain data."""
        return {"version": WIRE_VERSION, **dataclasses.asdict(self)}

    @classmethod
    def from_wire(cls, data: WireMapping) -> EngineRequest:
        """Rebuild from :meth:`to_wire` output."""
        _check_version(data, "Engine request")
        reserve, prompt_id, promotion = (
            data.get("reserve_gb"),
            data.get("prompt_id"),
            data.get("promotion_state"),
        )
        return cls(
            request_id=str(data["request_id"]),
            profile=dict(as_mapping(data["profile"])),
            snapshot=str(data["snapshot"]),
            inputs=dict(as_mapping(data["inputs"])),
            settings=dict(as_mapping(data["settings"])),
            reserve_gb=None if reserve is None else as_float(reserve),
            keep_loaded=bool(data.get("keep_loaded", True)),
            prompt_id=None if prompt_id is None else str(prompt_id),
            promotion_state=None if promotion is None else dict(as_mapping(promotion)),
            code_fingerprint=str(data.get("code_fingerprint") or ""),
        )

    def generation_settings(self) -> GenerationSettings:
        """The validated settings."""
        return GenerationSettings.from_dict(self.settings)


def ok_envelope(value: WireDict) -> WireDict:
    """A successful worker answer."""
    return {"version": WIRE_VERSION, "ok": value}


def _plain(value: object) -> WireValue:
    """An attribute as JSON-able plain data (paths and enums by value, tuples as lists)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    return repr(value)


def error_envelope(error: BaseException) -> WireDict:
    """A failed worker answer: the error's class name, message and attributes as plain data."""
    cls = type(error)
    fields = {name: _plain(value) for name, value in vars(error).items()}
    slots = {}
    if isinstance(error, ImportError):
        slots = {"name": _plain(error.name), "path": _plain(error.path)}
    return {
        "version": WIRE_VERSION,
        "error": {
            "class": f"{cls.__module__.split('.')[0]}.{cls.__qualname__}",
            "message": str(error),
            "fields": fields,
            "slots": slots,
        },
    }


def _error_modules() -> dict[str, ModuleType]:
    """The allow-listed packages' error namespaces (imported here by name, never from the wire)."""
    import importlib

    import comfy_llm_core
    from comfy_llm_inputs import errors as inputs
    from comfy_llm_profiles import errors as profiles
    from comfy_llm_reasoning import errors as reasoning
    from comfy_llm_residency import errors as residency
    from comfy_llm_staging import errors as staging
    from comfy_llm_structured import errors as structured

    from .. import errors as modal_remote

    try:  # absent with [apple]+[modal] (sources shipped as data): RemoteExecutionError then
        backend_cuda: ModuleType | None = importlib.import_module("comfy_llm_backend_cuda.errors")
    except ImportError:
        backend_cuda = None
    modules = {
        "comfy_llm_core": comfy_llm_core,
        "comfy_llm_profiles": profiles,
        "comfy_llm_staging": staging,
        "comfy_llm_inputs": inputs,
        "comfy_llm_residency": residency,
        "comfy_llm_reasoning": reasoning,
        "comfy_llm_structured": structured,
        "comfy_llm_modal_remote": modal_remote,
    }
    if backend_cuda is not None:
        modules["comfy_llm_backend_cuda"] = backend_cuda
    return modules


def _allowed_class(qualified: str) -> type[ComfyLLMError] | None:
    """The local class an envelope names, when it is an allow-listed comfy-llm error."""
    package, _, name = qualified.partition(".")
    module = _error_modules().get(package) if package in ERROR_PACKAGES else None
    if module is None or not name.isidentifier() or name.startswith("_"):
        return None
    found = getattr(module, name, None)
    if isinstance(found, type) and issubclass(found, ComfyLLMError):
        return found
    return None


def _rebuild(failure: WireMapping) -> Exception:
    qualified, message = str(failure.get("class")), str(failure.get("message"))
    cls = _allowed_class(qualified)
    fields, slots = failure.get("fields"), failure.get("slots")
    if cls is None or not isinstance(fields, Mapping) or not isinstance(slots, Mapping):
        return RemoteExecutionError(qualified, message)
    try:
        return rebuild_error(cls, message, dict(fields), dict(slots) or None)
    except (TypeError, ValueError) as error:
        logger.warning("Could not rebuild the remote %s: %s", qualified, error)
        return RemoteExecutionError(qualified, message)


def unwrap(envelope: WireMapping) -> WireDict:
    """Return the answer's value, or raise the remote error locally.

    Raises:
        Exception: The remote comfy-llm error with its class, message and
            attributes; :class:`RemoteExecutionError` for any other class.
    """
    _check_version(envelope, "Worker answer")
    if "ok" in envelope:
        return dict(as_mapping(envelope["ok"]))
    raise _rebuild(as_mapping(envelope["error"]))


def result_from_wire(data: WireMapping) -> InferenceResult:
    """Rebuild an :class:`InferenceResult` from its ``to_dict()`` (metadata in its flat form).

    Raises:
        RemoteExecutionError: The answer is not a result this version reads.
    """
    try:
        return InferenceResult.from_dict(data)
    except (KeyError, TypeError, ValueError) as error:
        raise RemoteExecutionError(
            "WireFormatError",
            f"The worker's answer is not a result this node reads ({error}): the deployed "
            "Modal app runs another comfy-llm version; it is redeployed when the node's "
            "version changes",
        ) from error


LIVE_TEXT_BYTES = 8 * 1024
"""Most UTF-8 bytes of generated text one GENERATE event carries (its tail).

A Modal Queue partition holds at most 5,000 items and 64 MiB (modal/queue.py:
294-295): 5,000 events of this size stay under 64 MiB, so the item limit is
met first and a long answer cannot fill the partition by size. The answer
itself comes back whole in the result."""


def _bounded(event: ProgressEvent) -> ProgressEvent:
    text = event.text
    if text is None or len(text) * 4 <= LIVE_TEXT_BYTES:
        return event
    encoded = text.encode("utf-8")
    if len(encoded) <= LIVE_TEXT_BYTES:
        return event
    tail = encoded[-(LIVE_TEXT_BYTES - 3) :].decode("utf-8", errors="ignore")
    return dataclasses.replace(event, text="\u2026" + tail)


class EventSender:
    """The worker's progress callback: ships events in order, coalescing tokens.

    The first event, a stage change, or ``interval`` seconds since the last
    send sends what is buffered (the body flushes the rest when it ends);
    consecutive GENERATE events collapse to the latest (its text and counts
    are cumulative; the text is cut to its last :data:`LIVE_TEXT_BYTES`), so a
    long generation costs a few sends a second.

    A send never blocks the GPU: the channel puts without blocking and raises
    ``queue.Full`` when the partition is full (nobody is draining it, e.g.
    ComfyUI went away); those events are dropped and counted in
    :attr:`dropped`. Progress is best effort: any other failed put (Modal's
    ``put_many`` re-raises ``ConnectionError`` after its retries,
    ``InternalError``, ``NotFoundError`` for a deleted queue, ``RequestSizeError``,
    modal/queue.py:719-727) is counted the same way, logged once, and the
    request goes on; it never replaces what the body raised (``flush`` runs in
    ``finally`` blocks). A cancellation (``InputCancellation``, a
    ``BaseException``) still goes through.
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
        self.dropped = 0
        self.failed_puts = 0

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
        """Send everything buffered (dropped and counted when the partition is full)."""
        if not self._buffer:
            return
        items = [_bounded(event).to_dict() for event in self._buffer]
        self._buffer = []
        self._last_sent = self._clock()
        try:
            self._channel.put_many(items)
        except queue.Full:
            self.dropped += len(items)
        except Exception as error:  # best effort: the request goes on
            self.dropped += len(items)
            self.failed_puts += 1
            if self.failed_puts == 1:
                logger.warning(
                    "A progress put failed (%s: %s); progress events are dropped and counted",
                    type(error).__name__,
                    error,
                )


PREEMPTED_MESSAGE = (
    "Modal preempted this {what} container; Modal runs the request again on another "
    "(progress starts over)"
)


def say_preempted(channel: ProgressChannel, what: str) -> None:
    """Tell the caller its input was preempted, before the container goes.

    Modal preempts a container with SIGINT (``KeyboardInterrupt`` in the
    body) and kills it 30 s later (modal/exception.py:300-305); the server
    then runs the input again on another container (modal/_functions.py:487:
    "lost inputs or worker preemption"), whose events land in the same
    partition. Without this line the user sees progress jump back to loading
    for no reason. Best effort: one non-blocking put, failures ignored.
    """
    event = ProgressEvent(
        stage=ProgressStage.ADMISSION,
        message=PREEMPTED_MESSAGE.format(what=what),
        indeterminate=True,
    )
    try:
        channel.put_many([event.to_dict()])
    except Exception as error:  # the container is going anyway
        logger.warning("Could not say the container was preempted: %s", error)
