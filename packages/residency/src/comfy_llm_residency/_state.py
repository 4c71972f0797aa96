"""The manager's bookkeeping: resident entries, the telemetry state, argument checks."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from comfy_llm_core import InvalidSettingError

from .backend import Backend

if TYPE_CHECKING:
    from comfy_llm_profiles import ModelProfile

    from ._admission import AdmissionOutcome


@dataclasses.dataclass(slots=True)
class Resident:
    """One loaded model in the LRU."""

    profile: ModelProfile
    backend: Backend
    snapshot_path: Path
    load_seconds: float
    allocated_bytes: int | None
    host_eviction_reason: str | None = None
    allocation_base: int | None = None
    device: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class Served:
    """The model serving one request (or batch): its entry and how it was obtained.

    Attributes:
        entry: The resident entry.
        cache_status: ``"warm"`` or ``"cold"``.
        admission: The cold load's admission outcome; None on a warm hit.
    """

    entry: Resident
    cache_status: str
    admission: AdmissionOutcome | None

    @property
    def backend(self) -> Backend:
        """The entry's backend."""
        return self.entry.backend


@dataclasses.dataclass(frozen=True, slots=True)
class ManagerState:
    """A snapshot of the manager for telemetry.

    Attributes:
        target: The manager's execution target.
        max_resident: The LRU limit.
        resident_profiles: Resident profile ids, least recently used first.
        unsafe_for_reuse: True once memory failed to come back after an
            eviction (or an unload failed); the process should be retired.
        busy: True while a request or unload holds the lock.
        last_cache_status: ``"warm"``, ``"cold"`` or None before any request.
        last_load_seconds: Load time of the most recent cold load.
        last_measured_allocation_bytes: Memory drop across that load.
        last_evicted_profiles: Profiles evicted by the most recent request.
        requests_served: Requests that returned a result.
        host_evicted_profiles: Profiles the host (ComfyUI) unloaded that have
            not been loaded again since.
    """

    target: str
    max_resident: int
    resident_profiles: tuple[str, ...]
    unsafe_for_reuse: bool
    busy: bool
    last_cache_status: str | None
    last_load_seconds: float | None
    last_measured_allocation_bytes: int | None
    last_evicted_profiles: tuple[str, ...]
    requests_served: int
    host_evicted_profiles: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        data = dataclasses.asdict(self)
        data["resident_profiles"] = list(self.resident_profiles)
        data["last_evicted_profiles"] = list(self.last_evicted_profiles)
        data["host_evicted_profiles"] = list(self.host_evicted_profiles)
        return data


def positive_int(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidSettingError(name, value, "a whole number of at least 1")
    return value


def non_negative(name: str, value: float, *, strict: bool = False) -> float:
    valid = isinstance(value, int | float) and not isinstance(value, bool)
    valid = valid and math.isfinite(value) and (value > 0 if strict else value >= 0)
    if not valid:
        bound = "above 0" if strict else "of at least 0"
        raise InvalidSettingError(name, value, f"a finite number {bound}")
    return float(value)
