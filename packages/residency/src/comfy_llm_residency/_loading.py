"""One cold load, measured; the probe readings and the rebuild question around it.

The manager keeps the LRU and its bookkeeping; what one load does (call the
factory, measure the memory it took, build the :class:`Resident`) and the
readings that must never lose a finished answer live here.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from comfy_llm_core import ProgressCallback, ProgressEvent, ProgressStage

from ._host import ResidentInfo
from ._memory import MemoryProbe, MemorySnapshot
from ._state import Resident
from .backend import BackendFactory

if TYPE_CHECKING:
    from comfy_llm_profiles import ModelProfile

    from ._admission import AdmissionOutcome

__all__ = [
    "admitted_memory",
    "allocated_now",
    "batch_scope",
    "grow_allocation",
    "load_entry",
    "read_memory",
    "rebuild_needed",
    "report_load",
    "serving_batch",
]

logger = logging.getLogger("comfy_llm_residency")

_ADMITTED: contextvars.ContextVar[MemorySnapshot | None] = contextvars.ContextVar(
    "comfy_llm_admitted_memory", default=None
)


_BATCH: contextvars.ContextVar[bool] = contextvars.ContextVar("comfy_llm_batch", default=False)


def serving_batch() -> bool:
    """Whether the manager is serving a batch (``run_batch``: captions) on this thread.

    True from admission to the last token of a ``run_batch`` call, so a backend
    can pick a batch's engine settings when it is loaded, rebuilt or asked
    :meth:`observe_workflow` (vLLM starts caption work in throughput mode).
    """
    return _BATCH.get()


@contextlib.contextmanager
def batch_scope() -> Iterator[None]:
    """Mark this thread's calls as serving a batch (see :func:`serving_batch`)."""
    token = _BATCH.set(True)
    try:
        yield
    finally:
        _BATCH.reset(token)


def admitted_memory() -> MemorySnapshot | None:
    """The reading that admitted the cold load in progress, for the backend factory.

    Set while the manager calls the factory (same thread), None elsewhere. An
    engine with a start-up memory check of its own (vLLM's
    ``gpu_memory_utilization``) derives it from this reading, so its check
    passes exactly when admission admitted the load.
    """
    return _ADMITTED.get()


def report_load(progress: ProgressCallback, message: str, seconds: float | None = None) -> None:
    """An indeterminate LOAD event."""
    progress(
        ProgressEvent(
            stage=ProgressStage.LOAD, message=message, indeterminate=True, elapsed_seconds=seconds
        )
    )


def allocated_now(probe: MemoryProbe) -> int | None:
    """The probe's reading of this process's own allocation, when it has one."""
    reader = getattr(probe, "allocated_bytes", None)
    if reader is None:
        return None
    try:
        value = reader()
    except Exception:
        logger.exception("Reading the process's allocated memory failed")
        return None
    return None if value is None else int(value)


def read_memory(probe: MemoryProbe, admission: AdmissionOutcome | None) -> MemorySnapshot:
    """Read memory for the metadata; a failing probe must not lose a finished answer."""
    try:
        return probe.snapshot()
    except Exception:
        logger.exception("Reading memory after the request failed")
        if admission is not None:
            return admission.snapshot
        return MemorySnapshot(available_bytes=0, total_bytes=0, device="unknown")


def rebuild_needed(backend: object, prompt_id: str | None, progress: ProgressCallback) -> bool:
    """Ask a workflow-aware backend whether it must be rebuilt before this request.

    A backend with ``observe_workflow(prompt_id) -> str | None`` (vLLM's
    execution modes) returns a reason; an indeterminate ENGINE event carries
    it, then the caller unloads and loads again (admission and memory
    recovery included).
    """
    observe = getattr(backend, "observe_workflow", None)
    reason = observe(prompt_id) if callable(observe) else None
    if not reason:
        return False
    progress(ProgressEvent(stage=ProgressStage.ENGINE, message=str(reason), indeterminate=True))
    return True


def load_entry(
    factory: BackendFactory,
    profile: ModelProfile,
    path: Path,
    outcome: AdmissionOutcome,
    *,
    probe: MemoryProbe,
    clock: Callable[[], float],
    progress: ProgressCallback,
) -> Resident:
    """Load the backend and measure what it took.

    The drop in available memory, or the growth of the process's own
    allocation where the probe reads one.
    """
    report_load(progress, f"Loading {profile.repository}")
    started = clock()
    before = allocated_now(probe)
    token = _ADMITTED.set(outcome.snapshot)
    try:
        backend = factory(profile, path, progress)
    except BaseException:
        try:
            probe.clear_cache()
        except Exception:
            logger.exception("Clearing the memory cache after a failed load failed")
        raise
    finally:
        _ADMITTED.reset(token)
    load_seconds = max(0.0, clock() - started)
    after = probe.snapshot()
    allocated = max(0, outcome.snapshot.available_bytes - after.available_bytes)
    after_allocated = allocated_now(probe)
    if before is not None and after_allocated is not None and after_allocated > before:
        allocated = after_allocated - before
    entry = Resident(profile, backend, path, load_seconds, allocated)
    entry.allocation_base = before
    entry.device = after.device
    return entry


def grow_allocation(entry: Resident, probe: MemoryProbe) -> ResidentInfo:
    """Measure a cold load once more after its first generation; the host's view of it.

    Weights an engine maps from the snapshot (safetensors through mmap) only
    count once generation touches them, so the load's own delta can miss
    most of the model.
    """
    now = allocated_now(probe)
    if entry.allocation_base is not None and now is not None:
        entry.allocated_bytes = max(entry.allocated_bytes or 0, now - entry.allocation_base)
    profile = entry.profile
    return ResidentInfo(
        profile_id=profile.profile_id,
        repository=profile.repository,
        backend=str(getattr(profile.backend, "value", profile.backend)),
        resident_bytes=int(entry.allocated_bytes or 0),
        device=entry.device,
    )
