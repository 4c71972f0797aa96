"""Errors raised by the MLX-VLM backend.

Every error derives from :class:`MlxBackendError` and, where a builtin
category fits, from that builtin too (``ValueError`` for a profile meant for
another engine, ``ImportError`` for a missing engine, ``RuntimeError`` for a
failed load or a backend used after unload), so callers that only know the
builtins still catch them. Each message names the input, what was wrong and
the fix. Errors pickle with their attributes (the Modal dispatcher ships
errors across processes).
"""

from __future__ import annotations

from comfy_llm_core import ComfyLLMError, ErrorAction

__all__ = [
    "APPLE_EXTRA_HINT",
    "BackendTargetError",
    "BackendUnloadedError",
    "MlxBackendError",
    "MlxNotInstalledError",
    "ModelLoadError",
]

APPLE_EXTRA_HINT = 'pip install "comfy-llm[apple]"'
"""The install command that brings MLX-VLM (and MLX) in."""


class MlxBackendError(ComfyLLMError):
    """Base class of every error raised by ``comfy_llm_backend_mlx``."""

    action = ErrorAction.FATAL


class BackendTargetError(MlxBackendError, ValueError):
    """The profile was resolved for another engine or execution target.

    Attributes:
        profile_id: The profile that was refused.
        field: ``"backend"`` or ``"execution_target"``.
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
            f"Profile {profile_id} has {field}={value!s}, but the MLX-VLM backend only loads "
            f"profiles with {field}={expected}. Resolve the model again for the "
            "local_apple target (a profile of one target is never loaded by another)."
        )


class MlxNotInstalledError(MlxBackendError, ImportError):
    """MLX or MLX-VLM cannot be imported on this machine.

    Attributes:
        missing: The module that failed to import.
    """

    action = ErrorAction.FATAL

    def __init__(self, missing: str, reason: str) -> None:
        self.missing = missing
        super().__init__(
            f"The MLX-VLM backend needs {missing!r}, which cannot be imported here ({reason}). "
            f"Install the Apple extra into ComfyUI's Python: {APPLE_EXTRA_HINT} "
            "(macOS on Apple Silicon; on Linux the dev environment uses mlx[cpu])."
        )


class ModelLoadError(MlxBackendError, RuntimeError):
    """MLX-VLM could not load the snapshot.

    Attributes:
        path: The snapshot directory.
        reason: What MLX-VLM reported.
    """

    # This engine installation cannot load the snapshot.
    action = ErrorAction.FATAL

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            f"MLX-VLM could not load the model snapshot at {path}: {reason}. "
            "Check that the profile's architecture is one MLX-VLM supports and that the "
            "snapshot is complete; delete the snapshot directory to download it again."
        )


class BackendUnloadedError(MlxBackendError, RuntimeError):
    """``generate`` was called after ``unload``.

    Attributes:
        profile_id: The profile whose model was unloaded.
    """

    # The manager loads a fresh backend on the next request.
    action = ErrorAction.RETRY

    def __init__(self, profile_id: str) -> None:
        self.profile_id = profile_id
        super().__init__(
            f"The MLX-VLM backend for profile {profile_id} was unloaded; create a new "
            "backend (the resident model manager reloads it on the next request)."
        )
