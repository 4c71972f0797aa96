"""The MLX-VLM backend: runs ``local_apple`` profiles in-process with MLX-VLM.

Importing this package does not import MLX: the engine is imported when a
backend is created, and a missing MLX raises :class:`EngineNotInstalledError`
(an ``ImportError``) that names the command installing the ``apple`` extra
from this install (``comfy_llm_core.install_command``).

Example::

    from comfy_llm_backend_mlx import create_backend

    backend = create_backend(profile, staged.path, progress)  # a BackendFactory
    result = backend.generate(prepared_inputs, settings, on_token)
    backend.unload()
"""

from __future__ import annotations

from ._backend import ENGINE_NAMES, MlxVlmBackend, create_backend
from ._thinking import thinking_budget_for
from .errors import (
    BackendUnloadedError,
    EngineNotInstalledError,
    ModelLoadError,
    UnsupportedBackendError,
)

__version__ = "0.1.0"

__all__ = [
    "ENGINE_NAMES",
    "BackendUnloadedError",
    "EngineNotInstalledError",
    "MlxVlmBackend",
    "ModelLoadError",
    "UnsupportedBackendError",
    "__version__",
    "create_backend",
    "thinking_budget_for",
]
