"""Errors raised by the Transformers and vLLM backends.

Every error derives from :class:`CudaBackendError`. Where a builtin category
fits, the error also derives from it (``ImportError`` for a missing engine,
``ValueError`` for a profile or request this backend cannot serve), so
callers that only know the builtins still catch them. Each message names the
value, the limit it broke and the fix; the same facts are attributes.

Errors from the snapshot check (``comfy_llm_staging.IncompleteSnapshotError``)
and whatever a token callback raises pass through unchanged.

Errors survive pickling (the Modal dispatcher ships them across processes).
"""

from __future__ import annotations

from typing import Any

from comfy_llm_core import ComfyLLMError, ErrorAction

__all__ = [
    "BackendUnloadedError",
    "CudaBackendError",
    "EngineDiedError",
    "EngineNotInstalledError",
    "InvalidExecutionStateError",
    "ModelLoadError",
    "PromptTooLongError",
    "UnsupportedBackendError",
    "UnsupportedQuantizationError",
    "VllmNotInstalledError",
]


class CudaBackendError(ComfyLLMError):
    """Base class of every error raised by ``comfy_llm_backend_cuda``."""

    action = ErrorAction.FATAL


class UnsupportedBackendError(CudaBackendError, ValueError):
    """The profile names a backend this package does not provide.

    Attributes:
        profile_id: The profile that was offered.
        backend: The backend it names (``mlx_vlm``, ...).
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, profile_id: str, backend: str) -> None:
        self.profile_id = profile_id
        self.backend = backend
        detail = (
            "this package runs only the backends 'transformers' and 'vllm'. Load it with the "
            "package that provides that backend (mlx_vlm: comfy-llm[apple]) or re-resolve the "
            "model for this execution target"
        )
        super().__init__(f"Profile {profile_id} names backend {backend!r}: {detail}.")


class EngineNotInstalledError(CudaBackendError, ImportError):
    """torch or transformers cannot be imported.

    Attributes:
        module: The module that failed to import.
        reason: The import error's message.
    """

    action = ErrorAction.FATAL

    def __init__(self, module: str, reason: str) -> None:
        self.module = module
        self.reason = reason
        super().__init__(
            f"The Transformers backend needs {module!r}, which cannot be imported ({reason}). "
            'Install it with: pip install "comfy-llm[cuda]"',
            name=module,
        )


class ModelLoadError(CudaBackendError, RuntimeError):
    """Transformers could not load the processor or the model from the snapshot.

    Attributes:
        profile_id: The profile being loaded.
        path: The snapshot directory.
        what: ``processor`` or ``model``.
        reason: The underlying error's message.
    """

    # This engine installation cannot load the snapshot.
    action = ErrorAction.FATAL

    def __init__(self, profile_id: str, path: str, what: str, reason: str) -> None:
        self.profile_id = profile_id
        self.path = path
        self.what = what
        self.reason = reason
        super().__init__(
            f"Could not load the {what} of profile {profile_id} from {path}: {reason}. "
            "Check that this Transformers version supports the architecture (no remote code "
            "is run) and re-stage the snapshot if its files are damaged."
        )


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


class BackendUnloadedError(CudaBackendError, RuntimeError):
    """``generate`` was called after ``unload``.

    Attributes:
        profile_id: The profile the backend held.
    """

    # The manager loads a fresh backend on the next request.
    action = ErrorAction.RETRY

    def __init__(self, profile_id: str) -> None:
        self.profile_id = profile_id
        super().__init__(
            f"The backend of profile {profile_id} was unloaded; load it again "
            "(create_backend) before generating."
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


class VllmNotInstalledError(CudaBackendError, ImportError):
    """The profile needs vLLM, which cannot be imported here.

    Attributes:
        profile_id: The profile being loaded.
        reason: The import error's message.
    """

    action = ErrorAction.FATAL

    def __init__(self, profile_id: str, reason: str) -> None:
        self.profile_id = profile_id
        self.reason = reason
        super().__init__(
            f"Profile {profile_id} runs on the vLLM backend, but vllm cannot be imported "
            f'({reason}). Install the extra: pip install "comfy-llm[cuda,vllm]" (Linux), or '
            "re-resolve the model without vLLM installed to get a Transformers profile.",
            name="vllm",
        )


class UnsupportedQuantizationError(CudaBackendError, ValueError):
    """vLLM says this GPU cannot run the checkpoint's quantization.

    Attributes:
        profile_id: The profile being loaded.
        quantization: The method (``fp8``, ``modelopt_fp4``).
        capability: The GPU's compute capability as vLLM reports it (``8.9``), or None.
        minimum: The lowest capability vLLM accepts for the method (``10.0``), or None.
        reason: vLLM's own words.
    """

    action = ErrorAction.FATAL

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
