"""The one backend factory: a profile's engine record names the package that loads it.

Every caller that loads models (the node's pipeline and captioner, the Modal
worker, the CLI, benchmarks) passes :func:`create_backend` to the manager.
The package is imported by name from the engine table
(``comfy_llm_profiles.ENGINES``), so nothing below the backends imports an
engine, installing ``comfy-llm[apple]`` never pulls torch nor ``[cuda]``
mlx, and a new engine needs no edit here.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from comfy_llm_core import ProgressCallback
from comfy_llm_profiles import ModelProfile, engine_spec

from .backend import Backend
from .errors import EngineNotInstalledError

__all__ = ["create_backend"]


def create_backend(
    profile: ModelProfile, snapshot_path: Path, progress: ProgressCallback
) -> Backend:
    """Load the profile's model with the engine it names (a :data:`BackendFactory`).

    Args:
        profile: The profile; its ``backend`` is a name in ``ENGINES``.
        snapshot_path: The completed snapshot directory staging returned.
        progress: Receives LOAD events; may raise to cancel.

    Returns:
        The loaded backend, from the engine package's own ``create_backend``.

    Raises:
        ProfileValidationError: No engine has the profile's name.
        EngineNotInstalledError: The engine's package is not installed (names the extra).
        Exception: Whatever the engine package raises while loading.
    """
    spec = engine_spec(profile.backend)
    try:
        module = importlib.import_module(spec.module)
    except ModuleNotFoundError as error:
        if error.name != spec.module:
            raise
        raise EngineNotInstalledError(spec.name, spec.module, str(error)) from error
    backend: Backend = module.create_backend(profile, snapshot_path, progress)
    return backend
