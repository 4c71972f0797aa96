"""Versioned compatibility registries, one per execution target.

A registry is the reviewed list of what a target can run: which
architectures, on which engine, with which quantization formats, and with
which input bounds. Nothing outside it runs, because every entry stands for
a combination somebody validated (see the seed's live validations). The
rules are not written per target: each is a family's record (``_families``)
narrowed to the engines that run on the target (``EngineSpec.targets``).
Any change that reaches a target's registry must bump that target's version
string below, beside the fingerprint of what the version stands for (a test
compares them, so a forgotten bump fails): the version is recorded in every
profile, so a profile decided under old rules says so.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Final

from comfy_llm_core import ExecutionTarget

from comfy_llm_profiles._engines import ENGINES, EngineSpec
from comfy_llm_profiles._families import FAMILIES, Family

__all__ = [
    "REGISTRY_VERSIONS",
    "ArchitectureRule",
    "CompatibilityRegistry",
    "TargetPolicy",
    "known_architectures",
    "registry_for",
]

_MIB = 1024**2
_GIB = 1024**3


@dataclass(frozen=True, slots=True)
class ArchitectureRule:
    """How one model family runs on one target: its record, narrowed to the target.

    Attributes:
        record: The family's reviewed record.
        architectures: ``architectures[0]`` values of config.json, each
            mapped to the ``model_type`` it must come with (the family's,
            without its MoE members where the target runs dense models only).
        backends: The family's engines that run on this target, in order of
            preference; the first one available that accepts the
            checkpoint's format wins.
    """

    record: Family
    architectures: tuple[tuple[str, str], ...]
    backends: tuple[EngineSpec, ...]

    @property
    def family(self) -> str:
        """The family's short name (``qwen3_5``, ...)."""
        return self.record.name

    @property
    def modalities(self) -> tuple[str, ...]:
        """Inputs the family accepts."""
        return self.record.modalities

    @property
    def modality_reason(self) -> str:
        """One line saying why (what was reviewed)."""
        return self.record.modality_reason

    @property
    def reasoning_parser(self) -> str:
        """``qwen3`` or ``none``."""
        return self.record.reasoning_parser

    @property
    def allow_mixed_image_video(self) -> bool:
        """Whether images and video may share a request."""
        return self.record.allow_mixed_image_video

    def model_type_for(self, architecture: str) -> str | None:
        """The model_type that must accompany ``architecture``, or None if not in this rule."""
        return dict(self.architectures).get(architecture)

    def options_for(self, backend: str) -> dict[str, str | int | float | bool]:
        """Family-specific options for ``backend``."""
        return self.record.options_for(backend)

    def accepts(self, engine: EngineSpec, quantization: str) -> bool:
        """Whether ``engine`` runs this family's checkpoints of ``quantization``."""
        reviewed = self.record.quantizations
        return quantization in engine.quantizations and (
            reviewed is None or quantization in reviewed
        )


@dataclass(frozen=True, slots=True)
class TargetPolicy:
    """Per-target numbers used for limits and the memory estimate.

    Attributes:
        context_cap: Largest context configured, whatever the model allows.
        default_context: Context used when config.json gives none.
        max_images: Most images per request.
        max_video_frames: Most sampled frames per video.
        max_file_bytes: Largest single input file.
        max_total_file_bytes: Largest total of input files.
        max_file_characters: Ceiling on extracted file text (also <= 4 x context).
        max_pdf_pages: Most PDF pages read.
        weight_overhead: Multiplier on runtime weight bytes (allocator slack,
            framework buffers).
        activation_bytes: Fixed allowance for activations and the vision encoder.
        runtime_dtype: Dtype the backend runs in, or ``auto`` for the checkpoint's.
        kv_element_bytes: Bytes per KV-cache element.
        device: ``mps``-free device string for Transformers (``cuda``/``cpu``),
            empty for other backends.
        load_quantizations: Quantizations an engine may apply while loading
            here (``_load_quantization``): where its library runs and is shipped.
    """

    context_cap: int
    default_context: int
    max_images: int
    max_video_frames: int
    max_file_bytes: int
    max_total_file_bytes: int
    max_file_characters: int
    max_pdf_pages: int
    weight_overhead: float
    activation_bytes: int
    runtime_dtype: str
    kv_element_bytes: int
    device: str
    load_quantizations: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CompatibilityRegistry:
    """The reviewed rules of one target.

    Attributes:
        target: The execution target.
        version: Bumped on any change; recorded in each profile (not hashed).
        rules: One rule per model family.
        policy: The target's numbers.
        quantization_advice: What to pick instead when a format is refused.
        load_quantization_advice: What to do instead when a load quantization
            (``:nf4``, ``:int8``) is refused here.
    """

    target: ExecutionTarget
    version: str
    rules: tuple[ArchitectureRule, ...]
    policy: TargetPolicy
    quantization_advice: str
    load_quantization_advice: str = ""

    @property
    def architectures(self) -> tuple[str, ...]:
        """Every accepted ``architectures[0]`` value, sorted."""
        return tuple(sorted(a for rule in self.rules for a, _ in rule.architectures))

    def rule_for(self, architecture: str) -> ArchitectureRule | None:
        """The rule accepting ``architecture``, or None."""
        for rule in self.rules:
            if rule.model_type_for(architecture) is not None:
                return rule
        return None

    @property
    def fingerprint(self) -> str:
        """16 hex of a digest of what :attr:`version` stands for: rules, numbers, advice."""
        rules = [
            {
                "record": dataclasses.asdict(rule.record),
                "architectures": rule.architectures,
                "engines": [
                    (
                        e.name,
                        e.quantizations,
                        e.requirements,
                        e.vram_overhead_gb,
                        e.weight_format,
                        e.load_quantizations,
                    )
                    for e in rule.backends
                ],
            }
            for rule in self.rules
        ]
        data = {
            "rules": rules,
            "policy": dataclasses.asdict(self.policy),
            "advice": self.quantization_advice,
            "load_advice": self.load_quantization_advice,
        }
        text = json.dumps(data, sort_keys=True, default=sorted)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _rules(target: ExecutionTarget, *, dense_only: bool) -> tuple[ArchitectureRule, ...]:
    """Every family with an engine on ``target``, narrowed to it (table order)."""
    rules = []
    for family in FAMILIES.values():
        engines = tuple(ENGINES[name] for name in family.engines if target in ENGINES[name].targets)
        if engines:
            architectures = tuple(
                pair
                for pair in family.architectures
                if not (dense_only and pair[0] in family.moe_architectures)
            )
            rules.append(ArchitectureRule(family, architectures, engines))
    return tuple(rules)


@dataclass(frozen=True, slots=True)
class _Target:
    """What a target's registry has of its own: version, numbers and advice.

    ``fingerprint`` is the registry's :attr:`~CompatibilityRegistry.fingerprint`
    when ``version`` was last bumped (tests compare them).
    """

    version: str
    fingerprint: str
    policy: TargetPolicy
    quantization_advice: str
    dense_only: bool = False
    load_quantization_advice: str = ""


_GPU_POLICY = TargetPolicy(
    context_cap=32768,
    default_context=4096,
    max_images=8,
    max_video_frames=32,
    max_file_bytes=32 * _MIB,
    max_total_file_bytes=64 * _MIB,
    max_file_characters=400_000,
    max_pdf_pages=200,
    weight_overhead=1.15,
    activation_bytes=int(1.5 * _GIB),
    runtime_dtype="auto",
    kv_element_bytes=2,
    device="cuda",
)
_BNB = ("bnb_int8", "bnb_nf4")
"""bitsandbytes 0.50 quantizes and runs on CUDA and on the CPU (bench/bench_bnb_cpu.py)."""

_TARGETS: Final = {
    ExecutionTarget.LOCAL_APPLE: _Target(
        version="local_apple/2026.12.4",
        fingerprint="22c2cced73d9164c",
        policy=TargetPolicy(
            context_cap=32768,
            default_context=4096,
            max_images=8,
            max_video_frames=16,
            max_file_bytes=32 * _MIB,
            max_total_file_bytes=64 * _MIB,
            max_file_characters=400_000,
            max_pdf_pages=200,
            weight_overhead=1.10,
            activation_bytes=1 * _GIB,
            runtime_dtype="auto",
            kv_element_bytes=2,
            device="",
        ),
        quantization_advice=(
            "MLX-VLM on Apple Silicon cannot run CUDA-oriented formats; pick an unquantized "
            "repository or an mlx-community conversion (e.g. mlx-community/<model>-4bit)."
        ),
        load_quantization_advice=(
            "bitsandbytes quantizes for the Transformers engine, which does not run on "
            "local_apple: drop the ':' tag, or pick an mlx-community 4-bit or 8-bit "
            "conversion (e.g. mlx-community/<model>-4bit), which MLX-VLM runs."
        ),
    ),
    ExecutionTarget.LOCAL_CUDA: _Target(
        version="local_cuda/2026.12.7",
        fingerprint="0724a667a2ab8c9d",
        policy=dataclasses.replace(_GPU_POLICY, load_quantizations=_BNB),
        quantization_advice=(
            "Pick the unquantized original repository (MLX conversions run only on "
            "local_apple); block-FP8 and ModelOpt NVFP4 Qwen3.5 checkpoints need the vLLM "
            "backend."
        ),
    ),
    ExecutionTarget.MODAL: _Target(
        version="modal/2026.12.6",
        fingerprint="44e8ba53c5958446",
        policy=_GPU_POLICY,
        quantization_advice=(
            "Pick the unquantized original repository (MLX conversions run only on "
            "local_apple); only Qwen3.5 accepts block-FP8 or ModelOpt NVFP4 checkpoints."
        ),
        load_quantization_advice=(
            "The Modal image does not carry bitsandbytes: drop the ':' tag (a Modal GPU holds "
            "the unquantized model), pick a block-FP8 or ModelOpt NVFP4 Qwen3.5 checkpoint for "
            "vLLM, or run it on this machine (turn run_on_modal off)."
        ),
    ),
    ExecutionTarget.LOCAL_CPU: _Target(
        version="local_cpu/2026.12.5",
        fingerprint="02fbccaf769f9210",
        policy=TargetPolicy(
            context_cap=8192,
            default_context=4096,
            max_images=4,
            max_video_frames=8,
            max_file_bytes=32 * _MIB,
            max_total_file_bytes=64 * _MIB,
            max_file_characters=100_000,
            max_pdf_pages=50,
            weight_overhead=1.10,
            activation_bytes=512 * _MIB,
            runtime_dtype="float32",
            kv_element_bytes=4,
            device="cpu",
            load_quantizations=_BNB,
        ),
        quantization_advice=(
            "The CPU target runs only unquantized checkpoints; pick the original unquantized "
            "repository of a small model."
        ),
        dense_only=True,  # mixture-of-experts members are too big for it
    ),
}

REGISTRY_VERSIONS: Final = {target: spec.version for target, spec in _TARGETS.items()}
"""The current registry version of every target."""


def registry_for(target: ExecutionTarget | str) -> CompatibilityRegistry:
    """Return the compatibility registry of ``target``.

    Built from the family and engine tables as they are now (a test that adds
    a record with ``monkeypatch.setitem`` sees it here).

    Raises:
        ValueError: ``target`` is not an execution target.
    """
    target = ExecutionTarget(target)
    spec = _TARGETS[target]
    return CompatibilityRegistry(
        target=target,
        version=spec.version,
        rules=_rules(target, dense_only=spec.dense_only),
        policy=spec.policy,
        quantization_advice=spec.quantization_advice,
        load_quantization_advice=spec.load_quantization_advice,
    )


def known_architectures() -> frozenset[str]:
    """Every architecture some registry accepts; anything else counts as custom code."""
    return frozenset(a for target in _TARGETS for a in registry_for(target).architectures)
