"""Deciding a GGUF model (and its vision projector) for a target: no config.json, the header.

A GGUF carries what a decision needs in its own header, read and checked by
``_gguf_rules`` before this runs: the llama.cpp architecture, the file type
(the quantization), layer and head counts (the KV cache), the context it was
trained for, and, for the projector, its type. The family is the one whose
``Family.gguf`` names the (architecture, projector type) pair as llama.cpp's
converter writes it; the family's Transformers architecture stands for it in
the profile (the reasoning parser and chat-template options key on it), and
the GGUF's own names go in the backend options.

Modalities are the family's less what llama.cpp cannot take: no video
(libmtmd has no video input), no images without a projector.

Memory: the GGUF engine's own terms (``EngineSpec.memory_terms``: the
tensors as stored, an f16 KV cache for the configured context, the compute
buffers), fed from a config-like view of the header so the limits and the
KV formula are the ones every decision uses (``_decide``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from comfy_llm_core import ExecutionTarget

from comfy_llm_profiles._decide import (
    CompatibilityDecision,
    _engine_facts,
    _limits,
    available_backends,
)
from comfy_llm_profiles._families import FAMILIES
from comfy_llm_profiles._gguf_rules import GgufModel, GgufProjector
from comfy_llm_profiles._quantization import QuantizationInfo
from comfy_llm_profiles._refusals import Where, unsupported_architecture, unsupported_quantization
from comfy_llm_profiles._registry import ArchitectureRule, registry_for
from comfy_llm_profiles.errors import (
    EngineUnavailableError,
)

__all__ = ["GGUF_DTYPE", "decide_gguf", "gguf_pair_label"]

GGUF_DTYPE = "gguf"
"""A GGUF profile's ``dtype``: the file's tensors keep their own types (see ``quantization``)."""
_LLAMA_CPP_MODALITIES = ("text", "file")
"""What llama.cpp reads of a family's modalities beside images (with a projector only):
no video, and a new modality only once its libmtmd mapping is in."""


def _engine_unavailable(where: Where, engine: str, install_hint: str) -> EngineUnavailableError:
    repository, revision, target = where
    return EngineUnavailableError(
        f"{repository!r} needs the {engine} engine, which is not installed in this Python "
        f"(target {target!r}). Install it: {install_hint}, then restart.",
        repository=repository,
        revision=revision,
        target=target,
        engine=engine,
        install_hint=install_hint,
    )


def gguf_pair_label(architecture: str, projector_type: str) -> str:
    """``llama + idefics3`` / ``qwen35 (no projector)``: a GGUF pair as messages name it."""
    return f"{architecture} + {projector_type}" if projector_type else f"{architecture} (text only)"


def _reviewed_pairs() -> list[str]:
    return sorted({gguf_pair_label(a, p) for f in FAMILIES.values() for a, p, _ in f.gguf})


def _rule(
    target: ExecutionTarget, architecture: str, projector_type: str
) -> tuple[ArchitectureRule, str] | None:
    """The target's rule of the family that reviewed this GGUF pair, and its architecture."""
    registry = registry_for(target)
    for rule in registry.rules:
        for gguf_arch, gguf_projector, hf_arch in rule.record.gguf:
            if (gguf_arch, gguf_projector) == (architecture, projector_type) and (
                rule.model_type_for(hf_arch) is not None
            ):
                return rule, hf_arch
    return None


def _config_view(model: GgufModel) -> dict[str, int]:
    """The header's sizes under config.json's names, for ``_limits`` and the KV formula."""
    arch, meta = model.architecture, model.file
    view = {"num_hidden_layers": model.layers, "hidden_size": model.embedding_width}
    for key, name in (
        ("max_position_embeddings", f"{arch}.context_length"),
        ("num_attention_heads", f"{arch}.attention.head_count"),
        ("num_key_value_heads", f"{arch}.attention.head_count_kv"),
        ("head_dim", f"{arch}.attention.key_length"),
        ("full_attention_interval", f"{arch}.full_attention_interval"),
    ):
        value = meta.integer(name)
        if value is not None and value > 0:
            view[key] = value
    return view


def decide_gguf(
    target: ExecutionTarget | str,
    model: GgufModel,
    projector: GgufProjector | None,
    *,
    repository: str = "",
    revision: str | None = None,
    backends: Collection[str] | None = None,
) -> CompatibilityDecision:
    """Judge a checked GGUF model (and projector) against the target's registry.

    Args:
        target: The execution target.
        model: The checked model file (``check_model_file``).
        projector: Its checked projector, None for a text-only model.
        repository: For messages.
        revision: For messages.
        backends: Engines usable here; None asks the installation.

    Raises:
        UnsupportedArchitectureError: No family reviewed this GGUF pair on the target.
        UnsupportedQuantizationError: The file type is unknown or not reviewed.
        EngineUnavailableError: llama-cpp-python is not installed here.
    """
    target = ExecutionTarget(target)
    registry = registry_for(target)
    where = (repository, revision, target.value)
    projector_type = projector.projector_type if projector is not None else ""
    found = _rule(target, model.architecture, projector_type)
    if found is None:
        pair = gguf_pair_label(model.architecture, projector_type)
        others = [t.value for t in ExecutionTarget if _rule(t, model.architecture, projector_type)]
        raise unsupported_architecture(
            where,
            architecture=f"GGUF {pair}",
            supported=_reviewed_pairs(),
            other_targets=others,
            registry_version=registry.version,
        )
    rule, architecture = found
    engine = next((e for e in rule.backends if e.weight_format == "gguf"), None)
    if engine is None:  # pragma: no cover - a family with GGUF pairs lists a GGUF engine
        raise _engine_unavailable(where, "GGUF", "")
    usable = available_backends(target) if backends is None else frozenset(backends)
    if engine.name not in usable:
        raise _engine_unavailable(where, engine.label, engine.install_hint)
    method = model.quantization or "unknown"
    if not rule.accepts(engine, method):
        reviewed = rule.record.quantizations
        raise unsupported_quantization(
            where,
            quantization=method,
            allowed=[q for q in engine.quantizations if reviewed is None or q in reviewed],
            advice="Pick another GGUF file of the model (Q4_K_M is the usual choice).",
        )
    config = _config_view(model)
    modalities = tuple(
        m
        for m in rule.modalities
        if m in _LLAMA_CPP_MODALITIES or (m == "image" and projector is not None)
    )
    base = _limits(config, registry, rule, None).for_modalities(modalities)
    video = dataclasses.replace(base.media.video, allow_mixed_image_video=False)
    limits = dataclasses.replace(base, media=dataclasses.replace(base.media, video=video))
    weight_bytes = model.weight_bytes + (projector.weight_bytes if projector else 0)
    quantization = QuantizationInfo(method=method, description=f"GGUF {method}")
    facts = dataclasses.replace(
        _engine_facts(
            config, weight_bytes, limits, registry, dtype=GGUF_DTYPE, quantization=quantization
        ),
        runtime_weight_bytes=weight_bytes,
    )
    options: dict[str, str | int | float | bool] = {
        "gguf_file": model.path.name,
        "gguf_architecture": model.architecture,
    }
    if projector is not None:
        options |= {"mmproj_file": projector.path.name, "projector_type": projector_type}
    options |= rule.options_for(engine.name)
    terms = engine.memory_terms(facts, options) if engine.memory_terms else {}
    options |= {f"memory_{term}_bytes": value for term, value in terms.items()}
    return CompatibilityDecision(
        target=target,
        registry_version=registry.version,
        backend=engine.name,
        architecture=architecture,
        model_type=str(rule.model_type_for(architecture)),
        dtype=GGUF_DTYPE,
        quantization=quantization,
        modalities=modalities,
        limits=limits,
        reasoning_parser=rule.reasoning_parser,
        backend_options=tuple(sorted(options.items())),
        estimated_memory_bytes=sum(terms.values()),
        weight_bytes=weight_bytes,
        family=rule.family,
        advertised_context_tokens=model.context_tokens,
        runtime_requirements=engine.requirements,
    )
