"""The vLLM engine: one resident ``AsyncLLM`` per profile, served synchronously.

Private modules, one idea each: ``_backend`` (load, one request, unload),
``_start`` (building and starting the engine), ``_batch`` (a batch
submitted at once), ``_drain`` (handing engine steps to the caller's
thread, abort and death), ``_requests`` (sampling, seeds, images, vLLM's
errors), ``_engine`` (engine arguments, the loop thread, quantization),
``_memory`` / ``_kernels`` (GPU memory and kernel choices), ``_cache`` /
``_modes`` (compile caches, eager or throughput), ``_process`` (the
engine-core process's environment), ``_stats`` (running/waiting peaks),
``_reasoning`` (vLLM's reasoning parser) and ``_watch`` (the engine
process's parent-death watch, armed as it is spawned).

Besides the backend, this module names what the raw-engine benchmarks
(``bench/bench_vllm*.py``) and ``scripts/gpu_check.py`` build their own
``AsyncLLM`` from, so they measure the arguments the backend really uses.
vllm itself is imported only inside functions.
"""

from .._processor import processor_class
from ._backend import VllmBackend
from ._cache import COMPILE_CACHE_ROOT_ENV, CacheStack, apply_compile_cache, current_stack
from ._engine import engine_kwargs, engine_variables, image_pixel_cap, vllm_version
from ._kernels import cuda_driver_version
from ._memory import gpu_memory_utilization, nvml_memory
from ._modes import EXECUTION_MODE_ENV, ExecutionModes, execution_modes
from ._process import engine_process_scope
from ._requests import capped_image
from ._stats import EngineLoad, stat_logger_factory

__all__ = [
    "COMPILE_CACHE_ROOT_ENV",
    "EXECUTION_MODE_ENV",
    "CacheStack",
    "EngineLoad",
    "ExecutionModes",
    "VllmBackend",
    "apply_compile_cache",
    "capped_image",
    "cuda_driver_version",
    "current_stack",
    "engine_kwargs",
    "engine_process_scope",
    "engine_variables",
    "execution_modes",
    "gpu_memory_utilization",
    "image_pixel_cap",
    "nvml_memory",
    "processor_class",
    "stat_logger_factory",
    "vllm_version",
]
