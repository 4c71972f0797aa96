"""The JSON-ready telemetry of one request.

The node adds its ComfyUI-specific keys (managed model names, node id)
later. Nothing here ever carries a token or secret: the manager never sees
one, and keys from a backend's runtime metadata that look like credentials
are dropped.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._json import json_ready
from ._memory import MemorySnapshot
from ._run_metadata import (
    MANAGER_KEYS,
    EngineReport,
    GenerationFacts,
    InputCounts,
    ModelFacts,
    ResidencyFacts,
    RunMetadata,
)

if TYPE_CHECKING:
    from comfy_llm_inputs import PreparedInputs
    from comfy_llm_profiles import ModelProfile
    from comfy_llm_reasoning import ReasoningResult

    from ._generation import TokenRelay
    from .backend import BackendResult, GenerationSettings

_SECRET_KEY = re.compile(
    r"(^|[_\-.])(token|secret|password|passwd|api_?key|authorization|auth|credentials?)($|[_\-.])",
    re.IGNORECASE,
)
_SECRET_VALUE = re.compile(r"^(hf_|Bearer\s)[A-Za-z0-9_\-.]{16,}$")


def safe_runtime_metadata(runtime: Mapping[str, object]) -> dict[str, Any]:
    """Drop credential-looking keys and values from a backend's runtime metadata.

    Args:
        runtime: What ``Backend.runtime_metadata()`` returned.

    Returns:
        The JSON-ready remainder.
    """
    clean: dict[str, Any] = {}
    for key, value in runtime.items():
        name = str(key)
        if _SECRET_KEY.search(name):
            continue
        if isinstance(value, str) and _SECRET_VALUE.match(value.strip()):
            continue
        clean[name] = json_ready(value)
    return clean


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


@dataclasses.dataclass(frozen=True, slots=True)
class RequestFacts:
    """What the manager learned while serving one request.

    Attributes:
        cache_status: ``"warm"`` or ``"cold"``.
        load_seconds: Load time of this request (0.0 on a warm hit).
        host_eviction_reason: Why the host unloaded this model before this
            cold load, or None when the host did not.
        allocated_bytes: Memory drop measured across the model's load.
        reserve_bytes: The reserve admission kept free.
        evicted_profiles: Profiles unloaded for this request.
        memory_wait_seconds: Time admission polled for memory.
        memory: A reading taken after the request.
        resident_profiles: Resident profile ids after the request, LRU order.
        max_resident: The manager's LRU limit.
        unsafe_for_reuse: The manager's flag after the request.
        keep_loaded: Whether the caller asked to keep the model loaded.
        prompt_id: The workflow's prompt id, or None.
    """

    cache_status: str
    load_seconds: float
    allocated_bytes: int | None
    reserve_bytes: int
    evicted_profiles: tuple[str, ...]
    memory_wait_seconds: float
    memory: MemorySnapshot
    resident_profiles: tuple[str, ...]
    max_resident: int
    unsafe_for_reuse: bool
    keep_loaded: bool
    prompt_id: str | None
    host_eviction_reason: str | None = None


def build_metadata(
    *,
    target: str,
    profile: ModelProfile,
    inputs: PreparedInputs,
    settings: GenerationSettings,
    result: BackendResult,
    parsed: ReasoningResult,
    relay: TokenRelay,
    measured_generation_seconds: float,
    runtime: Mapping[str, object],
    facts: RequestFacts,
) -> RunMetadata:
    """The manager's sections of the request's metadata.

    Backend runtime metadata becomes the engine's details, except keys the
    manager writes itself; its ``device`` is the engine's device.

    Args:
        target: The manager's execution target.
        profile: The profile that served the request.
        inputs: The prepared inputs (for the counts).
        settings: The request settings.
        result: The backend's raw result.
        parsed: The reasoning parser's result.
        relay: The token relay (where time to first token and decode rate are measured).
        measured_generation_seconds: Generation wall time measured by the manager.
        runtime: ``Backend.runtime_metadata()``.
        facts: What the manager learned serving the request.

    Returns:
        The record (no Modal, staging or host sections yet).
    """
    timings = result.timings
    generation_seconds = timings.generation_seconds or measured_generation_seconds
    clean_runtime = safe_runtime_metadata(runtime)
    return RunMetadata(
        model=ModelFacts(
            execution_target=target,
            backend=json_ready(profile.backend),
            profile_id=profile.profile_id,
            repository=profile.repository,
            revision=profile.revision,
            architecture=json_ready(profile.architecture),
        ),
        engine=EngineReport(
            device=clean_runtime.get("device") or facts.memory.device,
            details={k: v for k, v in clean_runtime.items() if k not in MANAGER_KEYS},
        ),
        generation=GenerationFacts(
            settings=settings,
            reasoning_parser=parsed.parser,
            reasoning_truncated=parsed.truncated,
            output_tokens=parsed.output_tokens,
            reasoning_tokens=parsed.reasoning_tokens,
            token_accounting=parsed.accounting,
            prompt_tokens=timings.prompt_tokens,
            finish_reason=result.finish_reason,
            time_to_first_token_seconds=_round(relay.timing.time_to_first_token_seconds),
            tokens_per_second=_round(relay.timing.tokens_per_second, 2),
            generation_seconds=_round(generation_seconds),
        ),
        residency=ResidencyFacts(
            cache_status=facts.cache_status,
            load_seconds=_round(facts.load_seconds),
            measured_allocation_bytes=facts.allocated_bytes,
            estimated_memory_bytes=profile.estimated_memory_bytes,
            reserve_bytes=facts.reserve_bytes,
            memory_device=facts.memory.device,
            available_memory_bytes=facts.memory.available_bytes,
            total_memory_bytes=facts.memory.total_bytes,
            memory_wait_seconds=_round(facts.memory_wait_seconds),
            evicted_profiles=tuple(facts.evicted_profiles),
            host_eviction_reason=facts.host_eviction_reason,
            resident_profiles=tuple(facts.resident_profiles),
            max_resident_models=facts.max_resident,
            keep_model_loaded=facts.keep_loaded,
            unsafe_for_reuse=facts.unsafe_for_reuse,
        ),
        inputs=InputCounts(inputs.counts()),
        prompt_id=facts.prompt_id,
    )
