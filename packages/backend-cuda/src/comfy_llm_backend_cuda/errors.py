"""Errors raised by the Transformers and vLLM backends.

The backend vocabulary every engine shares (``EngineNotInstalledError``,
``ModelLoadError``, ``UnsupportedBackendError``, ``BackendUnloadedError``,
``DeviceOutOfMemoryError``) is
defined once in ``comfy_llm_residency.errors`` and re-exported here; the
errors only these engines raise derive from :class:`CudaBackendError`. Where
a builtin category fits, an error also derives from it (``ValueError`` for a
request or GPU this backend cannot serve), so callers that only know the
builtins still catch them. Each message names the value, the limit it broke
and the fix; the same facts are attributes.

Errors from the snapshot check (``comfy_llm_staging.IncompleteSnapshotError``)
and whatever a token callback raises pass through unchanged.

Errors survive pickling (the Modal dispatcher ships them across processes).
"""

from __future__ import annotations

from typing import Any, Final

from comfy_llm_core import ComfyLLMError, ErrorAction, install_command
from comfy_llm_residency.errors import (
    BackendUnloadedError,
    DeviceOutOfMemoryError,
    EngineNotInstalledError,
    ModelLoadError,
    UnsupportedBackendError,
)

__all__ = [
    "ENGINE_NAME",
    "VLLM_ENGINE_NAME",
    "BackendUnloadedError",
    "CudaBackendError",
    "CudaDriverTooOldError",
    "DeviceOutOfMemoryError",
    "EngineDiedError",
    "EngineNotInstalledError",
    "GenerationOutOfMemoryError",
    "InvalidExecutionStateError",
    "ModelLoadError",
    "PromptTooLongError",
    "QuantizationNotInstalledError",
    "UnsupportedBackendError",
    "UnsupportedQuantizationError",
]

ENGINE_NAME: Final = "transformers"
VLLM_ENGINE_NAME: Final = "vllm"
"""The engine records (``ModelProfile.backend``) this package serves; its errors name them."""

_GIB: Final = 1024**3


class CudaBackendError(ComfyLLMError):
    """Base class of every error raised by ``comfy_llm_backend_cuda``.

    The action is core's FATAL: unclassified engine trouble.
    """


class PromptTooLongError(CudaBackendError, ValueError):
    """The prompt (text plus image and video-frame tokens) fills the context.

    Attributes:
        prompt_tokens: Tokens in the encoded prompt.
        context_tokens: The profile's context limit.
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, prompt_tokens: int, context_tokens: int) -> None:
        self.prompt_tokens = prompt_tokens
        self.context_tokens = context_tokens
        super().__init__(
            f"The prompt is {prompt_tokens} tokens (text, images and video frames together); "
            f"the model profile's context limit is {context_tokens}, leaving no room for an "
            "answer. Shorten the prompt or the files, or pass fewer or smaller images or "
            "video frames."
        )


class EngineDiedError(CudaBackendError, RuntimeError):
    """vLLM's engine core died while serving a request (``EngineDeadError``).

    The backend reports itself unloaded, the manager evicts it, and the next
    request loads a fresh engine.

    Attributes:
        profile_id: The profile whose engine died.
        reason: Why, as far as vLLM said (the engine's error, or its exit).
    """

    action = ErrorAction.RETRY

    def __init__(self, profile_id: str, reason: str) -> None:
        self.profile_id = profile_id
        self.reason = reason
        super().__init__(
            f"The vLLM engine of profile {profile_id} died: {reason}. It was unloaded; run "
            "again to start a fresh engine (if it keeps dying, lower the request's images or "
            "context, or free GPU memory: an out-of-memory kills the engine core)."
        )


class GenerationOutOfMemoryError(CudaBackendError, DeviceOutOfMemoryError):
    """CUDA ran out of memory while generating, even for the fewest images at once.

    The model was admitted and loaded; what did not fit is one request's
    working memory (the vision tower's activations, the prompt's prefill, the
    cache), because something outside this model took the rest: ComfyUI's own
    models, another process, or a reserve set too low. A batch is first split
    until it fits (``transformers._memory_fit``); this is what remains.

    Attributes:
        profile_id: The profile that was generating.
        rows: Prompts generated together when memory ran out (1 once split).
        free_bytes: Device memory free after this process gave back its cache.
        total_bytes: The device's total memory.
        model_bytes: Memory this process's tensors held then (the model).
        after_tokens: Whether tokens had already been streamed (then the request
            cannot be re-run in smaller pieces without repeating its text).
    """

    def __init__(
        self,
        profile_id: str,
        rows: int,
        free_bytes: int,
        total_bytes: int,
        model_bytes: int,
        *,
        after_tokens: bool,
    ) -> None:
        self.profile_id = profile_id
        self.rows = rows
        self.free_bytes = free_bytes
        self.total_bytes = total_bytes
        self.model_bytes = model_bytes
        self.after_tokens = after_tokens
        what = "1 prompt" if rows == 1 else f"{rows} prompts at once"
        when = "after its first tokens" if after_tokens else "before its first token"
        super().__init__(
            f"CUDA ran out of memory generating {what} for profile {profile_id} ({when}): "
            f"{free_bytes / _GIB:.2f} GiB of {total_bytes / _GIB:.2f} GiB was free, and the "
            f"model holds {model_bytes / _GIB:.2f} GiB. Something else holds the rest "
            "(ComfyUI's models, another process). Free it (unload models in ComfyUI, close "
            "other GPU programs) and run again, or pass smaller or fewer images."
        )


class CudaDriverTooOldError(CudaBackendError, RuntimeError):
    """The NVIDIA driver is older than the vLLM build needs (checked through NVML first).

    vLLM 0.32's CUDA wheel links ``libcudart.so.13`` and pins ``torch==2.13.0``
    (CUDA 13): it needs a driver that supports CUDA 13, i.e. R580 or newer.

    Attributes:
        profile_id: The profile being loaded.
        driver_cuda: The CUDA version the driver supports (``12.8``).
        required: The CUDA version the vLLM build needs (``13.0``).
    """

    def __init__(self, profile_id: str, driver_cuda: str, required: str) -> None:
        self.profile_id = profile_id
        self.driver_cuda = driver_cuda
        self.required = required
        super().__init__(
            f"Profile {profile_id} runs on vLLM, whose CUDA build needs CUDA {required} "
            f"(NVIDIA driver R580 or newer), but this driver supports CUDA {driver_cuda}. "
            "Update the driver to R580+, or run the model with Transformers (uninstall vllm "
            "and re-resolve it), or on Modal. A datacenter GPU on an older driver can use "
            "CUDA forward compatibility: put the cuda-compat folder on LD_LIBRARY_PATH "
            "before ComfyUI starts."
        )


class UnsupportedQuantizationError(CudaBackendError, ValueError):
    """vLLM says this GPU cannot run the checkpoint's quantization.

    Attributes:
        profile_id: The profile being loaded.
        quantization: The method (``fp8``, ``modelopt_fp4``).
        capability: The GPU's compute capability as vLLM reports it (``8.9``), or None.
        minimum: The lowest capability vLLM accepts for the method (``10.0``), or None.
        reason: vLLM's own words.

    The action stays FATAL: this GPU will not run it, whatever the input.
    """

    def __init__(
        self,
        profile_id: str,
        quantization: str,
        capability: str | None,
        minimum: str | None,
        reason: str,
    ) -> None:
        self.profile_id = profile_id
        self.quantization = quantization
        self.capability = capability
        self.minimum = minimum
        self.reason = reason
        need = f" needs compute capability >= {minimum}" if minimum else " is not supported"
        have = f"this GPU has {capability}" if capability else "this device"
        super().__init__(
            f"Profile {profile_id}: quantization {quantization!r}{need} and {have} ({reason}). "
            "Run it on a newer GPU (Modal: pick another gpu), or choose an unquantized or "
            "block-FP8 checkpoint of the model."
        )


class QuantizationNotInstalledError(CudaBackendError, ImportError):
    """A profile quantizes at load (``bnb_nf4``), and its library cannot be imported here.

    Attributes:
        profile_id: The profile being loaded.
        quantization: The load quantization (``bnb_nf4``, ``bnb_int8``).
        module: The module that failed to import (``bitsandbytes``, ``accelerate``).
        extra: The ``comfy-llm`` extra that installs it.
        reason: The import error's message.
    """

    action = ErrorAction.FIX_INPUT

    def __init__(
        self, profile_id: str, quantization: str, module: str, extra: str, reason: str
    ) -> None:
        self.profile_id = profile_id
        self.quantization = quantization
        self.module = module
        self.extra = extra
        self.reason = reason
        try:
            how = f": {install_command(extra)}"
        except KeyError:  # an extra this install does not know: its name is the advice
            how = ""
        super().__init__(
            f"Profile {profile_id} quantizes the model as it loads ({quantization}), which "
            f"needs {module!r}; it cannot be imported here ({reason}). Install the "
            f"{extra!r} extra into ComfyUI's Python{how}; or drop the ':nf4' / ':int8' "
            "from the model reference to load it unquantized.",
            name=module,
        )


class InvalidExecutionStateError(CudaBackendError, ValueError):
    """An imported vLLM promotion state is not what ``export_state`` writes.

    Attributes:
        expected: What was expected.
        received: A short description of the data received.
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, state: Any, expected: str) -> None:
        self.expected = expected
        self.received = repr(state)[:200]
        super().__init__(
            f"The vLLM execution state to import is invalid: expected {expected}, got "
            f"{self.received}. Pass exactly what execution_modes().export_state() returned."
        )
