"""Errors raised by the llama.cpp backend.

Every error derives from :class:`LlamaCppBackendError` and, where a builtin
category fits, from that builtin too (``ValueError`` for a refused file or a
profile meant for another engine, ``ImportError`` for a missing engine,
``RuntimeError`` for a failed load or a backend used after close), so callers
that only know the builtins still catch them. Each message names the input,
what was wrong and the fix. Errors pickle with their attributes.
"""

from __future__ import annotations

from comfy_llm_core import ComfyLLMError, ErrorAction, install_command
from comfy_llm_profiles.errors import (
    UnsafeGgufError,
)  # a weight-format rule: checked where a GGUF enters

__all__ = [
    "LLAMACPP_EXTRA_HINT",
    "BackendTargetError",
    "BackendUnloadedError",
    "GgufFilesError",
    "LlamaCppBackendError",
    "LlamaCppNotInstalledError",
    "ModelLoadError",
    "PromptTooLongError",
    "UnsafeGgufError",
]

LLAMACPP_EXTRA_HINT = (
    f"{install_command('llamacpp')} (compiles llama.cpp; for CUDA set "
    'CMAKE_ARGS="-DGGML_CUDA=on" first, see the backend README)'
)
"""The install command that brings llama-cpp-python in."""


class LlamaCppBackendError(ComfyLLMError):
    """Base class of every error raised by ``comfy_llm_backend_llamacpp``."""

    action = ErrorAction.FATAL


class GgufFilesError(LlamaCppBackendError, ValueError):
    """A folder does not hold exactly one model GGUF (and at most one projector).

    Attributes:
        directory: The folder.
        reason: What was found.
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, directory: str, reason: str) -> None:
        self.directory = directory
        self.reason = reason
        super().__init__(
            f"The folder {directory} cannot be loaded by llama.cpp: {reason}. Keep one model "
            "GGUF and its mmproj-*.gguf projector per folder, or name both in the profile."
        )


class BackendTargetError(LlamaCppBackendError, ValueError):
    """The profile was resolved for another engine.

    Attributes:
        profile_id: The profile that was refused.
        field: The profile field.
        value: What the profile says.
        expected: What this backend needs.
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, profile_id: str, field: str, value: object, expected: str) -> None:
        self.profile_id = profile_id
        self.field = field
        self.value = value
        self.expected = expected
        super().__init__(
            f"Profile {profile_id} has {field}={value!s}, but the llama.cpp backend only loads "
            f"profiles with {field}={expected}. Resolve the model again for this engine."
        )


class LlamaCppNotInstalledError(LlamaCppBackendError, ImportError):
    """llama-cpp-python cannot be imported on this machine.

    Attributes:
        missing: The module that failed to import.
    """

    # Installing the engine is a step outside this process.
    action = ErrorAction.FATAL

    def __init__(self, missing: str, reason: str) -> None:
        self.missing = missing
        super().__init__(
            f"The llama.cpp backend needs {missing!r}, which cannot be imported here ({reason}). "
            f"Install it into ComfyUI's Python: {LLAMACPP_EXTRA_HINT}."
        )


class ModelLoadError(LlamaCppBackendError, RuntimeError):
    """llama.cpp could not load a checked GGUF file.

    Attributes:
        path: The file.
        reason: What llama.cpp reported.
    """

    # This engine build cannot load the file.
    action = ErrorAction.FATAL

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            f"llama.cpp could not load {path}: {reason}. The file passed the GGUF checks; "
            "check that this llama-cpp-python build supports its architecture and projector, "
            "and that the projector belongs to this model."
        )


class PromptTooLongError(LlamaCppBackendError, ValueError):
    """The prompt (text plus image tokens) does not fit the context.

    Attributes:
        prompt_tokens: Tokens the prompt needs.
        context_tokens: The context the model was loaded with.
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, prompt_tokens: int, context_tokens: int) -> None:
        self.prompt_tokens = prompt_tokens
        self.context_tokens = context_tokens
        super().__init__(
            f"The prompt needs {prompt_tokens} tokens (text and images), but the model was "
            f"loaded with a context of {context_tokens}. Shorten the prompt, send fewer or "
            "smaller images, or raise the context size."
        )


class BackendUnloadedError(LlamaCppBackendError, RuntimeError):
    """``generate`` was called after ``unload``.

    Attributes:
        profile_id: The model whose backend was closed.
    """

    # The manager loads a fresh backend on the next request.
    action = ErrorAction.RETRY

    def __init__(self, profile_id: str) -> None:
        self.profile_id = profile_id
        super().__init__(
            f"The llama.cpp backend for {profile_id} was closed; create a new backend "
            "(the resident model manager reloads it on the next request)."
        )
