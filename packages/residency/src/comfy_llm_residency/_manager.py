"""The resident model manager: one lock, an LRU of immutable profiles."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from comfy_llm_core import ExecutionTarget, ProgressCallback, ignore_progress

from . import _settings
from ._admission import Admission
from ._answer import generate_answer
from ._batch import BatchRelay, batch_results, generate_batch_answers
from ._generation import BatchTokenCallback, TokenCallback, TokenRelay, done_event
from ._host import HostListener
from ._loading import batch_scope, read_memory, rebuild_needed
from ._memory import MemoryProbe, probe_for_target
from ._metadata import RequestFacts, build_metadata
from ._residents import ResidentSet
from ._result import InferenceResult
from ._state import ManagerState, Resident, Served, non_negative, positive_int
from .backend import BackendFactory, BatchItem, GenerationSettings
from .errors import (
    GIB,
    ReentrantCallError,
    TargetMismatchError,
)

if TYPE_CHECKING:
    from comfy_llm_inputs import PreparedInputs
    from comfy_llm_profiles import ModelProfile

logger = logging.getLogger("comfy_llm_residency")


class ResidentModelManager:
    """Loads, keeps and serves models for one execution target.

    Every load, generation and unload runs under one lock, so requests from
    several threads are served one at a time. Resident models form an LRU
    keyed by profile id; a profile is immutable, so a resident model is reused
    as long as its profile stays in the LRU. Backends come from the factory;
    the manager never knows which engine it holds.
    """

    def __init__(
        self,
        target: ExecutionTarget | str,
        *,
        backend_factory: BackendFactory,
        memory_probe: MemoryProbe | None = None,
        max_resident: int | None = None,
        recovery_timeout_seconds: float | None = None,
        free_host_memory: Callable[[int], None] | None = None,
        poll_interval_seconds: float = 0.25,
        host_listener: HostListener | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """Create a manager.

        Args:
            target: The execution target every profile must have been resolved for.
            backend_factory: Loads a backend from (profile, snapshot path, progress).
            memory_probe: Measures the device; the target's default when None.
            max_resident: LRU limit; the environment's (see README) when None.
            recovery_timeout_seconds: Longest wait for memory to come back after
                freeing; ``COMFY_MODAL_LLM_MEMORY_RECOVERY_TIMEOUT_SECONDS`` when None.
            free_host_memory: Asks the host to free that many bytes (in ComfyUI,
                ``comfy.model_management.free_memory`` bound to the device).
            poll_interval_seconds: Time between readings while waiting for memory.
            host_listener: Told about every load and unload, so a host with its
                own model manager can list the residents and ask for them back
                (``evict_for_host``); None for no host.
            clock: Monotonic clock in seconds (tests inject a fake one).
            sleep: Sleep function used while polling (tests inject a fake one).

        Raises:
            InvalidSettingError: When the target, an argument or an environment
                variable is invalid.
        """
        self.target: ExecutionTarget = _settings.coerce_target(target)
        self.max_resident = (
            _settings.max_resident_models(self.target)
            if max_resident is None
            else positive_int("max_resident", max_resident)
        )
        self.recovery_timeout_seconds = (
            _settings.memory_recovery_timeout_seconds()
            if recovery_timeout_seconds is None
            else non_negative("recovery_timeout_seconds", recovery_timeout_seconds)
        )
        self.poll_interval_seconds = non_negative(
            "poll_interval_seconds", poll_interval_seconds, strict=True
        )
        self._free_host_memory = free_host_memory
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._residents = ResidentSet(
            self.target,
            factory=backend_factory,
            probe=memory_probe if memory_probe is not None else probe_for_target(self.target),
            admission=self._admission,
            host_listener=host_listener,
            clock=clock,
        )
        self._resident = self._residents.entries  # the LRU itself (tests look at it)
        self._served = 0

    @property
    def unsafe_for_reuse(self) -> bool:
        """True once memory did not come back after an eviction, or an unload failed."""
        return self._residents.unsafe

    @property
    def memory_probe(self) -> MemoryProbe:
        """The probe admission reads."""
        return self._residents.probe

    def _admission(self, progress: ProgressCallback) -> Admission:
        return Admission(
            probe=self._residents.probe,
            evict_one=self._residents.evict_oldest,
            free_host_memory=self._free_host_memory,
            timeout_seconds=self.recovery_timeout_seconds,
            poll_interval_seconds=self.poll_interval_seconds,
            clock=self._clock,
            sleep=self._sleep,
            progress=progress,
        )

    def state(self) -> ManagerState:
        """Return the manager's state without waiting for a running request.

        Returns:
            The current state.
        """
        residents = self._residents
        return ManagerState(
            target=self.target.value,
            max_resident=self.max_resident,
            resident_profiles=residents.ids,
            unsafe_for_reuse=residents.unsafe,
            busy=self._owner is not None,
            last_cache_status=residents.last_cache_status,
            last_load_seconds=residents.last_load_seconds,
            last_measured_allocation_bytes=residents.last_allocation,
            last_evicted_profiles=residents.last_evicted,
            requests_served=self._served,
            host_evicted_profiles=tuple(residents.host_evictions),
        )

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        if self._owner == threading.get_ident():
            raise ReentrantCallError(
                "The resident model manager was called from inside its own request "
                "(a progress or token callback); start the next request after this one returns."
            )
        with self._lock:
            self._owner = threading.get_ident()
            try:
                yield
            finally:
                self._owner = None

    def unload_all(self) -> None:
        """Unload every resident model (waits for a running request to finish).

        Raises:
            ReentrantCallError: When called from inside a request's callback.
        """
        with self._locked():
            while self._residents.evict_oldest() is not None:
                pass

    def evict_for_host(self, profile_id: str, reason: str) -> bool:
        """Unload a resident model because the host needs its memory.

        Never waits and never interrupts: while a request holds the lock
        (loading or generating), or when the host asks from inside this
        manager's own request (admission asking the host to free memory), the
        request is declined and the host moves on to its other models.

        Args:
            profile_id: The resident to unload.
            reason: Why the host asked, for the next request's telemetry
                (``evicted_by_host``, ``host_eviction_reason``).

        Returns:
            True when the model is no longer resident (unloaded now, or it was
            not resident); False when declined.
        """
        if self._owner == threading.get_ident():
            return False
        if not self._lock.acquire(blocking=False):
            logger.info("Declined the host's request to unload %s: it is in use", profile_id)
            return False
        self._owner = threading.get_ident()
        try:
            if profile_id not in self._residents:
                return True
            self._residents.unload(profile_id, by_host=True)
            self._residents.host_evictions[profile_id] = reason
            logger.info("Unloaded %s for the host: %s", profile_id, reason)
            return True
        finally:
            self._owner = None
            self._lock.release()

    def _check_target(self, profile: ModelProfile) -> None:
        profile_target = _settings.coerce_target(profile.execution_target)
        if profile_target != self.target:
            raise TargetMismatchError(profile.profile_id, profile_target.value, self.target.value)

    def _reserve_bytes(self, reserve_gb: float | None) -> int:
        name = _settings.reserve_input_name(self.target)
        if reserve_gb is None:
            reserve_gb = _settings.default_reserve_gb(self.target)
        return int(non_negative(name, reserve_gb) * GIB)

    def run(
        self,
        profile: ModelProfile,
        snapshot_path: Path,
        inputs: PreparedInputs,
        settings: GenerationSettings,
        *,
        reserve_gb: float | None = None,
        keep_loaded: bool = True,
        progress: ProgressCallback = ignore_progress,
        on_token: TokenCallback | None = None,
        prompt_id: str | None = None,
    ) -> InferenceResult:
        """Serve one request: admit and load if needed, generate, parse reasoning.

        Args:
            profile: The resolved profile; its target must be the manager's.
            snapshot_path: The profile's completed snapshot (read on a cold load).
            inputs: Prepared prompt, images and video frames.
            settings: Sampling settings.
            reserve_gb: Memory to keep free after a cold load, in GiB; the
                target's default (see README) when None.
            keep_loaded: False unloads the model after the request, even when
                generation raised.
            progress: Receives ADMISSION, LOAD, GENERATE and DONE events; it may
                raise to cancel, and the exception propagates unchanged.
            on_token: Called per token with (token id, text so far); may raise
                to cancel.
            prompt_id: The workflow's prompt id, recorded in the metadata.

        Returns:
            The response, the reasoning and JSON-ready metadata.

        Raises:
            TargetMismatchError: When the profile was resolved for another target.
            InvalidSettingError: When ``reserve_gb`` or an environment variable is invalid.
            comfy_llm_staging.IncompleteSnapshotError: When a cold load's snapshot
                is not complete.
            InsufficientMemoryError: When estimate + reserve does not fit.
            ReentrantCallError: When called from inside this manager's callbacks.
            Exception: Whatever the backend factory, the backend or a callback
                raised (interruption), unchanged; the model stays resident
                unless ``keep_loaded`` is False, and the lock is released.
        """
        self._check_target(profile)
        reserve_bytes = self._reserve_bytes(reserve_gb)
        with self._locked():
            relay = TokenRelay(settings.max_new_tokens, progress, on_token, self._clock)
            with self._serving(
                profile,
                snapshot_path,
                reserve_bytes,
                keep_loaded=keep_loaded,
                progress=progress,
                prompt_id=prompt_id,
            ) as served:
                relay.start()
                answer = generate_answer(profile, served.backend, inputs, settings, relay)
                measured_seconds = max(0.0, self._clock() - relay.started)
                runtime = served.backend.runtime_metadata()
            metadata = build_metadata(
                target=self.target.value,
                profile=profile,
                inputs=inputs,
                settings=settings,
                result=answer.result,
                parsed=answer.parsed,
                relay=relay,
                measured_generation_seconds=measured_seconds,
                runtime=runtime,
                facts=self._facts(served, reserve_bytes, keep_loaded, prompt_id),
            )
            metadata = metadata.replace(schema=answer.schema_facts())
            self._served += 1
            tokens = metadata.generation.output_tokens
            progress(done_event(f"Done: {tokens} tokens", metadata))
            return InferenceResult(
                response=answer.parsed.response,
                reasoning=answer.parsed.reasoning,
                metadata=metadata,
            )

    def run_batch(
        self,
        profile: ModelProfile,
        snapshot_path: Path,
        items: Sequence[BatchItem],
        *,
        reserve_gb: float | None = None,
        keep_loaded: bool = True,
        progress: ProgressCallback = ignore_progress,
        on_token: BatchTokenCallback | None = None,
        prompt_id: str | None = None,
    ) -> list[InferenceResult]:
        """Serve several requests under one admission and load, batched where the engine can.

        As :meth:`run` for each item (admission, memory checks, reasoning split,
        schema validation and retry, metadata), except: a backend that is a
        :class:`BatchBackend` and accepts the items generates them together
        (any other, one at a time; see ``_batch``); ``progress`` gets GENERATE
        events counting the whole batch's tokens and one DONE; ``on_token``
        gets (item index, token id, that item's text so far) and may raise to
        cancel every item. Each item's metadata adds ``batched``,
        ``batch_size``, ``batch_index``, ``batch_items`` and ``batch_seconds``.

        Returns:
            One result per item, in order.

        Raises:
            ValueError: When ``items`` is empty.
        """
        if not items:
            raise ValueError("run_batch needs at least one item; got none")
        self._check_target(profile)
        reserve_bytes = self._reserve_bytes(reserve_gb)
        with self._locked(), batch_scope():
            with self._serving(
                profile,
                snapshot_path,
                reserve_bytes,
                keep_loaded=keep_loaded,
                progress=progress,
                prompt_id=prompt_id,
            ) as served:
                relay = BatchRelay.for_items(items, progress, on_token, self._clock)
                answers = generate_batch_answers(profile, served.backend, items, relay)
                batch_seconds = max(0.0, self._clock() - relay.started)
                runtime = served.backend.runtime_metadata()
            results = batch_results(
                target=self.target.value,
                profile=profile,
                items=items,
                answers=answers,
                relay=relay,
                batch_seconds=batch_seconds,
                runtime=runtime,
                facts=self._facts(served, reserve_bytes, keep_loaded, prompt_id),
            )
            self._served += len(items)
            tokens = sum(r.metadata.generation.output_tokens for r in results)
            progress(
                done_event(
                    f"Done: {len(items)} answers, {tokens} tokens",
                    results[-1].metadata,
                    tokens=tokens,
                    seconds=batch_seconds,
                )
            )
            return results

    @contextlib.contextmanager
    def _serving(
        self,
        profile: ModelProfile,
        snapshot_path: Path,
        reserve_bytes: int,
        *,
        keep_loaded: bool,
        progress: ProgressCallback,
        prompt_id: str | None,
    ) -> Iterator[Served]:
        """Admit and load (or reuse, or rebuild) the model; unload or announce it after."""
        cold: Resident | None = None
        try:
            entry, status, admission = self._residents.ensure_loaded(
                profile, snapshot_path, reserve_bytes, self.max_resident, progress
            )
            if rebuild_needed(entry.backend, prompt_id, progress):
                # the old engine's memory may lag its unload: admission polls for it, and
                # a recovery that times out flags the process (a Modal worker retires, the
                # dispatcher retries on a fresh container carrying the promotion)
                self._residents.unload(profile.profile_id)
                entry, status, admission = self._residents.ensure_loaded(
                    profile,
                    snapshot_path,
                    reserve_bytes,
                    self.max_resident,
                    progress,
                    released=(profile.profile_id,),
                )
                rebuild_needed(entry.backend, prompt_id, progress)
            cold = entry if status == "cold" else None
            yield Served(entry, status, admission)
        finally:
            if not keep_loaded and profile.profile_id in self._residents:
                self._residents.unload(profile.profile_id)
            elif not self._residents.usable(profile.profile_id):
                self._residents.unload(profile.profile_id)  # a dead engine: the next run reloads
            elif cold is not None and profile.profile_id in self._residents:
                self._residents.announce(cold)

    def _facts(
        self, served: Served, reserve_bytes: int, keep_loaded: bool, prompt_id: str | None
    ) -> RequestFacts:
        entry, cold, admission = served.entry, served.cache_status == "cold", served.admission
        return RequestFacts(
            cache_status=served.cache_status,
            load_seconds=entry.load_seconds if cold else 0.0,
            host_eviction_reason=entry.host_eviction_reason if cold else None,
            allocated_bytes=entry.allocated_bytes,
            reserve_bytes=reserve_bytes,
            evicted_profiles=admission.evicted_profiles if admission else (),
            memory_wait_seconds=admission.waited_seconds if admission else 0.0,
            memory=read_memory(self._residents.probe, admission),
            resident_profiles=self._residents.ids,
            max_resident=self.max_resident,
            unsafe_for_reuse=self._residents.unsafe,
            keep_loaded=keep_loaded,
            prompt_id=prompt_id,
        )
