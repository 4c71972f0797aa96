"""Memory admission before a cold load.

The steps, in order (each re-checks the probe):

1. Refuse at once when estimate + reserve exceeds the device's total memory:
   nothing can make it fit, so nothing is evicted.
2. Evict least-recently-used models beyond the resident-count limit.
3. Ask the host (ComfyUI) to free memory for estimate + reserve.
4. Evict least-recently-used LLMs one at a time, asking the host again after
   each eviction.
5. Only when a model was evicted (or unloaded just before, for a rebuild in
   another execution mode): poll the probe every ``poll_interval`` seconds
   for at most ``timeout`` seconds for its memory to show up (drivers and the
   OS may lag; an engine process takes a while to exit). With nothing
   released there is nothing to wait for, so the refusal comes at once (as
   in the seed).
6. Still short: refuse with the numbers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from comfy_llm_core import ProgressCallback, ProgressEvent, ProgressStage

from ._memory import MemoryProbe, MemorySnapshot
from .errors import InsufficientMemoryError, format_gib


@dataclasses.dataclass(frozen=True, slots=True)
class AdmissionRequest:
    """What one cold load asks of admission.

    Attributes:
        profile_id: The profile to load.
        repository: Its repository (for messages).
        needed_bytes: The profile's memory estimate.
        reserve_bytes: Memory to keep free after the load.
        reserve_name: The input that sets the reserve (for the fix in messages).
        over_limit: How many resident models must go to respect the count limit.
        other_process: The engine allocates in a process of its own: memory is
            read with the probe's ``snapshot_for_other_process`` where it has one
            (this process's cached-but-unused memory is no room for it).
        released: Profiles unloaded just before this load (the rebuild of an
            auto promotion): their memory may still be coming back, so a
            shortfall is waited for, and a timeout flags the process, as after
            an eviction.
    """

    profile_id: str
    repository: str
    needed_bytes: int
    reserve_bytes: int
    reserve_name: str
    over_limit: int = 0
    other_process: bool = False
    released: tuple[str, ...] = ()

    @property
    def required_bytes(self) -> int:
        """Estimate plus reserve."""
        return self.needed_bytes + self.reserve_bytes


@dataclasses.dataclass(frozen=True, slots=True)
class AdmissionOutcome:
    """How admission made room.

    Attributes:
        snapshot: The last reading, the one that admitted the load.
        evicted_profiles: Profiles unloaded to make room, oldest first.
        waited_seconds: Time spent polling for memory to come back.
        freed_host_memory: Whether the host was asked to free memory.
    """

    snapshot: MemorySnapshot
    evicted_profiles: tuple[str, ...]
    waited_seconds: float
    freed_host_memory: bool


@dataclasses.dataclass(slots=True)
class Admission:
    """One admission run; create it per cold load and call :meth:`run`.

    Attributes:
        probe: Measures the device.
        evict_one: Unloads the least-recently-used resident model and returns
            its profile id, or None when nothing is resident.
        free_host_memory: Asks the host to free that many bytes, or None.
        timeout_seconds: Longest wait for memory to come back.
        poll_interval_seconds: Time between readings while waiting.
        clock: Monotonic clock in seconds.
        sleep: Sleeps for that many seconds.
        progress: Receives ADMISSION events; may raise to cancel.
    """

    probe: MemoryProbe
    evict_one: Callable[[], str | None]
    free_host_memory: Callable[[int], None] | None
    timeout_seconds: float
    poll_interval_seconds: float
    clock: Callable[[], float]
    sleep: Callable[[float], None]
    progress: ProgressCallback
    _evicted: list[str] = dataclasses.field(default_factory=list, init=False)
    _freed: bool = dataclasses.field(default=False, init=False)

    def _emit(self, message: str, elapsed: float | None = None) -> None:
        self.progress(
            ProgressEvent(
                stage=ProgressStage.ADMISSION,
                message=message,
                indeterminate=True,
                elapsed_seconds=elapsed,
            )
        )

    def _free_host(self, request: AdmissionRequest) -> None:
        if self.free_host_memory is not None:
            self.free_host_memory(request.required_bytes)
            self._freed = True

    def _measure(self, request: AdmissionRequest) -> MemorySnapshot:
        if request.other_process:
            reader = getattr(self.probe, "snapshot_for_other_process", None)
            if callable(reader):
                snapshot: MemorySnapshot = reader()
                return snapshot
        return self.probe.snapshot()

    def _evict(self) -> bool:
        evicted = self.evict_one()
        if evicted is None:
            return False
        self._evicted.append(evicted)
        self._emit(f"Unloaded resident model {evicted} to make room")
        return True

    def _refuse(
        self, request: AdmissionRequest, snapshot: MemorySnapshot, waited: float, timed_out: bool
    ) -> InsufficientMemoryError:
        return InsufficientMemoryError(
            profile_id=request.profile_id,
            repository=request.repository,
            needed_bytes=request.needed_bytes,
            reserve_bytes=request.reserve_bytes,
            available_bytes=snapshot.available_bytes,
            total_bytes=snapshot.total_bytes,
            device=snapshot.device,
            reserve_name=request.reserve_name,
            evicted_profiles=tuple(self._evicted),
            waited_seconds=waited,
            recovery_timed_out=timed_out,
        )

    def run(self, request: AdmissionRequest) -> AdmissionOutcome:
        """Make room for ``request`` or refuse it.

        Args:
            request: The cold load to admit.

        Returns:
            How room was made.

        Raises:
            InsufficientMemoryError: When estimate + reserve still does not fit;
                ``recovery_timed_out`` is True when models were evicted (or
                released for a rebuild) and the memory did not come back within
                the timeout.
            Exception: Whatever the progress callback raised (cancellation).
        """
        required = request.required_bytes
        self._emit(
            f"Checking memory: model {format_gib(request.needed_bytes)} + reserve "
            f"{format_gib(request.reserve_bytes)}"
        )
        snapshot = self._measure(request)
        if required > snapshot.total_bytes:
            raise self._refuse(request, snapshot, 0.0, timed_out=False)
        for _ in range(request.over_limit):
            if not self._evict():
                break
        if self._evicted:
            snapshot = self._measure(request)

        if snapshot.available_bytes < required:
            self._free_host(request)
            snapshot = self._measure(request)
        while snapshot.available_bytes < required and self._evict():
            self._free_host(request)
            snapshot = self._measure(request)

        waited = 0.0
        released = bool(self._evicted or request.released)
        if snapshot.available_bytes < required and released:
            snapshot, waited = self._wait_for_memory(request, snapshot)
        if snapshot.available_bytes < required:
            raise self._refuse(request, snapshot, waited, timed_out=released)
        return AdmissionOutcome(
            snapshot=snapshot,
            evicted_profiles=tuple(self._evicted),
            waited_seconds=waited,
            freed_host_memory=self._freed,
        )

    def _wait_for_memory(
        self, request: AdmissionRequest, snapshot: MemorySnapshot
    ) -> tuple[MemorySnapshot, float]:
        required = request.required_bytes
        start = self.clock()
        deadline = start + self.timeout_seconds
        while snapshot.available_bytes < required:
            now = self.clock()
            remaining = deadline - now
            if remaining <= 0:
                break
            self._emit(
                f"Waiting for memory to be released: {format_gib(snapshot.available_bytes)} "
                f"available, {format_gib(required)} needed",
                elapsed=now - start,
            )
            self.sleep(min(self.poll_interval_seconds, remaining))
            snapshot = self._measure(request)
        return snapshot, max(0.0, self.clock() - start)
