"""Which engine applies a quantization asked for at load, or why none may (``owner/model:nf4``).

Kept beside ``_decide`` because the choice differs from a checkpoint format's:
the checkpoint must be unquantized, the target must take the quantization
(``TargetPolicy.load_quantizations``: where its library runs and ships) and
the engine must apply it (``EngineSpec.load_quantizations``).
"""

from __future__ import annotations

from comfy_llm_profiles._engines import EngineSpec
from comfy_llm_profiles._load_quantization import LOAD_QUANTIZATIONS, LoadQuantization
from comfy_llm_profiles._quantization import QuantizationInfo
from comfy_llm_profiles._refusals import Where, unsupported_load_quantization
from comfy_llm_profiles._registry import ArchitectureRule, CompatibilityRegistry
from comfy_llm_profiles.errors import UnsupportedQuantizationError

__all__ = ["load_engine"]


def load_engine(
    load: LoadQuantization,
    *,
    quantization: QuantizationInfo,
    registry: CompatibilityRegistry,
    rule: ArchitectureRule,
    candidates: list[EngineSpec],
    where: Where,
) -> EngineSpec:
    """The first usable engine that applies ``load`` to this unquantized checkpoint here.

    A family that prefers vLLM on CUDA gets Transformers for it: vLLM's own
    bitsandbytes path is under deprecation (vllm-project/vllm RFC #39583) and
    not reviewed here.

    Raises:
        UnsupportedQuantizationError: The checkpoint is quantized already, the
            target does not take ``load``, or no usable engine applies it.
    """
    allowed = registry.policy.load_quantizations
    tags = [LOAD_QUANTIZATIONS[name].tag for name in allowed]

    def refuse(problem: str, fix: str) -> UnsupportedQuantizationError:
        return unsupported_load_quantization(
            where, tag=load.tag, label=load.label, allowed=tags, problem=problem, fix=fix
        )

    if quantization.method != "none":
        raise refuse(
            f"the checkpoint is already quantized ({quantization.description})",
            f"Drop ':{load.tag}' to load it as it is, or pick the unquantized original "
            "repository to quantize that as it loads.",
        )
    if load.name not in allowed:
        raise refuse(
            f"target {registry.target.value!r} does not take it", registry.load_quantization_advice
        )
    engines = [
        c for c in candidates if load.name in c.load_quantizations and rule.accepts(c, "none")
    ]
    if not engines:
        names = ", ".join(c.label for c in candidates) or "none installed"
        raise refuse(
            f"no engine of family {rule.family!r} here applies it (engines: {names})",
            f"Drop ':{load.tag}' to load the unquantized model.",
        )
    return engines[0]
