"""comfy-llm-backend-cuda: run multimodal models in-process with Transformers.

:func:`create_backend` is a residency ``BackendFactory``: it checks that the
snapshot is complete, loads ``AutoProcessor`` and
``AutoModelForImageTextToText`` from it (local files only, no remote code,
SDPA attention) on CUDA when available, else on the CPU, and returns a
:class:`TransformersBackend` that streams token ids per token.

torch and transformers are imported only when a model is loaded, so
importing this package works without them. The vLLM backend is not part of
this version: a profile with backend ``vllm`` is refused with
:class:`~comfy_llm_backend_cuda.errors.UnsupportedBackendError`.
"""

from ._backend import ATTENTION_IMPLEMENTATION, ENGINE_NAME, TransformersBackend, create_backend
from .errors import (
    BackendUnloadedError,
    CudaBackendError,
    EngineNotInstalledError,
    ModelLoadError,
    PromptTooLongError,
    UnsupportedBackendError,
)

__all__ = [
    "ATTENTION_IMPLEMENTATION",
    "ENGINE_NAME",
    "BackendUnloadedError",
    "CudaBackendError",
    "EngineNotInstalledError",
    "ModelLoadError",
    "PromptTooLongError",
    "TransformersBackend",
    "UnsupportedBackendError",
    "create_backend",
]
