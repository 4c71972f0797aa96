"""Errors raised by the llama.cpp backend.

A missing engine, a failed load, a profile for another engine and a backend
used after unload are the four things a caller handles whichever engine
runs: their classes are defined once in ``comfy_llm_residency.errors`` (their
words come from the engine table's ``llama_cpp`` record) and re-exported here.
The classes below are this engine's own: a refused GGUF folder, a prompt
over the context, a llama.cpp call that failed mid-request. Each derives from
:class:`LlamaCppBackendError` and, where a builtin category fits, from that
builtin too. Each message names the input, what was wrong and the fix.
"""

from __future__ import annotations

from typing import Final

from comfy_llm_core import ComfyLLMError, ErrorAction, install_command
from comfy_llm_profiles.errors import UnsafeGgufError  # a weight-format rule: checked at entry
from comfy_llm_residency.errors import (
    BackendUnloadedError,
    EngineNotInstalledError,
    ModelLoadError,
    UnsupportedBackendError,
)

__all__ = [
    "ENGINE_NAME",
    "LLAMACPP_EXTRA_HINT",
    "BackendUnloadedError",
    "EngineNotInstalledError",
    "GenerationError",
    "GgufFilesError",
    "LlamaCppBackendError",
    "ModelLoadError",
    "PromptTooLongError",
    "UnsafeGgufError",
    "UnsupportedBackendError",
]

ENGINE_NAME: Final = "llama_cpp"
"""The engine record (``ModelProfile.backend``) this package serves; its errors name it."""

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


class GenerationError(LlamaCppBackendError, RuntimeError):
    """llama.cpp or libmtmd failed on a request after the model loaded.

    Attributes:
        what: What it was working on (``image``, ``prompt``).
        reason: What it reported.
    """

    def __init__(self, what: str, reason: str) -> None:
        self.what = what
        self.reason = reason
        super().__init__(
            f"llama.cpp failed on the {what}: {reason}. The model stays loaded; try a smaller "
            "or different input, and check that this llama-cpp-python build supports the "
            "model and its projector."
        )
