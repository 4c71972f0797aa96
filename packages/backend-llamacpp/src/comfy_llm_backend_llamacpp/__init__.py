"""The llama.cpp backend: GGUF models and their vision projector, in-process.

Every GGUF file is checked in Python (format bounds, tensor placement, the
architecture and projector type this engine loads) before llama.cpp sees it;
importing this package does not import llama-cpp-python, and a missing
engine raises :class:`EngineNotInstalledError` naming the extra. The four errors
every engine shares (missing engine, failed load, a profile for another
engine, use after unload) are residency's classes, re-exported here.

Example::

    from comfy_llm_backend_llamacpp import LlamaCppBackend

    backend = LlamaCppBackend.open("model-Q4_K_M.gguf", "mmproj-model-F16.gguf")
    result = backend.generate(prepared_inputs, settings, sink)  # a residency TokenSink
    backend.close()
"""

from __future__ import annotations

from ._backend import DEFAULT_CONTEXT_TOKENS, ENGINE_NAMES, LlamaCppBackend
from ._factory import create_backend, gpu_budget_bytes
from ._files import CheckedFiles, check_files, find_gguf_files
from ._offload import OffloadPlan, plan_offload
from .errors import (
    ENGINE_NAME,
    LLAMACPP_EXTRA_HINT,
    BackendUnloadedError,
    EngineNotInstalledError,
    GenerationError,
    GgufFilesError,
    LlamaCppBackendError,
    ModelLoadError,
    PromptTooLongError,
    UnsafeGgufError,
    UnsupportedBackendError,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_CONTEXT_TOKENS",
    "ENGINE_NAME",
    "ENGINE_NAMES",
    "LLAMACPP_EXTRA_HINT",
    "BackendUnloadedError",
    "CheckedFiles",
    "EngineNotInstalledError",
    "GenerationError",
    "GgufFilesError",
    "LlamaCppBackend",
    "LlamaCppBackendError",
    "ModelLoadError",
    "OffloadPlan",
    "PromptTooLongError",
    "UnsafeGgufError",
    "UnsupportedBackendError",
    "__version__",
    "check_files",
    "create_backend",
    "find_gguf_files",
    "gpu_budget_bytes",
    "plan_offload",
]
