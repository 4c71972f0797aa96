"""Errors raised by the Transformers backend.

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

from comfy_llm_core import ComfyLLMError, ErrorAction

__all__ = [
    "BackendUnloadedError",
    "CudaBackendError",
    "EngineNotInstalledError",
    "ModelLoadError",
    "PromptTooLongError",
    "UnsupportedBackendError",
]


class CudaBackendError(ComfyLLMError):
    """Base class of every error raised by ``comfy_llm_backend_cuda``."""

    action = ErrorAction.FATAL


class UnsupportedBackendError(CudaBackendError, ValueError):
    """The profile names a backend this package does not provide (yet).

    Attributes:
        profile_id: The profile that was offered.
        backend: The backend it names (``vllm``, ``mlx_vlm``, ...).
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, profile_id: str, backend: str) -> None:
        self.profile_id = profile_id
        self.backend = backend
        if backend == "vllm":
            detail = (
                "the vLLM backend is not available in this version of comfy-llm-backend-cuda; "
                "only the Transformers backend is. Re-resolve the model on a machine without "
                "vLLM installed (it then resolves to the Transformers backend) or pick a "
                "Transformers profile"
            )
        else:
            detail = (
                "this package runs only backend 'transformers'. Load it with the package that "
                "provides that backend (mlx_vlm: comfy-llm[apple]) or re-resolve the model for "
                "this execution target"
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
            f"The Transformers backend of profile {profile_id} was unloaded; load it again "
            "(create_backend) before generating."
        )
