"""The engines, as data: one frozen record per engine a profile can name.

Everything the rest of the house needs to know about an engine is a field of
its :class:`EngineSpec`: where it runs, which package loads it (imported by
name, by residency's ``create_backend``, never here: profiles stays
engine-free), which ``comfy-llm`` extra installs it, the formats it loads,
its pinned requirements, the options and memory terms it adds to a decision,
and how it is scheduled. Nothing outside this table spells an engine's name
in a branch: a new engine is its package, one record here and one extra (the
"add an engine" recipe in the README).

The table lives in profiles because a profile names its engine (``backend``)
and its identity hashes the engine's figures (``estimated_vram_gb``'s
overhead, the options, the requirements): the lowest package that decides
profiles must own them, and every package above reads them from here.

Which families an engine runs is the families' review, not the engine's
(``Family.engines``); the registry of a target keeps those engines of a
family that run on the target (:attr:`EngineSpec.targets`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from comfy_llm_core import ExecutionTarget, install_command

from comfy_llm_profiles._gguf_rules import FILE_TYPES
from comfy_llm_profiles._load_quantization import LOAD_QUANTIZATIONS
from comfy_llm_profiles._vllm_memory import (
    vllm_engine_options,
    vllm_memory_terms,
)
from comfy_llm_profiles.errors import ProfileValidationError

__all__ = [
    "ENGINES",
    "WEIGHT_FORMATS",
    "EngineFacts",
    "EngineSpec",
    "engine_spec",
    "quantization_methods",
]

OptionValue = str | int | float | bool
"""A backend option's value: a JSON scalar (profiles stay hashable and portable)."""

WEIGHT_FORMATS: Final = ("safetensors", "gguf")
"""Weight formats inspection and staging admit (``_inspect``: the weights counted and
required; staging's ``ALLOW_PATTERNS``: the files downloaded). GGUF is parsed by C++, so
every GGUF file is checked in Python where it enters (``_gguf_format``/``_gguf_rules``:
resolution of a local file, staging after a download) and decided by ``_decide_gguf``."""


@dataclass(frozen=True, slots=True)
class EngineFacts:
    """What an engine's option and memory builders see of one decision.

    Attributes:
        config: The checkpoint's parsed config.json.
        context_tokens: The configured context.
        max_images: The profile's image limit.
        quantization: The detected quantization method.
        runtime_dtype: The target's runtime dtype (``auto``: the checkpoint's).
        device: The target's device string (``cuda``/``cpu``; empty on Apple).
        kv_element_bytes: Bytes per KV-cache element on the target.
        runtime_weight_bytes: Weights as they sit on the device.
        attention_kv_bytes: Full-attention KV of one sequence of the whole context.
    """

    config: Mapping[str, Any]
    context_tokens: int
    max_images: int
    quantization: str
    runtime_dtype: str
    device: str
    kv_element_bytes: int
    runtime_weight_bytes: int
    attention_kv_bytes: int


def _no_options(facts: EngineFacts) -> dict[str, OptionValue]:
    return {}


@dataclass(frozen=True, slots=True)
class EngineSpec:
    """One engine: what a profile naming it means everywhere.

    Attributes:
        name: The profile's ``backend`` value (part of the identity).
        label: The engine's name in messages (``vLLM``).
        module: The backend package, imported by name; it exports the backend
            vocabulary (``create_backend``, ``ENGINE_NAMES``, the shared errors).
        extras: The ``comfy-llm`` extras that install it.
        targets: Where it runs; a family's engine counts on these targets only.
        quantizations: Quantization methods it loads (``none`` = unquantized).
        load_quantizations: Quantizations it applies to an unquantized checkpoint
            while loading it (``_load_quantization``: ``bnb_int8``, ``bnb_nf4``).
        requirements: The pinned engine a profile runs with (part of the identity).
        vram_overhead_gb: The seed's identity figure ``estimated_vram_gb`` adds
            this to the weights (never change it: ids hash it).
        options: Its backend options for one decision (family options and
            ``trust_remote_code`` are added around them).
        memory_terms: Its own memory terms (bytes by term) given the facts and
            the final options; their sum replaces the target's generic estimate,
            each kept in the options as ``memory_<term>_bytes``. None: generic.
        out_of_process: It allocates device memory in a process of its own, so
            this process's cached-but-unused memory is no room for it.
        optional_on: Targets where it is an optional extra: there it counts only
            when ``import_name`` is importable (checked without importing it).
        import_name: The engine library's top-level module (for ``optional_on``).
        continuous_batching: It schedules every request it is handed at once, so
            it is handed at least twice its width (``engine_batch_size``).
        width_option: The backend option holding how many requests it runs at
            once (vLLM's ``max_num_seqs``); empty where that is not an option.
        weight_format: The weights it loads (one of :data:`WEIGHT_FORMATS`).
        install_note: Said after the install command (platform, alternative).
    """

    name: str
    label: str
    module: str
    extras: tuple[str, ...]
    targets: frozenset[ExecutionTarget]
    quantizations: tuple[str, ...]
    requirements: tuple[str, ...]
    vram_overhead_gb: float
    options: Callable[[EngineFacts], dict[str, OptionValue]] = _no_options
    memory_terms: Callable[[EngineFacts, Mapping[str, OptionValue]], dict[str, int]] | None = None
    out_of_process: bool = False
    optional_on: frozenset[ExecutionTarget] = frozenset()
    import_name: str = ""
    continuous_batching: bool = False
    width_option: str = ""
    weight_format: str = "safetensors"
    install_note: str = ""
    load_quantizations: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = set(self.load_quantizations) - set(LOAD_QUANTIZATIONS)
        if unknown:
            raise ValueError(f"Engine {self.name!r} names unknown load quantizations {unknown}")
        if self.weight_format not in WEIGHT_FORMATS:
            raise ValueError(
                f"Engine {self.name!r} loads {self.weight_format!r} weights, which inspection and "
                f"staging do not admit (admitted: {', '.join(WEIGHT_FORMATS)}); decide that first."
            )
        if self.optional_on and not self.import_name:
            raise ValueError(f"Engine {self.name!r} is optional somewhere but names no import_name")

    @property
    def install_hint(self) -> str:
        """The command that installs it into this Python (``comfy_llm_core.install_command``)."""
        command = install_command(self.extras[-1])
        return f"{command} {self.install_note}" if self.install_note else command

    def available(self, target: ExecutionTarget) -> bool:
        """Whether ``target`` can use it from this process (see :attr:`optional_on`)."""
        if target in self.optional_on:
            return importlib.util.find_spec(self.import_name) is not None
        return True


def _transformers_options(facts: EngineFacts) -> dict[str, OptionValue]:
    return {"torch_dtype": facts.runtime_dtype, "device": facts.device}


def _vllm_options(facts: EngineFacts) -> dict[str, OptionValue]:
    options: dict[str, OptionValue] = {
        "dtype": "auto",
        "max_model_len": facts.context_tokens,
        "limit_images": facts.max_images,
        # the caption profile: concurrency the KV budget holds, step size, image caps,
        # prefix caching off (_vllm_memory.vllm_engine_options)
        **vllm_engine_options(facts.config),
    }
    if facts.quantization != "none":
        options["quantization"] = facts.quantization
    return options


def _vllm_memory(facts: EngineFacts, options: Mapping[str, OptionValue]) -> dict[str, int]:
    return vllm_memory_terms(
        facts.config,
        runtime_weight_bytes=facts.runtime_weight_bytes,
        context_tokens=int(options.get("max_model_len") or facts.context_tokens),
        max_num_seqs=int(options["max_num_seqs"]),
        max_num_batched_tokens=int(options["max_num_batched_tokens"]),
        prefix_caching=bool(options.get("enable_prefix_caching", False)),
    )


def _llamacpp_memory(facts: EngineFacts, options: Mapping[str, OptionValue]) -> dict[str, int]:
    """llama.cpp's own memory terms.

    The GGUF's tensors as stored (mmap, no dtype change), an f16 KV cache for
    the whole context (its default ``type_k``/``type_v``), and the compute
    buffers the backend's offload plan reserves (``_offload.py``: 512 MiB).
    """
    kv_f16 = facts.attention_kv_bytes * _F16_BYTES // max(1, facts.kv_element_bytes)
    return {
        "weights": facts.runtime_weight_bytes,
        "kv": kv_f16,
        "compute": _LLAMACPP_COMPUTE_BYTES,
    }


_F16_BYTES = 2
_LLAMACPP_COMPUTE_BYTES = 512 * 1024**2

_GPU = frozenset({ExecutionTarget.LOCAL_CUDA, ExecutionTarget.MODAL})
_LOCAL = frozenset(
    {ExecutionTarget.LOCAL_CPU, ExecutionTarget.LOCAL_CUDA, ExecutionTarget.LOCAL_APPLE}
)

ENGINES: Final[dict[str, EngineSpec]] = {
    spec.name: spec
    for spec in (
        EngineSpec(
            name="mlx_vlm",
            label="MLX-VLM",
            module="comfy_llm_backend_mlx",
            extras=("apple",),
            install_note="(macOS on Apple Silicon; on Linux the dev environment uses mlx[cpu])",
            targets=frozenset({ExecutionTarget.LOCAL_APPLE}),
            quantizations=("none", "mlx"),
            requirements=("mlx-vlm==0.7.10",),
            vram_overhead_gb=2,
        ),
        EngineSpec(
            name="transformers",
            label="Transformers",
            module="comfy_llm_backend_cuda",
            extras=("cuda",),
            targets=_GPU | {ExecutionTarget.LOCAL_CPU},
            quantizations=("none",),
            requirements=("transformers==5.24.0",),
            vram_overhead_gb=8,
            options=_transformers_options,
            load_quantizations=tuple(LOAD_QUANTIZATIONS),  # bitsandbytes (extra bitsandbytes)
        ),
        EngineSpec(
            name="vllm",
            label="vLLM",
            module="comfy_llm_backend_cuda",
            extras=("cuda", "vllm"),
            install_note=(
                "(Linux), or re-resolve the model without vLLM installed to get a "
                "Transformers profile"
            ),
            targets=_GPU,
            quantizations=("none", "fp8", "modelopt_fp4"),
            requirements=("vllm==0.32.0",),
            vram_overhead_gb=12,
            options=_vllm_options,
            memory_terms=_vllm_memory,  # _vllm_memory.py: weights, kv, activation, graphs, context
            out_of_process=True,  # the EngineCore process
            # An optional extra inside ComfyUI; the Modal image always carries it, and a
            # Modal profile is usually resolved elsewhere (the CPU stager).
            optional_on=frozenset({ExecutionTarget.LOCAL_CUDA}),
            import_name="vllm",
            continuous_batching=True,
            width_option="max_num_seqs",  # _vllm_memory.vllm_engine_options sets it
        ),
        EngineSpec(
            name="llama_cpp",
            label="llama.cpp",
            module="comfy_llm_backend_llamacpp",
            extras=("llamacpp",),
            install_note=(
                "(compiles llama.cpp: needs CMake and a C++ compiler; for CUDA set "
                'CMAKE_ARGS="-DGGML_CUDA=on" first, see the llama.cpp backend README)'
            ),
            # Local only: the Modal image does not carry a llama.cpp build.
            targets=_LOCAL,
            # A GGUF's general.file_type names (llama.h llama_ftype); F16/BF16/F32 are
            # unquantized files.
            quantizations=tuple(dict.fromkeys(FILE_TYPES.values())),
            requirements=("llama-cpp-python==0.3.36",),
            vram_overhead_gb=1,
            memory_terms=_llamacpp_memory,
            optional_on=_LOCAL,  # an optional extra everywhere (it compiles on install)
            import_name="llama_cpp",
            weight_format="gguf",
        ),
    )
}
"""Every engine by name. Tests add a record with ``monkeypatch.setitem``."""


def engine_spec(name: str) -> EngineSpec:
    """The record of engine ``name``.

    Raises:
        ProfileValidationError: No engine has that name.
    """
    try:
        return ENGINES[name]
    except KeyError:
        raise ProfileValidationError("backend", name, f"one of {', '.join(ENGINES)}") from None


def quantization_methods() -> tuple[str, ...]:
    """Every quantization method some engine loads or applies at load, ``none`` first.

    Checkpoint formats in table order, then those applied at load (``bnb_int8``, ``bnb_nf4``).
    """
    methods = dict.fromkeys(["none"])
    for spec in ENGINES.values():
        methods.update(dict.fromkeys(spec.quantizations))
    for spec in ENGINES.values():
        methods.update(dict.fromkeys(spec.load_quantizations))
    return tuple(methods)
