"""The llama.cpp backend: GGUF models and their vision projector, in-process.

Every GGUF file is checked in Python (format bounds, tensor placement, the
architecture and projector type this engine loads) before llama.cpp sees it;
importing this package does not import llama-cpp-python, and a missing
engine raises :class:`LlamaCppNotInstalledError` naming the extra.

Example::

    from comfy_llm_backend_llamacpp import LlamaCppBackend

    backend = LlamaCppBackend.open("model-Q4_K_M.gguf", "mmproj-model-F16.gguf")
    result = backend.generate(prepared_inputs, settings, sink)  # a residency TokenSink
    backend.close()
"""

from __future__ import annotations

from ._backend import BACKEND_NAME, DEFAULT_CONTEXT_TOKENS, LlamaCppBackend
from ._factory import create_backend, gpu_budget_bytes
from ._files import CheckedFiles, check_files, find_gguf_files
from ._gguf_format import GGML_TYPES, GGUF_LIMITS, GgufFile, GgufLimits, GgufTensor
from ._gguf_rules import (
    FILE_TYPES,
    TEXT_ARCHITECTURES,
    VISION_PROJECTORS,
    GgufModel,
    GgufProjector,
    check_model_file,
    check_projector_file,
)
from ._offload import OffloadPlan, plan_offload
from .errors import (
    LLAMACPP_EXTRA_HINT,
    BackendTargetError,
    BackendUnloadedError,
    GgufFilesError,
    LlamaCppBackendError,
    LlamaCppNotInstalledError,
    ModelLoadError,
    PromptTooLongError,
    UnsafeGgufError,
)

__version__ = "0.1.0"

ENGINE_NAMES = (BACKEND_NAME,)
"""The engine-table names this package loads (``comfy_llm_profiles.ENGINES``)."""

__all__ = [
    "BACKEND_NAME",
    "DEFAULT_CONTEXT_TOKENS",
    "ENGINE_NAMES",
    "FILE_TYPES",
    "GGML_TYPES",
    "GGUF_LIMITS",
    "LLAMACPP_EXTRA_HINT",
    "TEXT_ARCHITECTURES",
    "VISION_PROJECTORS",
    "BackendTargetError",
    "BackendUnloadedError",
    "CheckedFiles",
    "GgufFile",
    "GgufFilesError",
    "GgufLimits",
    "GgufModel",
    "GgufProjector",
    "GgufTensor",
    "LlamaCppBackend",
    "LlamaCppBackendError",
    "LlamaCppNotInstalledError",
    "ModelLoadError",
    "OffloadPlan",
    "PromptTooLongError",
    "UnsafeGgufError",
    "__version__",
    "check_files",
    "check_model_file",
    "check_projector_file",
    "create_backend",
    "find_gguf_files",
    "gpu_budget_bytes",
    "plan_offload",
]
