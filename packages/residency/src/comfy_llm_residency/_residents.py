"""The resident models of one manager: an LRU keyed by profile id, and how entries come and go.

The manager holds the lock and serves requests; this holds what stays between
them: the loaded entries in LRU order, admission (memory checks, evicting the
oldest, asking the host to free memory) before a cold load, the load itself,
unloads (own, by eviction, or for the host) and the telemetry each leaves
behind for :meth:`ResidentModelManager.state`.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from comfy_llm_core import ExecutionTarget, ProgressCallback
from comfy_llm_profiles import engine_spec
from comfy_llm_staging import require_completed_snapshot

from . import _settings
from ._admission import Admission, AdmissionOutcome, AdmissionRequest
from ._host import HostListener, notify_loaded, notify_unloaded
from ._loading import grow_allocation, load_entry, report_load
from ._memory import MemoryProbe
from ._state import Resident
from .backend import BackendFactory
from .errors import InsufficientMemoryError

if TYPE_CHECKING:
    from comfy_llm_profiles import ModelProfile

logger = logging.getLogger("comfy_llm_residency")


class ResidentSet:
    """The loaded models, least recently used first (callers hold the manager's lock).

    Attributes:
        entries: Resident entries by profile id, oldest first.
        ids: ``tuple(entries)``, readable without the lock.
        host_evictions: Why the host unloaded a profile, until it loads again.
        unsafe: True once memory did not come back or an unload failed.
        last_cache_status: ``"warm"`` or ``"cold"`` of the latest request.
        last_load_seconds: Duration of the latest cold load.
        last_allocation: The latest measured allocation of a cold load.
        last_evicted: Profiles the latest admission evicted.
    """

    def __init__(
        self,
        target: ExecutionTarget,
        *,
        factory: BackendFactory,
        probe: MemoryProbe,
        admission: Callable[[ProgressCallback], Admission],
        host_listener: HostListener | None,
        clock: Callable[[], float],
    ) -> None:
        """Create an empty set.

        Args:
            target: The manager's target (names the reserve input in errors).
            factory: Loads a backend from (profile, snapshot path, progress).
            probe: Measures the device.
            admission: Builds the admission check for one request's progress.
            host_listener: Told about every load and unload, or None.
            clock: Monotonic clock in seconds.
        """
        self.target = target
        self.factory = factory
        self.probe = probe
        self._admission = admission
        self._host_listener = host_listener
        self._clock = clock
        self.entries: OrderedDict[str, Resident] = OrderedDict()
        self.ids: tuple[str, ...] = ()
        self.host_evictions: dict[str, str] = {}
        self.unsafe = False
        self.last_cache_status: str | None = None
        self.last_load_seconds: float | None = None
        self.last_allocation: int | None = None
        self.last_evicted: tuple[str, ...] = ()

    def __contains__(self, profile_id: object) -> bool:
        """Whether the profile is resident."""
        return profile_id in self.entries

    def _refresh(self) -> None:
        self.ids = tuple(self.entries)

    def unload(self, profile_id: str, *, by_host: bool = False) -> None:
        """Unload one resident; a failing unload marks the set unsafe for reuse."""
        entry = self.entries.pop(profile_id)
        self._refresh()
        try:
            entry.backend.unload()
        except Exception:
            self.unsafe = True
            logger.exception(
                "Unloading %s failed; marking the manager unsafe for reuse", profile_id
            )
        del entry
        try:
            self.probe.clear_cache()
        except Exception:
            logger.exception("Clearing the memory cache after unloading %s failed", profile_id)
        notify_unloaded(self._host_listener, profile_id, by_host=by_host)

    def usable(self, profile_id: str) -> bool:
        """False only for a resident whose backend reports ``loaded`` False (its engine died)."""
        entry = self.entries.get(profile_id)
        return entry is None or getattr(entry.backend, "loaded", True) is not False

    def evict_oldest(self) -> str | None:
        """Unload the least recently used resident; its profile id, or None when empty."""
        if not self.entries:
            return None
        profile_id = next(iter(self.entries))
        self.unload(profile_id)
        return profile_id

    def ensure_loaded(
        self,
        profile: ModelProfile,
        snapshot_path: Path,
        reserve_bytes: int,
        max_resident: int,
        progress: ProgressCallback,
        *,
        released: tuple[str, ...] = (),
    ) -> tuple[Resident, str, AdmissionOutcome | None]:
        """The profile's resident entry: reused (``"warm"``) or admitted and loaded (``"cold"``).

        ``released`` names profiles unloaded just before (a rebuild): admission
        waits for their memory as after an eviction.

        Raises:
            comfy_llm_staging.IncompleteSnapshotError: A cold load's snapshot is not complete.
            InsufficientMemoryError: Estimate + reserve does not fit (after evicting).
        """
        profile_id = profile.profile_id
        if not self.usable(profile_id):
            self.unload(profile_id)  # its engine died since: load a fresh one
        entry = self.entries.get(profile_id)
        # The id is the digest of the profile's identity: same id, same model
        # (display name and requested revision are not part of it).
        if entry is not None:
            self.entries.move_to_end(profile_id)
            self._refresh()
            self.last_cache_status = "warm"
            self.last_evicted = ()
            report_load(progress, f"Using resident {profile.repository}", 0.0)
            return entry, "warm", None

        path = require_completed_snapshot(Path(snapshot_path))
        request = AdmissionRequest(
            profile_id=profile_id,
            repository=profile.repository,
            needed_bytes=int(profile.estimated_memory_bytes or 0),
            reserve_bytes=reserve_bytes,
            reserve_name=_settings.reserve_input_name(self.target),
            over_limit=max(0, len(self.entries) + 1 - max_resident),
            other_process=engine_spec(profile.backend).out_of_process,
            released=released,
        )
        try:
            outcome = self._admission(progress).run(request)
        except InsufficientMemoryError as error:
            self.last_evicted = error.evicted_profiles
            if error.recovery_timed_out:
                self.unsafe = True
            raise
        self.last_evicted = outcome.evicted_profiles
        return self._load(profile, path, outcome, progress), "cold", outcome

    def _load(
        self,
        profile: ModelProfile,
        path: Path,
        outcome: AdmissionOutcome,
        progress: ProgressCallback,
    ) -> Resident:
        entry = load_entry(
            self.factory,
            profile,
            path,
            outcome,
            probe=self.probe,
            clock=self._clock,
            progress=progress,
        )
        entry.host_eviction_reason = self.host_evictions.pop(profile.profile_id, None)
        self.entries[profile.profile_id] = entry
        self._refresh()
        self.last_cache_status = "cold"
        self.last_load_seconds = entry.load_seconds
        self.last_allocation = entry.allocated_bytes
        seconds = entry.load_seconds
        report_load(progress, f"Loaded {profile.repository} in {seconds:.1f} s", seconds)
        return entry

    def announce(self, entry: Resident) -> None:
        """Tell the host about a cold load, measured once more after its first generation."""
        info = grow_allocation(entry, self.probe)
        self.last_allocation = entry.allocated_bytes
        notify_loaded(self._host_listener, info)
