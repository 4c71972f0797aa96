"""How much of the GPU the vLLM engine is told it may take, from what admission measured.

vLLM's GPU worker always runs ``request_memory()`` at start-up
(v1/worker/gpu_worker.py:533-537 in 0.32): it refuses unless the free memory
it reads, after the engine process's own CUDA context exists, is at least
``total x gpu_memory_utilization`` (v1/worker/utils.py:716-770), even when
``kv_cache_memory_bytes`` is set. With that set, the utilization serves only
this check (gpu_worker.py:649-672 returns the KV bytes as they are). The
default, 0.92 (config/cache.py), refuses on any GPU where something else
holds more than 8 %: an SDXL model in ComfyUI, a first LLM on an H200.

So the utilization here is derived from the reading that admitted the load
(``comfy_llm_residency.admitted_memory()``: the driver's free memory, this
process's torch cache left out, since the engine is another process): free
at admission less the engine process's CUDA context and a small margin,
over the total, capped at vLLM's default. vLLM's check then passes exactly
when admission's view still holds at engine start, and refuses when another
tenant took the memory in between. The KV cache gets exactly the profile's
KV term (``memory_kv_bytes``); an eager engine, which captures no CUDA
graphs, also gets the graph term (``memory_cudagraph_bytes``) as KV blocks:
admission reserved the same total for either mode, and each mode spends it.
"""

from __future__ import annotations

import logging
from typing import Any, Final, Protocol

from comfy_llm_profiles import ModelProfile

__all__ = [
    "DEFAULT_GPU_MEMORY_UTILIZATION",
    "UTILIZATION_MARGIN_BYTES",
    "gpu_memory_utilization",
    "kv_cache_bytes",
    "memory_terms",
    "nvml_memory",
]

logger = logging.getLogger(__name__)

_MIB: Final = 1024**2
#: vLLM 0.32's default (config/cache.py): never ask for more than it would.
DEFAULT_GPU_MEMORY_UTILIZATION: Final = 0.92
#: Slack below the admitted free memory for what moves between admission and the check.
UTILIZATION_MARGIN_BYTES: Final = 256 * _MIB
#: The engine process's CUDA context when the profile has no ``memory_context_bytes``.
_CONTEXT_FALLBACK_BYTES: Final = 768 * _MIB
#: Smallest KV-cache budget handed to vLLM, whatever the estimate says.
_MIN_KV_BYTES: Final = 256 * _MIB
_TERMS: Final = ("weights", "kv", "activation", "cudagraph", "context")


class MemoryReading(Protocol):
    """What admission read (``comfy_llm_residency.MemorySnapshot`` has these)."""

    @property
    def available_bytes(self) -> int:
        """Free memory another process could allocate."""
        ...

    @property
    def total_bytes(self) -> int:
        """The device's total memory."""
        ...


def memory_terms(profile: ModelProfile) -> dict[str, int] | None:
    """The profile's vLLM memory terms (``memory_<term>_bytes`` options), None if absent."""
    options = dict(profile.backend_options)
    terms = {term: options.get(f"memory_{term}_bytes") for term in _TERMS}
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in terms.values()):
        return None
    return {term: int(value) for term, value in terms.items()}  # type: ignore[arg-type]


def kv_cache_bytes(profile: ModelProfile, *, eager: bool = False) -> int:
    """The KV-cache budget: the KV term the estimate reserved (at least 256 MiB).

    Args:
        profile: The profile being loaded.
        eager: The engine captures no CUDA graphs: their term becomes KV too.

    A profile without terms (made before they existed) falls back to the
    estimate less its weights, as before.
    """
    terms = memory_terms(profile)
    if terms is not None:
        return max(_MIN_KV_BYTES, terms["kv"] + (terms["cudagraph"] if eager else 0))
    rest = int(profile.estimated_memory_bytes) - int(profile.weight_bytes)
    return max(_MIN_KV_BYTES, rest)


def gpu_memory_utilization(profile: ModelProfile, admitted: MemoryReading) -> float:
    """The ``gpu_memory_utilization`` vLLM's start-up check passes with on this reading.

    Args:
        profile: The profile being loaded (its ``context`` term is the engine
            process's CUDA context, created before vLLM's check reads memory).
        admitted: The reading that admitted the load.

    Returns:
        ``min(0.92, (free - context - margin) / total)``, rounded down to 1e-4,
        at least 1e-4 (vLLM refuses 0).
    """
    terms = memory_terms(profile)
    context = terms["context"] if terms is not None else _CONTEXT_FALLBACK_BYTES
    total = int(admitted.total_bytes)
    if total <= 0:
        return DEFAULT_GPU_MEMORY_UTILIZATION
    room = int(admitted.available_bytes) - context - UTILIZATION_MARGIN_BYTES
    share = int(room * 10_000 // total) / 10_000
    return max(0.0001, min(DEFAULT_GPU_MEMORY_UTILIZATION, share))


class _Reading:
    def __init__(self, available: int, total: int) -> None:
        self.available_bytes = available
        self.total_bytes = total


def nvml_memory(pynvml: Any = None, device_index: int = 0) -> MemoryReading | None:
    """The driver's free/total memory through NVML (no CUDA context in this process).

    Used when the backend is created outside the manager (no admission
    reading). None when NVML cannot be read.
    """
    try:
        if pynvml is None:
            from vllm.third_party import pynvml as nvml

            pynvml = nvml
        pynvml.nvmlInit()
        try:
            info = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(device_index))
            return _Reading(int(info.free), int(info.total))
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver, no NVML: vLLM's default stands
        logger.warning("Reading GPU memory through NVML failed", exc_info=True)
        return None
