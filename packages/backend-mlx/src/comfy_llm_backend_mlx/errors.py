"""The errors of the MLX-VLM backend: the backend vocabulary every engine shares.

A missing engine, a failed load, a profile for another engine or target and
a backend used after unload are the four things a caller handles; their
classes are defined once in ``comfy_llm_residency.errors`` (their words come
from the engine table: the ``mlx_vlm`` record's label and extra) and
re-exported here, so callers catch the same classes whichever engine runs.
"""

from __future__ import annotations

from typing import Final

from comfy_llm_residency.errors import (
    BackendUnloadedError,
    EngineNotInstalledError,
    ModelLoadError,
    UnsupportedBackendError,
)

__all__ = [
    "ENGINE_NAME",
    "BackendUnloadedError",
    "EngineNotInstalledError",
    "ModelLoadError",
    "UnsupportedBackendError",
]

ENGINE_NAME: Final = "mlx_vlm"
"""The engine record (``ModelProfile.backend``) this package serves; its errors name it."""
