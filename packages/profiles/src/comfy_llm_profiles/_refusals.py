"""Why a model is refused: the messages of the decision's refusals, composed where they are raised.

A refusal names the value, what the target accepts and the fix. The classes
in :mod:`.errors` only carry the facts a caller reads; the words live here,
beside the checks (remote code, an architecture nobody reviewed or another
target's, a quantization the target does not take), so the Hub decision
(:mod:`._decide`) and the GGUF decision (:mod:`._decide_gguf`,
:mod:`._hub_gguf`) say the same thing the same way.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, NoReturn

from comfy_llm_core import ExecutionTarget

from comfy_llm_profiles._engines import ENGINES
from comfy_llm_profiles._families import family_of
from comfy_llm_profiles._quantization import QuantizationInfo
from comfy_llm_profiles._registry import ArchitectureRule, CompatibilityRegistry, registry_for
from comfy_llm_profiles._unreviewed import REFUSED, transformers_kind
from comfy_llm_profiles._unreviewed import catalogue as transformers_catalogue
from comfy_llm_profiles.errors import (
    GgufRepositoryError,
    RemoteCodeError,
    UnreviewedArchitectureError,
    UnsupportedArchitectureError,
    UnsupportedQuantizationError,
)

__all__ = [
    "Where",
    "check_remote_code",
    "quantization_advice",
    "refuse_architecture",
    "unsupported_architecture",
    "unsupported_load_quantization",
    "unsupported_quantization",
    "unusable_gguf_repository",
]

Where = tuple[str, "str | None", str]
"""(repository, revision, target) of the check, as every refusal names them."""


def _facts(where: Where) -> dict[str, Any]:
    repository, revision, target = where
    return {"repository": repository, "revision": revision, "target": target}


def _remote(where: Where, reason: str) -> RemoteCodeError:
    repository, revision, _ = where
    return RemoteCodeError(
        f"{repository!r} needs its own Python code to run ({reason}); comfy-llm never runs "
        "a repository's code (trust_remote_code is never enabled). Pick a repository whose "
        "architecture is built into Transformers/MLX-VLM (its config.json was read at "
        f"commit {revision}).",
        reason=reason,
        **_facts(where),
    )


def check_remote_code(config: Mapping[str, Any], where: Where) -> None:
    """Refuse a config.json that asks for code from the checkpoint.

    Raises:
        RemoteCodeError: ``auto_map`` / ``trust_remote_code`` (top level, text
            or vision config) or ``model_file`` is set.
    """
    for name, section in (
        ("", config),
        ("text_config.", config.get("text_config")),
        ("vision_config.", config.get("vision_config")),
    ):
        if isinstance(section, Mapping):
            if "auto_map" in section:
                raise _remote(where, f"{name}auto_map is set")
            if section.get("trust_remote_code") is True:
                raise _remote(where, f"{name}trust_remote_code is true")
    if "model_file" in config:
        # mlx_vlm/utils.py (get_model_and_args) imports that file from the snapshot and
        # runs it: code from the checkpoint, whatever the architecture says.
        raise _remote(where, f"model_file is set ({config['model_file']!r}: MLX-VLM would run it)")


def refuse_architecture(
    architecture: str, registry: CompatibilityRegistry, where: Where, *, known: bool
) -> NoReturn:
    """Refuse an architecture the target's registry has no rule for.

    Args:
        architecture: The architecture from config.json.
        registry: The target's registry.
        where: The check's repository, revision and target.
        known: Whether any target's registry reviewed it.

    Raises:
        RemoteCodeError: Unknown to every engine (a custom architecture).
        UnreviewedArchitectureError: Built into Transformers, reviewed by no family.
        UnsupportedArchitectureError: Reviewed, but for other targets only.
    """
    repository, _, target = where
    if not known:
        kind = transformers_kind(architecture)
        if kind is None:
            raise _remote(
                where,
                f"architecture {architecture!r} is built into no engine comfy-llm runs "
                f"(not in {transformers_catalogue()['transformers']} Transformers' auto "
                "classes), i.e. a custom architecture",
            )
        reason = REFUSED.get(architecture, "")
        why = (
            f"It was reviewed and is refused: {reason}"
            if reason
            else (
                "It is not reviewed yet (its modalities, chat template and memory terms "
                "are unchecked). To ask for it, open an issue naming the repository."
            )
        )
        reviewed = sorted({rule.family for rule in registry.rules})
        raise UnreviewedArchitectureError(
            f"Architecture {architecture!r} of {repository!r} is built into Transformers "
            f"({kind}), but comfy-llm does not run it. {why} Reviewed families run here: "
            f"{', '.join(reviewed)}.",
            architecture=architecture,
            kind=kind,
            reason=reason,
            **_facts(where),
        )
    family = family_of(architecture)
    refused = dict(family.refused_engines) if family else {}
    here = ExecutionTarget(target)
    raise unsupported_architecture(
        where,
        architecture=architecture,
        supported=registry.architectures,
        other_targets=[t.value for t in ExecutionTarget if registry_for(t).rule_for(architecture)],
        registry_version=registry.version,
        reason="; ".join(why for engine, why in refused.items() if here in ENGINES[engine].targets),
    )


def unsupported_architecture(
    where: Where,
    *,
    architecture: str,
    supported: Sequence[str],
    other_targets: Sequence[str],
    registry_version: str,
    reason: str = "",
) -> UnsupportedArchitectureError:
    """The refusal of an architecture (or GGUF pair) the target's registry does not accept."""
    repository, _, target = where
    elsewhere = f" It is supported on: {', '.join(other_targets)}." if other_targets else ""
    if reason:
        elsewhere = f" It was reviewed, but not for this machine: {reason}.{elsewhere}"
    return UnsupportedArchitectureError(
        f"Architecture {architecture!r} of {repository!r} is not supported on target "
        f"{target!r} (registry {registry_version} accepts: {', '.join(supported)})."
        f"{elsewhere} Pick a model with a supported architecture.",
        architecture=architecture,
        supported=tuple(supported),
        other_targets=tuple(other_targets),
        reason=reason,
        **_facts(where),
    )


def unsupported_quantization(
    where: Where, *, quantization: str, allowed: Sequence[str], advice: str
) -> UnsupportedQuantizationError:
    """The refusal of a quantization format the target does not take, with ``advice``."""
    repository, revision, target = where
    return UnsupportedQuantizationError(
        f"Quantization {quantization!r} of {repository!r} at {revision} is not allowed on "
        f"target {target!r} (allowed: {', '.join(allowed)}). {advice}",
        quantization=quantization,
        allowed=tuple(allowed),
        **_facts(where),
    )


def unsupported_load_quantization(
    where: Where, *, tag: str, label: str, allowed: Sequence[str], problem: str, fix: str
) -> UnsupportedQuantizationError:
    """The refusal of a quantization asked for at load (``owner/model:nf4``), with ``fix``."""
    repository, revision, target = where
    return UnsupportedQuantizationError(
        f"{label} (':{tag}') cannot load {repository!r} at {revision} on target {target!r}: "
        f"{problem} (quantizations applied at load here: {', '.join(allowed) or 'none'}). {fix}",
        quantization=tag,
        allowed=tuple(allowed),
        **_facts(where),
    )


def quantization_advice(
    registry: CompatibilityRegistry,
    rule: ArchitectureRule,
    usable: Collection[str],
    quantization: QuantizationInfo,
) -> str:
    """The target's advice, plus how to install an engine that would load the format.

    Only an engine that is not installed here but accepts the quantization is
    named; its command comes from ``install_command`` (one place for all advice).
    """
    missing = [
        c
        for c in rule.backends
        if c.name not in usable
        and c.weight_format == "safetensors"
        and rule.accepts(c, quantization.method)
    ]
    if not missing:
        return registry.quantization_advice
    spec = ENGINES[missing[0].name]
    return (
        f"{registry.quantization_advice} The {spec.label} engine loads it here once installed: "
        f"{spec.install_hint}"
    )


def unusable_gguf_repository(where: Where, problem: str) -> GgufRepositoryError:
    """The refusal of a GGUF repository this engine cannot download and verify."""
    repository, revision, _ = where
    return GgufRepositoryError(
        f"GGUF repository {repository!r} at {revision} cannot be used: {problem}. Pick "
        "another repository (one model .gguf per quantization, plus its mmproj-*.gguf); for a "
        "safetensors repository, ':nf4' or ':int8' quantizes it as it loads.",
        problem=problem,
        **_facts(where),
    )
