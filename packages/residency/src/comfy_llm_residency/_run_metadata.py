"""The answer's metadata: one typed record, one plain-data form.

Each room of a request writes its own section: the manager the model,
engine, generation, residency and input facts (and, for a batch or a
response schema, those); the Modal worker and dispatcher their ``modal_*``
facts; the node the staging and host facts. The node serializes the record
once, with :meth:`RunMetadata.to_dict`, into the flat ``metadata_json`` users
know (its keys and values are a contract: saved workflows parse them). The
Modal wire carries that same flat form, and :meth:`RunMetadata.from_dict`
reads it back, so a message from an older worker decodes as it always did.

``engine.details`` is what a backend's ``runtime_metadata()`` reported (its
own keys, credential-looking ones dropped); a key the manager writes itself
wins over the backend's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from comfy_llm_inputs import COUNT_KEYS

from ._json import json_ready
from .backend import GenerationSettings
from .errors import GIB

__all__ = [
    "MANAGER_KEYS",
    "BatchFacts",
    "EmptyAnswer",
    "EngineReport",
    "GenerationFacts",
    "HostFacts",
    "InputCounts",
    "ModalFacts",
    "ModalWorkerFacts",
    "ModelFacts",
    "ResidencyFacts",
    "RunMetadata",
    "SchemaFacts",
    "StagingFacts",
]


def _gb(num_bytes: int | None) -> float | None:
    return None if num_bytes is None else round(num_bytes / GIB, 3)


@dataclasses.dataclass(frozen=True, slots=True)
class ModelFacts:
    """Which model served the request, and for which target."""

    execution_target: str
    backend: str
    profile_id: str
    repository: str
    revision: str
    architecture: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class EngineReport:
    """The engine: the device it ran on and what its ``runtime_metadata()`` reported."""

    device: str | None
    details: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True)
class GenerationFacts:
    """The generation and its reasoning split (times rounded as reported)."""

    settings: GenerationSettings
    reasoning_parser: str
    reasoning_truncated: bool
    output_tokens: int
    reasoning_tokens: int
    token_accounting: str
    prompt_tokens: int | None
    finish_reason: str
    time_to_first_token_seconds: float | None
    tokens_per_second: float | None
    generation_seconds: float | None


@dataclasses.dataclass(frozen=True, slots=True)
class ResidencyFacts:
    """What the resident manager did and saw: cache, load, admission, memory, the LRU."""

    cache_status: str
    load_seconds: float | None
    measured_allocation_bytes: int | None
    estimated_memory_bytes: int | None
    reserve_bytes: int
    memory_device: str
    available_memory_bytes: int | None
    total_memory_bytes: int | None
    memory_wait_seconds: float | None
    evicted_profiles: tuple[str, ...]
    host_eviction_reason: str | None
    resident_profiles: tuple[str, ...]
    max_resident_models: int
    keep_model_loaded: bool
    unsafe_for_reuse: bool


@dataclasses.dataclass(frozen=True, slots=True)
class InputCounts:
    """How many of each kind of input the request carried, by metadata key.

    Attributes:
        counts: ``image_count``, ``video_frame_count``, ... ``file_count``
            (``comfy_llm_inputs.COUNT_KEYS``: one per counted part kind).
    """

    counts: Mapping[str, int]


@dataclasses.dataclass(frozen=True, slots=True)
class SchemaFacts:
    """The response schema's verdict (only with a schema)."""

    schema_valid: bool
    schema_retries: int
    constrained_decoding: bool
    schema_problem: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class BatchFacts:
    """Where a request sat in a batch (only from ``run_batch``)."""

    batched: bool
    batch_size: int
    batch_index: int
    batch_items: int
    batch_seconds: float


@dataclasses.dataclass(frozen=True, slots=True)
class ModalWorkerFacts:
    """What the Modal RemoteEngine measured around the request."""

    gpu_total_gib: float
    gpu_free_before_gib: float
    gpu_free_after_gib: float
    modal_volume_reloads: int
    modal_compile_cache_warm: bool | None
    modal_compile_cache_commit: str | None
    modal_progress_events_dropped: int
    modal_worker_seconds: float


@dataclasses.dataclass(frozen=True, slots=True)
class ModalFacts:
    """What the Modal dispatcher saw: the app, the GPU, staging there, time on the wire.

    And what the container reserves and bills beside its GPU (cores, memory, idle window).
    """

    modal_gpu: str
    modal_app_name: str
    modal_affinity_key: str
    modal_retry_count: int
    modal_staging_downloaded: bool
    modal_manifest_created: bool
    modal_stage_seconds: float
    modal_stage_reused: bool
    modal_remote_seconds: float
    modal_transfer_seconds: float
    modal_request_image_bytes: int
    modal_reserved_cpu: float
    modal_reserved_memory_mb: int
    modal_idle_window_seconds: float


@dataclasses.dataclass(frozen=True, slots=True)
class StagingFacts:
    """Where the weights came from for this request."""

    snapshot_downloaded: bool
    manifest_created: bool
    model_source: str
    snapshot_path: str
    resolved_offline: bool


@dataclasses.dataclass(frozen=True, slots=True)
class EmptyAnswer:
    """Why the answer is empty: a code, the numbers, and the face's own words."""

    reason: str
    output_tokens: int
    max_new_tokens: int
    message: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``reason``, ``output_tokens``, ``max_new_tokens`` (and ``message`` once worded)."""
        data: dict[str, Any] = {
            "reason": self.reason,
            "output_tokens": self.output_tokens,
            "max_new_tokens": self.max_new_tokens,
        }
        if self.message is not None:
            data["message"] = self.message
        return data


@dataclasses.dataclass(frozen=True, slots=True)
class HostFacts:
    """What the host (ComfyUI, the CLI) adds: its own models, why an answer is empty.

    And which comfy-llm package versions ran (distribution name to version).
    """

    comfyui_managed_models: tuple[str, ...] = ()
    empty_answer: EmptyAnswer | None = None
    comfy_llm_versions: Mapping[str, str] | None = None


MANAGER_KEYS = frozenset(
    {
        "execution_target",
        "device",
        "backend",
        "profile_id",
        "repository",
        "revision",
        "architecture",
        "reasoning_enabled",
        "reasoning_parser",
        "reasoning_truncated",
        "output_tokens",
        "reasoning_tokens",
        "token_accounting",
        "prompt_tokens",
        "finish_reason",
        "time_to_first_token_seconds",
        "tokens_per_second",
        "generation_seconds",
        "generation_settings",
        "cache_status",
        "load_seconds",
        "measured_allocation_bytes",
        "measured_allocation_gb",
        "estimated_memory_bytes",
        "estimated_memory_gb",
        "reserve_bytes",
        "reserve_gb",
        "memory_device",
        "available_memory_bytes",
        "total_memory_bytes",
        "available_memory_gb",
        "total_memory_gb",
        "memory_wait_seconds",
        "evicted_profiles",
        "evicted_by_host",
        "host_eviction_reason",
        "resident_profiles",
        "max_resident_models",
        "keep_model_loaded",
        "unsafe_for_reuse",
        "prompt_id",
        *COUNT_KEYS,
    }
)
"""The keys the manager's sections write (a backend's runtime key of the same name is dropped)."""


_OPTIONAL = {
    "schema": (SchemaFacts, ("schema_problem",)),
    "batch": (BatchFacts, ()),
    "modal_worker": (ModalWorkerFacts, ()),
    "modal": (ModalFacts, ()),
    "staging": (StagingFacts, ()),
}
"""The flat sections whose keys are their field names: (class, fields that may be absent)."""


@dataclasses.dataclass(frozen=True, slots=True)
class RunMetadata:
    """One request's metadata, section by section (see the module docstring)."""

    model: ModelFacts
    engine: EngineReport
    generation: GenerationFacts
    residency: ResidencyFacts
    inputs: InputCounts
    prompt_id: str | None = None
    schema: SchemaFacts | None = None
    batch: BatchFacts | None = None
    modal_worker: ModalWorkerFacts | None = None
    modal: ModalFacts | None = None
    staging: StagingFacts | None = None
    host: HostFacts | None = None

    def replace(self, **changes: Any) -> RunMetadata:
        """A copy with some sections (or ``prompt_id``) replaced."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The flat, JSON-ready form: ``metadata_json``'s keys and values, and the wire's."""
        model, generation, residency = self.model, self.generation, self.residency
        flat: dict[str, Any] = {
            "execution_target": model.execution_target,
            "device": self.engine.device,
            "backend": model.backend,
            "profile_id": model.profile_id,
            "repository": model.repository,
            "revision": model.revision,
            "architecture": model.architecture,
            "reasoning_enabled": generation.settings.enable_reasoning,
            "reasoning_parser": generation.reasoning_parser,
            "reasoning_truncated": generation.reasoning_truncated,
            "output_tokens": generation.output_tokens,
            "reasoning_tokens": generation.reasoning_tokens,
            "token_accounting": generation.token_accounting,
            "prompt_tokens": generation.prompt_tokens,
            "finish_reason": generation.finish_reason,
            "time_to_first_token_seconds": generation.time_to_first_token_seconds,
            "tokens_per_second": generation.tokens_per_second,
            "generation_seconds": generation.generation_seconds,
            "generation_settings": generation.settings.to_dict(),
            "cache_status": residency.cache_status,
            "load_seconds": residency.load_seconds,
            "measured_allocation_bytes": residency.measured_allocation_bytes,
            "measured_allocation_gb": _gb(residency.measured_allocation_bytes),
            "estimated_memory_bytes": residency.estimated_memory_bytes,
            "estimated_memory_gb": _gb(residency.estimated_memory_bytes),
            "reserve_bytes": residency.reserve_bytes,
            "reserve_gb": _gb(residency.reserve_bytes),
            "memory_device": residency.memory_device,
            "available_memory_bytes": residency.available_memory_bytes,
            "total_memory_bytes": residency.total_memory_bytes,
            "available_memory_gb": _gb(residency.available_memory_bytes),
            "total_memory_gb": _gb(residency.total_memory_bytes),
            "memory_wait_seconds": residency.memory_wait_seconds,
            "evicted_profiles": list(residency.evicted_profiles),
            "evicted_by_host": residency.host_eviction_reason is not None,
            "host_eviction_reason": residency.host_eviction_reason,
            "resident_profiles": list(residency.resident_profiles),
            "max_resident_models": residency.max_resident_models,
            "keep_model_loaded": residency.keep_model_loaded,
            "unsafe_for_reuse": residency.unsafe_for_reuse,
            "prompt_id": self.prompt_id,
            **self.inputs.counts,
        }
        for key, value in self.engine.details.items():
            flat.setdefault(key, value)
        if self.schema is not None:
            schema = dataclasses.asdict(self.schema)
            if schema["schema_problem"] is None:
                del schema["schema_problem"]
            flat.update(schema)
        for section in (self.batch, self.modal_worker, self.modal, self.staging):
            if section is not None:
                flat.update(dataclasses.asdict(section))
        if self.host is not None:
            flat["comfyui_managed_models"] = list(self.host.comfyui_managed_models)
            if self.host.empty_answer is not None:
                flat["empty_answer"] = self.host.empty_answer.to_dict()
            if self.host.comfy_llm_versions is not None:
                flat["comfy_llm_versions"] = dict(self.host.comfy_llm_versions)
        return json_ready(flat)  # type: ignore[no-any-return]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunMetadata:
        """Read the flat form back (a worker's answer on the Modal wire).

        Keys of no section are the engine's details, in their order.

        Raises:
            ValueError: A key every request's metadata has is missing, or a
                value has the wrong shape.
        """
        flat = dict(data)
        try:
            record = cls(
                model=ModelFacts(**_take(flat, ModelFacts)),
                engine=EngineReport(device=flat.pop("device")),
                generation=_generation(flat),
                residency=_residency(flat),
                inputs=InputCounts({key: flat.pop(key) for key in COUNT_KEYS}),
                prompt_id=flat.pop("prompt_id"),
            )
        except (KeyError, TypeError) as error:
            raise ValueError(f"Run metadata is missing or mistypes {error}") from error
        sections: dict[str, Any] = {}
        for name, (kind, optional) in _OPTIONAL.items():
            if all(f.name in flat for f in dataclasses.fields(kind) if f.name not in optional):
                sections[name] = kind(**_take(flat, kind))
        if "comfyui_managed_models" in flat:
            note = flat.pop("empty_answer", None)
            versions = flat.pop("comfy_llm_versions", None)
            sections["host"] = HostFacts(
                comfyui_managed_models=tuple(flat.pop("comfyui_managed_models")),
                empty_answer=EmptyAnswer(**note) if isinstance(note, Mapping) else None,
                comfy_llm_versions=dict(versions) if isinstance(versions, Mapping) else None,
            )
        engine = EngineReport(device=record.engine.device, details=flat)
        return dataclasses.replace(record, engine=engine, **sections)


def _take(flat: dict[str, Any], kind: type) -> dict[str, Any]:
    """Pop the keys named as ``kind``'s fields (those present)."""
    return {f.name: flat.pop(f.name) for f in dataclasses.fields(kind) if f.name in flat}


def _generation(flat: dict[str, Any]) -> GenerationFacts:
    flat.pop("reasoning_enabled")  # the settings' enable_reasoning
    fields = _take(flat, GenerationFacts)
    fields["settings"] = GenerationSettings.from_dict(flat.pop("generation_settings"))
    return GenerationFacts(**fields)


_DERIVED = (
    "measured_allocation_gb",
    "estimated_memory_gb",
    "reserve_gb",
    "available_memory_gb",
    "total_memory_gb",
    "evicted_by_host",
)


def _residency(flat: dict[str, Any]) -> ResidencyFacts:
    for key in _DERIVED:
        flat.pop(key)
    fields = _take(flat, ResidencyFacts)
    fields["evicted_profiles"] = tuple(fields["evicted_profiles"])
    fields["resident_profiles"] = tuple(fields["resident_profiles"])
    return ResidencyFacts(**fields)
