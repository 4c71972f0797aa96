"""Versioned compatibility registries, one per execution target.

A registry is the reviewed list of what a target can run: which
architectures, on which backend, with which quantization formats, and with
which input bounds. Nothing outside it runs, because every entry stands for
a combination somebody validated (see the seed's live validations). Any
change to a table below must bump that target's version string: the version
is part of every profile's identity, so a profile decided under old rules
gets a new id instead of silently changing meaning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from comfy_llm_profiles._families import FAMILIES
from comfy_llm_profiles._targets import ExecutionTarget

__all__ = [
    "MLX_VLM",
    "REGISTRY_VERSIONS",
    "TRANSFORMERS",
    "VLLM",
    "ArchitectureRule",
    "BackendChoice",
    "CompatibilityRegistry",
    "TargetPolicy",
    "known_architectures",
    "registry_for",
]

_MIB = 1024**2
_GIB = 1024**3


@dataclass(frozen=True, slots=True)
class BackendChoice:
    """One backend a rule may use, and the formats it accepts there.

    Attributes:
        backend: ``mlx_vlm``, ``transformers`` or ``vllm``.
        quantizations: Accepted quantization methods.
        requirements: The pinned engine requirements a profile on this
            backend runs with (part of the profile identity).
    """

    backend: str
    quantizations: tuple[str, ...]
    requirements: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ArchitectureRule:
    """How one model family runs on one target.

    Attributes:
        family: A short name (``qwen3_5``, ``qwen3_vl``, ``smolvlm2``, ...).
        architectures: ``architectures[0]`` values of config.json, each
            mapped to the ``model_type`` it must come with.
        backends: Backends in order of preference; the first one available
            that accepts the checkpoint's format wins.
        modalities: Inputs the family accepts.
        modality_reason: One line saying why (what was reviewed).
        reasoning_parser: ``qwen3`` or ``none``.
        allow_mixed_image_video: Whether images and video may share a request.
        extra_options: Family-specific backend options, per backend.
    """

    family: str
    architectures: tuple[tuple[str, str], ...]
    backends: tuple[BackendChoice, ...]
    modalities: tuple[str, ...]
    modality_reason: str
    reasoning_parser: str
    allow_mixed_image_video: bool
    extra_options: tuple[tuple[str, tuple[tuple[str, str | int | float | bool], ...]], ...] = ()

    def model_type_for(self, architecture: str) -> str | None:
        """The model_type that must accompany ``architecture``, or None if not in this rule."""
        return dict(self.architectures).get(architecture)

    def options_for(self, backend: str) -> dict[str, str | int | float | bool]:
        """Family-specific options for ``backend``."""
        return dict(dict(self.extra_options).get(backend, ()))


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


@dataclass(frozen=True, slots=True)
class CompatibilityRegistry:
    """The reviewed rules of one target.

    Attributes:
        target: The execution target.
        version: Bumped on any change; recorded in each profile's identity.
        rules: One rule per model family.
        policy: The target's numbers.
        quantization_advice: What to pick instead when a format is refused.
    """

    target: ExecutionTarget
    version: str
    rules: tuple[ArchitectureRule, ...]
    policy: TargetPolicy
    quantization_advice: str

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


_Options = tuple[tuple[str, tuple[tuple[str, str | int | float | bool], ...]], ...]

# The pinned engines a profile runs with (what the lock resolves for each backend).
MLX_VLM: Final = BackendChoice("mlx_vlm", ("none", "mlx"), ("mlx-vlm==0.7.10",))
TRANSFORMERS: Final = BackendChoice("transformers", ("none",), ("transformers==5.24.0",))
VLLM: Final = BackendChoice("vllm", ("none", "fp8", "modelopt_fp4"), ("vllm==0.32.0",))


def _rules(
    table: tuple[tuple[str, tuple[BackendChoice, ...]], ...],
    *,
    dense_only: bool = False,
    extra_options: dict[str, _Options] | None = None,
) -> tuple[ArchitectureRule, ...]:
    """One rule per ``(family name, backends in order of preference)`` row."""
    rules = []
    for name, backends in table:
        family = FAMILIES[name]
        rules.append(
            ArchitectureRule(
                family=family.name,
                architectures=tuple(
                    pair
                    for pair in family.architectures
                    if not (dense_only and pair[0] in family.moe_architectures)
                ),
                backends=backends,
                modalities=family.modalities,
                modality_reason=family.modality_reason,
                reasoning_parser=family.reasoning_parser,
                allow_mixed_image_video=family.allow_mixed_image_video,
                extra_options=(extra_options or {}).get(name, ()),
            )
        )
    return tuple(rules)


# Which backend runs each family, per target: data, one row per family (adding a
# backend to a family is one edit of its row, plus a version bump).
_APPLE_TABLE = (
    ("qwen3_5", (MLX_VLM,)),
    ("qwen3_vl", (MLX_VLM,)),
    ("smolvlm2", (MLX_VLM,)),
    ("smolvlm", (MLX_VLM,)),
    ("muse_glimmer", (MLX_VLM,)),
)
_CUDA_TABLE = (
    # Qwen3.5 falls back on Transformers where vLLM is not installed (local_cuda).
    ("qwen3_5", (VLLM, TRANSFORMERS)),
    ("qwen3_vl", (TRANSFORMERS,)),
    ("smolvlm2", (TRANSFORMERS,)),
    ("smolvlm", (TRANSFORMERS,)),
    ("muse_glimmer", (TRANSFORMERS,)),
)
_CPU_TABLE = (
    ("qwen3_5", (TRANSFORMERS,)),
    ("qwen3_vl", (TRANSFORMERS,)),
    ("smolvlm2", (TRANSFORMERS,)),
    ("smolvlm", (TRANSFORMERS,)),
    ("muse_glimmer", (TRANSFORMERS,)),
)

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

_REGISTRIES: Final = {
    ExecutionTarget.LOCAL_APPLE: CompatibilityRegistry(
        target=ExecutionTarget.LOCAL_APPLE,
        version="local_apple/2026.12.1",
        rules=_rules(
            _APPLE_TABLE,
            # The seed hands MLX a thinking budget of half of max_new_tokens.
            extra_options={"qwen3_5": (("mlx_vlm", (("thinking_budget_fraction", 0.5),)),)},
        ),
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
    ),
    ExecutionTarget.LOCAL_CUDA: CompatibilityRegistry(
        target=ExecutionTarget.LOCAL_CUDA,
        version="local_cuda/2026.12.1",
        rules=_rules(_CUDA_TABLE),
        policy=_GPU_POLICY,
        quantization_advice=(
            "Pick the unquantized original repository (MLX conversions run only on "
            "local_apple); block-FP8 and ModelOpt NVFP4 Qwen3.5 checkpoints need the vLLM "
            "backend (install comfy-llm[cuda,vllm])."
        ),
    ),
    ExecutionTarget.MODAL: CompatibilityRegistry(
        target=ExecutionTarget.MODAL,
        version="modal/2026.12.1",
        rules=_rules(_CUDA_TABLE),
        policy=_GPU_POLICY,
        quantization_advice=(
            "Pick the unquantized original repository (MLX conversions run only on "
            "local_apple); only Qwen3.5 accepts block-FP8 or ModelOpt NVFP4 checkpoints."
        ),
    ),
    ExecutionTarget.LOCAL_CPU: CompatibilityRegistry(
        target=ExecutionTarget.LOCAL_CPU,
        version="local_cpu/2026.12.1",
        rules=_rules(_CPU_TABLE, dense_only=True),
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
        ),
        quantization_advice=(
            "The CPU target runs only unquantized checkpoints; pick the original unquantized "
            "repository of a small model."
        ),
    ),
}

REGISTRY_VERSIONS: Final = {target: reg.version for target, reg in _REGISTRIES.items()}
"""The current registry version of every target."""


def registry_for(target: ExecutionTarget | str) -> CompatibilityRegistry:
    """Return the compatibility registry of ``target``.

    Raises:
        ValueError: ``target`` is not an execution target.
    """
    return _REGISTRIES[ExecutionTarget(target)]


def known_architectures() -> frozenset[str]:
    """Every architecture some registry accepts; anything else counts as custom code."""
    return frozenset(a for reg in _REGISTRIES.values() for a in reg.architectures)
