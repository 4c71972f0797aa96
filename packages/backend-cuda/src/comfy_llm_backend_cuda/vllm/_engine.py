"""vLLM's pieces: lazy import, engine arguments, the event-loop thread, quantization check.

vLLM is imported only here and only when a vLLM profile loads. ``AsyncLLM``
is asynchronous; the manager is not. Each backend owns one
:class:`LoopThread`: a daemon thread running one event loop on which the
engine is created, fed and shut down, while ``generate()`` stays a plain
blocking call on the caller's thread (which also runs every callback, so
ComfyUI's progress and interrupt hooks see their own thread).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
import json
import math
import threading
from collections.abc import Coroutine, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Final, TypeVar

from comfy_llm_core import env_scope, env_str
from comfy_llm_profiles import ModelProfile

from ..errors import VLLM_ENGINE_NAME, EngineNotInstalledError, UnsupportedQuantizationError
from ._kernels import attention_backend, gdn_prefill_backend, nvcc_path
from ._memory import MemoryReading, gpu_memory_utilization, kv_cache_bytes

__all__ = [
    "LoopThread",
    "check_quantization",
    "cuda_capability",
    "engine_kwargs",
    "engine_variables",
    "image_pixel_cap",
    "import_vllm",
    "quantization_kernel",
    "vllm_version",
]

T = TypeVar("T")

_GIB = 1024**3
_LOG_STREAM = "VLLM_LOGGING_STREAM"
_STDERR = "ext://sys.stderr"
_CPU_KV = "VLLM_CPU_KVCACHE_SPACE"
#: Requests the engine schedules together when the profile predates the caption options.
MAX_NUM_SEQS = 32
#: Tokens of one engine step when the profile predates the caption options.
MAX_NUM_BATCHED_TOKENS = 8192
#: The processor's image cap when the profile predates the caption options (1024 x 1024).
MAX_IMAGE_PIXELS = 1024 * 1024


def import_vllm() -> ModuleType:
    """Import vllm, or raise :class:`EngineNotInstalledError` naming the extra.

    vLLM logs to stdout unless told otherwise; stdout belongs to the CLI's
    JSON, so its log stream defaults to stderr here.
    """
    stream = {} if env_str(_LOG_STREAM) else {_LOG_STREAM: _STDERR}
    try:
        with env_scope(stream):  # read while vLLM configures its logger
            return importlib.import_module("vllm")
    except ImportError as error:
        raise EngineNotInstalledError(VLLM_ENGINE_NAME, "vllm", str(error)) from error


def engine_variables(
    profile: ModelProfile,
    directories: Sequence[tuple[str, str]],
    *,
    on_cpu: bool,
    eager: bool = False,
) -> dict[str, str]:
    """What the engine process's environment must hold (set only while it is spawned).

    The compile-cache folders, vLLM's log stream on stderr (stdout carries the
    CLI's JSON) and, on vllm-cpu, its KV-cache size in GiB; a value the user
    set is kept. (The parent-death watch travels with the spawn itself,
    :mod:`._watch`.)
    """
    variables = dict(directories)
    if not env_str(_LOG_STREAM):
        variables[_LOG_STREAM] = _STDERR
    if on_cpu and not env_str(_CPU_KV):
        kv = kv_cache_bytes(profile, eager=eager)
        variables[_CPU_KV] = str(max(1, math.ceil(kv / _GIB)))
    return variables


def vllm_version() -> str:
    """The installed vLLM distribution's version (``vllm`` or ``vllm-cpu``)."""
    for name in ("vllm", "vllm-cpu"):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return str(getattr(importlib.import_module("vllm"), "__version__", "unknown"))


def _structured_outputs_config(profile: ModelProfile) -> dict[str, Any]:
    config: dict[str, Any] = {"backend": "guidance", "disable_any_whitespace": True}
    if profile.reasoning_parser == "qwen3":
        config["reasoning_parser"] = "qwen3"
    return config


def engine_kwargs(
    profile: ModelProfile,
    path: Path,
    *,
    eager: bool,
    on_cpu: bool,
    admitted: MemoryReading | None = None,
    capability: int | None = None,
) -> dict[str, Any]:
    """``AsyncEngineArgs`` keyword arguments for a profile (the caption profile's included).

    Args:
        profile: A vLLM profile (``backend_options`` from the registry).
        path: The completed snapshot directory (the only place weights come from).
        eager: ``enforce_eager`` (eager mode) or not (throughput mode).
        on_cpu: The engine runs on vllm-cpu (its KV budget is an environment variable).
        admitted: The memory reading that admitted the load (GPU only): sets
            ``gpu_memory_utilization`` for vLLM's start-up check
            (:mod:`._memory`); None leaves vLLM's default.
        capability: The GPU's capability (90 for 9.0; GPU only): the attention
            backend where vLLM would JIT-compile FlashInfer (:mod:`._kernels`).

    Returns:
        The arguments.

    Raises:
        InvalidSettingError: ``COMFY_LLM_VLLM_GDN_PREFILL`` asks for what cannot run here.
    """
    options = dict(profile.backend_options)
    limits = profile.limits
    quantization = options.get("quantization") or profile.quantization_method
    kwargs: dict[str, Any] = {
        "model": str(path),
        "tokenizer": str(path),
        "trust_remote_code": False,
        "max_model_len": int(options.get("max_model_len") or limits.context_tokens),
        "dtype": str(options.get("dtype") or "auto"),
        "enforce_eager": eager,
        # sampled video frames arrive as an ordered image sequence
        "limit_mm_per_prompt": {
            "image": limits.media.image.max_images + limits.media.video.max_video_frames,
            "video": 0,
        },
        "load_format": "safetensors",
        "safetensors_load_strategy": "prefetch",
        # captions run this many at once (the KV term holds them: profiles/_vllm_memory.py)
        "max_num_seqs": int(options.get("max_num_seqs") or MAX_NUM_SEQS),
        # ~8 capped images of prefill per step; the activation term is computed for it
        "max_num_batched_tokens": int(
            options.get("max_num_batched_tokens") or MAX_NUM_BATCHED_TOKENS
        ),
        # captions share no prefix of a whole block, and caching would put Qwen3.5's
        # linear-attention state in align mode (2 state blocks a request)
        "enable_prefix_caching": bool(options.get("enable_prefix_caching", False)),
        # every caption image is new: a processor cache only holds host RAM in two processes
        "mm_processor_cache_gb": 0,
        "disable_log_stats": True,
        "generation_config": "auto",
        # response schemas: llguidance (as the other engines), free while the model reasons
        "structured_outputs_config": _structured_outputs_config(profile),
    }
    if limits.media.image.max_images or limits.media.video.max_video_frames:
        # the processor's own cap (Qwen3.5: 16 MP, 16,384 tokens an image) sets vLLM's
        # profile image and encoder cache: cap it where the activation term was priced
        processor = _processor_kwargs(profile, path)
        if processor is not None:
            kwargs["mm_processor_kwargs"] = processor
    if quantization not in (None, "", "none"):
        kwargs["quantization"] = str(quantization)
    # on vllm-cpu the KV size is an environment variable (engine_variables); its Gated
    # DeltaNet kernel needs its default bfloat16: keep "auto"
    if not on_cpu:
        kwargs["kv_cache_memory_bytes"] = kv_cache_bytes(profile, eager=eager)
        if admitted is not None:
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization(profile, admitted)
        nvcc = nvcc_path()
        kwargs["gdn_prefill_backend"] = gdn_prefill_backend(nvcc)
        attention = attention_backend(capability, nvcc)
        if attention is not None:
            kwargs["attention_backend"] = attention
    return kwargs


def _processor_size(path: Path) -> tuple[int | None, int | None]:
    """(longest, shortest) edge in pixels from the snapshot's ``preprocessor_config.json``."""
    try:
        config = json.loads((path / "preprocessor_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, None
    if not isinstance(config, dict):
        return None, None
    raw = config.get("size")
    size: dict[str, Any] = raw if isinstance(raw, dict) else {}
    longest = size.get("longest_edge", config.get("max_pixels"))
    shortest = size.get("shortest_edge", config.get("min_pixels"))

    def positive(value: Any) -> int | None:
        ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
        return int(value) if ok else None

    return positive(longest), positive(shortest)


def image_pixel_cap(profile: ModelProfile, path: Path) -> int:
    """The engine's image cap: the profile's, never above the checkpoint processor's own."""
    cap = int(dict(profile.backend_options).get("max_image_pixels") or MAX_IMAGE_PIXELS)
    own, _ = _processor_size(path)
    return min(cap, own) if own is not None else cap


def _processor_kwargs(profile: ModelProfile, path: Path) -> dict[str, Any] | None:
    """``mm_processor_kwargs`` capping the processor's size (qwen2_vl.py ``_get_vision_size``).

    ``size`` with both edges: Transformers 5.x deprecates ``max_pixels`` in a
    processor call (removed in 5.23). None when the checkpoint names no size.
    """
    _, shortest = _processor_size(path)
    if shortest is None:
        return None
    cap = image_pixel_cap(profile, path)
    return {"size": {"longest_edge": cap, "shortest_edge": min(shortest, cap)}}


def check_quantization(
    profile_id: str, quantization: str | None, capability: int | None = None
) -> None:
    """Refuse a quantization the GPU cannot run, with vLLM's own numbers.

    The minimum comes from vLLM's quantization config class and the
    capability from vLLM's platform: no table is kept here.

    Args:
        profile_id: The profile being loaded (named in the error).
        quantization: The method, or None/``none``.
        capability: The GPU's capability as vLLM's ``to_int()`` (89 for 8.9);
            None asks vLLM's platform (nothing to check off CUDA).

    Raises:
        UnsupportedQuantizationError: vLLM's minimum exceeds the GPU's capability.
    """
    if quantization in (None, "", "none"):
        return
    from vllm.model_executor.layers.quantization import get_quantization_config

    if capability is None:
        from vllm.platforms import current_platform

        if not current_platform.is_cuda_alike():
            return  # vLLM decides on other platforms when the engine starts
        device = current_platform.get_device_capability()
        if device is None:
            return
        capability = int(device.to_int())
    minimum = int(get_quantization_config(str(quantization)).get_min_capability())
    if capability < minimum:
        raise UnsupportedQuantizationError(
            profile_id,
            str(quantization),
            f"{capability // 10}.{capability % 10}",
            f"{minimum // 10}.{minimum % 10}",
            f"vLLM's {quantization} kernels need capability {minimum}, the GPU reports "
            f"{capability}",
        )


#: Below these capabilities vLLM 0.32 runs the format as Marlin weight-only kernels
#: (W8A16 / W4A16: quantization/fp8.py, modelopt.py), at its minimum of 75 for both.
_NATIVE_FROM: Final = {"fp8": 89, "modelopt_fp4": 100}


def quantization_kernel(quantization: str | None, capability: int | None) -> str | None:
    """``native`` or ``marlin``: which kernels vLLM runs a quantized format with on this GPU.

    FP8 needs sm89 (Ada, Hopper) and NVFP4 sm100 (Blackwell) for native
    kernels; below, vLLM falls back to Marlin weight-only kernels, which are
    slower. None when unquantized or not on CUDA.
    """
    native_from = _NATIVE_FROM.get(str(quantization))
    if native_from is None or capability is None:
        return None
    return "native" if capability >= native_from else "marlin"


def cuda_capability() -> int | None:
    """The GPU's capability as vLLM's platform reports it (89 for 8.9); None off CUDA."""
    from vllm.platforms import current_platform

    if not current_platform.is_cuda_alike():
        return None
    device = current_platform.get_device_capability()
    return None if device is None else int(device.to_int())


class LoopThread:
    """One event loop on one daemon thread; coroutines are submitted from other threads."""

    def __init__(self, name: str) -> None:
        """Start the thread and its loop.

        Args:
            name: The thread's name (shows in stack dumps).
        """
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> Any:
        """Schedule ``coroutine`` on the loop; returns a ``concurrent.futures.Future``."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def call(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coroutine`` on the loop and wait for its result."""
        result: T = self.submit(coroutine).result(timeout)
        return result

    def stop(self) -> None:
        """Stop the loop and join the thread (idempotent)."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
        if not self._thread.is_alive():
            self.loop.close()
