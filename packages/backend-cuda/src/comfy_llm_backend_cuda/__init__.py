"""comfy-llm-backend-cuda: run multimodal models in-process with Transformers or vLLM.

:func:`create_backend` is a residency ``BackendFactory``. A ``transformers``
profile loads ``AutoProcessor`` + ``AutoModelForImageTextToText`` (local
files only, no remote code, SDPA attention) on CUDA when available, else on
the CPU, and streams token ids per token. A ``vllm`` profile (extra
``vllm``) starts one resident ``AsyncLLM`` on a background event-loop thread
and serves it synchronously; its eager/throughput mode is deployment-scoped
(``COMFY_MODAL_LLM_VLLM_EXECUTION_MODE``) and its compile caches live under
a namespace of the accelerator stack.

Layout: :mod:`._factory` on top dispatches to :mod:`.transformers` or
:mod:`.vllm` (engine subpackages that never import each other); below them
sit the shared ``_processor``, ``_stream`` and ``errors``. torch,
transformers and vllm are imported only when a model is loaded, so
importing this package works without them.
"""

from ._factory import ENGINE_NAMES, create_backend
from .errors import (
    BackendUnloadedError,
    CudaBackendError,
    CudaDriverTooOldError,
    DeviceOutOfMemoryError,
    EngineDiedError,
    EngineNotInstalledError,
    GenerationOutOfMemoryError,
    InvalidExecutionStateError,
    ModelLoadError,
    PromptTooLongError,
    QuantizationNotInstalledError,
    UnsupportedBackendError,
    UnsupportedQuantizationError,
)
from .transformers import ATTENTION_IMPLEMENTATION, TransformersBackend
from .vllm import (
    COMPILE_CACHE_ROOT_ENV,
    EXECUTION_MODE_ENV,
    CacheStack,
    ExecutionModes,
    execution_modes,
)

__version__ = "0.1.0"

__all__ = [
    "ATTENTION_IMPLEMENTATION",
    "COMPILE_CACHE_ROOT_ENV",
    "ENGINE_NAMES",
    "EXECUTION_MODE_ENV",
    "BackendUnloadedError",
    "CacheStack",
    "CudaBackendError",
    "CudaDriverTooOldError",
    "DeviceOutOfMemoryError",
    "EngineDiedError",
    "EngineNotInstalledError",
    "ExecutionModes",
    "GenerationOutOfMemoryError",
    "InvalidExecutionStateError",
    "ModelLoadError",
    "PromptTooLongError",
    "QuantizationNotInstalledError",
    "TransformersBackend",
    "UnsupportedBackendError",
    "UnsupportedQuantizationError",
    "create_backend",
    "execution_modes",
]
