"""Turning a config.json into a compatibility decision and a profile.

Everything here is pure (no network, no files) so the same code judges a
freshly inspected repository and a curated entry, and tests can drive every
branch with a dict.

Memory estimate (bytes), documented because residency admits or refuses
loads by it::

    runtime_weights = weight_bytes x dtype_factor
        (dtype_factor = 2 when a 16-bit checkpoint runs in float32 on the CPU, else 1)
    kv_cache = 2 (K and V) x attention_layers x kv_heads x head_dim
               x kv_element_bytes x context_tokens
        (attention_layers counts only full-attention layers when
         text_config.layer_types, full_attn_idxs or full_attention_interval
         says so, e.g. Qwen3.5's hybrid layout or LFM2's convolutions;
         sliding-window layers (layer_types, Gemma 3's sliding_window_pattern)
         count min(sliding_window, context_tokens) tokens;
         sizes the checkpoint leaves to its config class come from
         _config_defaults; 0 when they are still missing)
    estimate = ceil(runtime_weights x weight_overhead) + kv_cache + activation_bytes

A quantization applied at load (``owner/model:nf4``, ``:int8``) replaces
runtime_weights with the quantized layers' bytes plus the embeddings kept at
the runtime dtype (:func:`._load_quantization.quantized_weight_bytes`, which
cites the bitsandbytes source for its per-weight figures).

with weight_overhead, kv_element_bytes and activation_bytes from the
target's :class:`TargetPolicy`. An engine with memory terms of its own
(``EngineSpec.memory_terms``; vLLM's: weights, KV, activation peak,
CUDA-graph pool, CUDA context, :mod:`._vllm_memory`) gets their sum instead,
each term kept in its backend options as ``memory_<term>_bytes``.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from comfy_llm_core import ExecutionTarget

from comfy_llm_profiles._config_defaults import with_class_defaults
from comfy_llm_profiles._decide_load import load_engine
from comfy_llm_profiles._engines import ENGINES, EngineFacts, EngineSpec
from comfy_llm_profiles._kv_cache import kv_cache_bytes, positive_int, text_config
from comfy_llm_profiles._load_quantization import (
    LOAD_QUANTIZATIONS,
    LoadQuantization,
    quantized_weight_bytes,
)
from comfy_llm_profiles._profile import ModelProfile, ProfileLimits
from comfy_llm_profiles._quantization import QuantizationInfo, detect_quantization
from comfy_llm_profiles._refusals import (
    check_remote_code,
    quantization_advice,
    refuse_architecture,
    unsupported_quantization,
)
from comfy_llm_profiles._registry import (
    ArchitectureRule,
    CompatibilityRegistry,
    known_architectures,
    registry_for,
)
from comfy_llm_profiles.errors import InvalidConfigError

__all__ = ["CompatibilityDecision", "available_backends", "decide", "estimate_memory_bytes"]

_SIXTEEN_BIT = frozenset({"bfloat16", "float16"})


@dataclass(frozen=True, slots=True)
class CompatibilityDecision:
    """What a target's registry decided for one checkpoint.

    Attributes:
        target: The execution target.
        registry_version: The registry version that decided.
        backend: The chosen backend.
        architecture: ``architectures[0]`` of config.json.
        model_type: ``model_type`` of config.json.
        dtype: The checkpoint's declared dtype (``auto`` when undeclared).
        quantization: The detected quantization.
        modalities: Accepted inputs.
        limits: Input bounds.
        reasoning_parser: ``qwen3`` or ``none``.
        backend_options: Options for the backend.
        estimated_memory_bytes: See the module docstring for the formula.
        weight_bytes: Total safetensors bytes.
        family: The registry family that accepted the architecture.
        advertised_context_tokens: ``max_position_embeddings``, None if undeclared.
        runtime_requirements: The chosen backend's pinned engine requirements.
    """

    target: ExecutionTarget
    registry_version: str
    backend: str
    architecture: str
    model_type: str
    dtype: str
    quantization: QuantizationInfo
    modalities: tuple[str, ...]
    limits: ProfileLimits
    reasoning_parser: str
    backend_options: tuple[tuple[str, str | int | float | bool], ...]
    estimated_memory_bytes: int
    weight_bytes: int
    family: str = ""
    advertised_context_tokens: int | None = None
    runtime_requirements: tuple[str, ...] = ()

    def to_profile(
        self,
        repository: str,
        revision: str,
        *,
        requested_revision: str | None = None,
        display_name: str = "",
        local_path: str | None = None,
    ) -> ModelProfile:
        """Build the immutable profile for ``repository`` pinned at ``revision``.

        With ``local_path`` it is a local folder's profile (``source: local``,
        ``revision`` its content pin).

        Raises:
            ProfileValidationError: ``revision`` is not a 40-hex commit (a
                64-hex content pin for a local folder).
        """
        return ModelProfile(
            repository=repository,
            revision=revision,
            requested_revision=requested_revision,
            execution_target=self.target,
            backend=self.backend,
            architecture=self.architecture,
            model_type=self.model_type,
            dtype=self.dtype,
            quantization_method=self.quantization.method,
            modalities=self.modalities,
            limits=self.limits,
            reasoning_parser=self.reasoning_parser,
            backend_options=self.backend_options,
            estimated_memory_bytes=self.estimated_memory_bytes,
            weight_bytes=self.weight_bytes,
            registry_version=self.registry_version,
            display_name=display_name or repository,
            advertised_context_tokens=self.advertised_context_tokens,
            runtime_requirements=self.runtime_requirements,
            source="hub" if local_path is None else "local",
            local_path=local_path,
        )


def available_backends(target: ExecutionTarget) -> frozenset[str]:
    """Engines a target can use from this process.

    An engine that is an optional extra on ``target`` (``EngineSpec.optional_on``:
    vLLM on ``local_cuda``) counts only when importable, checked without
    importing it; every other engine counts.
    """
    return frozenset(name for name, spec in ENGINES.items() if spec.available(target))


def _dtype(config: Mapping[str, Any]) -> str:
    for source in (config, text_config(config)):
        for key in ("dtype", "torch_dtype"):
            value = source.get(key)
            if isinstance(value, str) and value:
                return value.removeprefix("torch.")
    return "auto"


def _architecture(config: Mapping[str, Any], invalid: Any) -> tuple[str, str]:
    architectures = config.get("architectures")
    if (
        not isinstance(architectures, list)
        or not architectures
        or not all(isinstance(a, str) and a for a in architectures)
    ):
        raise invalid("'architectures' must be a non-empty list of names")
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise invalid("'model_type' is missing")
    return architectures[0], model_type


def estimate_memory_bytes(
    config: Mapping[str, Any],
    weight_bytes: int,
    context_tokens: int,
    registry: CompatibilityRegistry,
    dtype: str,
    *,
    load_quantization: str | None = None,
) -> int:
    """Estimate the memory a loaded model needs (formula in the module docstring).

    Args:
        config: The parsed config.json.
        weight_bytes: Total safetensors bytes.
        context_tokens: The configured context.
        registry: The target's registry (its policy holds the factors).
        dtype: The checkpoint's declared dtype.
        load_quantization: A quantization applied at load (``bnb_nf4``), or None.

    Returns:
        The estimate in bytes.
    """
    policy = registry.policy
    config = with_class_defaults(config)
    load = None if load_quantization is None else LOAD_QUANTIZATIONS[load_quantization]
    runtime = _runtime_weights(config, weight_bytes, registry, dtype, load)
    weights = math.ceil(runtime * policy.weight_overhead)
    return (
        weights
        + kv_cache_bytes(config, context_tokens, policy.kv_element_bytes)
        + policy.activation_bytes
    )


def _runtime_weights(
    config: Mapping[str, Any],
    weight_bytes: int,
    registry: CompatibilityRegistry,
    dtype: str,
    load: LoadQuantization | None,
) -> int:
    policy = registry.policy
    if load is not None:
        return quantized_weight_bytes(
            config,
            weight_bytes,
            checkpoint_dtype=dtype,
            runtime_dtype=policy.runtime_dtype,
            quantization=load,
        )
    factor = 2 if policy.runtime_dtype == "float32" and dtype in _SIXTEEN_BIT else 1
    return weight_bytes * factor


def _limits(
    config: Mapping[str, Any],
    registry: CompatibilityRegistry,
    rule: ArchitectureRule,
    overrides: Mapping[str, int | bool] | None,
) -> ProfileLimits:
    policy = registry.policy
    declared = positive_int(config, "max_position_embeddings")
    context = min(declared or policy.default_context, policy.context_cap)
    if overrides:
        # Reviewed limits (curated entries) replace the policy's, but a context is never
        # configured beyond what the checkpoint itself advertises.
        reviewed: dict[str, Any] = dict(overrides)
        if declared and "context_tokens" in reviewed:
            reviewed["context_tokens"] = min(int(reviewed["context_tokens"]), declared)
        return ProfileLimits.of(**{**_limits(config, registry, rule, None).to_dict(), **reviewed})
    return ProfileLimits.of(
        context_tokens=context,
        max_images=policy.max_images,
        max_video_frames=policy.max_video_frames,
        max_file_bytes=policy.max_file_bytes,
        max_total_file_bytes=policy.max_total_file_bytes,
        max_file_characters=min(policy.max_file_characters, 4 * context),
        max_pdf_pages=policy.max_pdf_pages,
        allow_mixed_image_video=rule.allow_mixed_image_video,
    ).for_modalities(rule.modalities)


def _capped(limits: ProfileLimits, rule: ArchitectureRule) -> ProfileLimits:
    """The family's reviewed caps applied (a value above a cap is lowered to it)."""
    flat = limits.to_dict()
    caps = {name: min(flat[name], cap) for name, cap in rule.record.limits}
    return ProfileLimits.of(**{**flat, **caps}) if caps else limits


def _engine_facts(
    config: Mapping[str, Any],
    weight_bytes: int,
    limits: ProfileLimits,
    registry: CompatibilityRegistry,
    *,
    dtype: str,
    quantization: QuantizationInfo,
    load: LoadQuantization | None = None,
) -> EngineFacts:
    policy = registry.policy
    return EngineFacts(
        config=config,
        context_tokens=limits.context_tokens,
        max_images=limits.media.image.max_images,
        quantization=quantization.method,
        runtime_dtype=policy.runtime_dtype,
        device=policy.device,
        kv_element_bytes=policy.kv_element_bytes,
        runtime_weight_bytes=_runtime_weights(config, weight_bytes, registry, dtype, load),
        attention_kv_bytes=kv_cache_bytes(config, limits.context_tokens, policy.kv_element_bytes),
    )


def _options(
    engine: EngineSpec, rule: ArchitectureRule, facts: EngineFacts
) -> dict[str, str | int | float | bool]:
    options: dict[str, str | int | float | bool] = {"trust_remote_code": False}
    return options | engine.options(facts) | rule.options_for(engine.name)


def decide(
    target: ExecutionTarget | str,
    config: Mapping[str, Any],
    *,
    weight_bytes: int,
    repository: str = "",
    revision: str | None = None,
    backends: Collection[str] | None = None,
    limit_overrides: Mapping[str, int | bool] | None = None,
    load_quantization: str | None = None,
) -> CompatibilityDecision:
    """Judge a config.json against the target's registry.

    Args:
        target: The execution target.
        config: The parsed config.json.
        weight_bytes: Total safetensors bytes (for the memory estimate).
        repository: For error messages.
        revision: For error messages.
        backends: Backends usable here; None asks :func:`available_backends`.
        limit_overrides: Reviewed :class:`ProfileLimits` values (a curated
            entry's) that replace the policy's; the context stays within the
            checkpoint's advertised one.
        load_quantization: A quantization the engine applies while loading
            (``bnb_int8``, ``bnb_nf4``; a reference's ``:int8``/``:nf4``), or None.
            The decision's quantization is then that name.

    Returns:
        The decision.

    Raises:
        InvalidConfigError: config.json lacks ``architectures`` or ``model_type``,
            or they do not match each other.
        RemoteCodeError: ``auto_map`` / ``trust_remote_code`` / ``model_file`` is
            set, or the architecture is built into no engine (custom architecture).
        UnreviewedArchitectureError: Transformers builds the architecture in,
            but no reviewed family has it (not reviewed yet, or reviewed and
            refused for a named reason).
        UnsupportedArchitectureError: Another target accepts it, this one not.
        UnsupportedQuantizationError: The format is unknown or not allowed here;
            or a load quantization is asked for a quantized checkpoint, on a
            target that does not take it, or for a family no engine here quantizes.
    """
    target = ExecutionTarget(target)
    registry = registry_for(target)
    where = (repository, revision, target.value)

    def invalid(problem: str) -> InvalidConfigError:
        return InvalidConfigError(*where, problem)

    if not isinstance(config, Mapping):
        raise invalid("it is not a JSON object")
    check_remote_code(config, where)
    architecture, model_type = _architecture(config, invalid)
    config = with_class_defaults(config)
    rule = registry.rule_for(architecture)
    if rule is None:
        known = architecture in known_architectures()
        refuse_architecture(architecture, registry, where, known=known)
    expected_type = rule.model_type_for(architecture)
    if model_type != expected_type:
        raise invalid(
            f"model_type {model_type!r} does not match {architecture} (expected {expected_type!r})"
        )
    quantization = detect_quantization(config)
    usable = available_backends(target) if backends is None else frozenset(backends)
    # A config.json checkpoint is safetensors; GGUF engines decide GGUF files (_decide_gguf).
    candidates = [c for c in rule.backends if c.name in usable and c.weight_format == "safetensors"]
    load = None
    choice: EngineSpec | None
    if load_quantization is not None:
        load = LOAD_QUANTIZATIONS[load_quantization]
        choice = load_engine(
            load,
            quantization=quantization,
            registry=registry,
            rule=rule,
            candidates=candidates,
            where=where,
        )
        quantization = QuantizationInfo(load.name, load.label)
    else:
        choice = next((c for c in candidates if rule.accepts(c, quantization.method)), None)
    if choice is None:
        reviewed = rule.record.quantizations
        allowed = sorted(
            {q for c in candidates for q in c.quantizations if reviewed is None or q in reviewed}
        ) or ["none"]
        label = (
            quantization.method if quantization.known else f"unknown ({quantization.description})"
        )
        raise unsupported_quantization(
            where,
            quantization=label,
            allowed=allowed,
            advice=quantization_advice(registry, rule, usable, quantization),
        )
    dtype = _dtype(config)
    limits = _capped(_limits(config, registry, rule, limit_overrides), rule)
    facts = _engine_facts(
        config, weight_bytes, limits, registry, dtype=dtype, quantization=quantization, load=load
    )
    options = _options(choice, rule, facts)
    estimate = estimate_memory_bytes(
        config,
        weight_bytes,
        limits.context_tokens,
        registry,
        dtype,
        load_quantization=load_quantization,
    )
    if choice.memory_terms is not None:
        terms = choice.memory_terms(facts, options)
        options |= {f"memory_{term}_bytes": value for term, value in terms.items()}
        estimate = sum(terms.values())
    return CompatibilityDecision(
        target=target,
        registry_version=registry.version,
        backend=choice.name,
        architecture=architecture,
        model_type=model_type,
        dtype=dtype,
        quantization=quantization,
        modalities=rule.modalities,
        limits=limits,
        reasoning_parser=rule.reasoning_parser,
        backend_options=tuple(sorted(options.items())),
        estimated_memory_bytes=estimate,
        weight_bytes=weight_bytes,
        family=rule.family,
        advertised_context_tokens=positive_int(config, "max_position_embeddings"),
        runtime_requirements=choice.requirements,
    )
