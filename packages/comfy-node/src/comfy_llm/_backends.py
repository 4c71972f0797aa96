"""Pick the engine for a profile, importing it only when it is needed.

The node package never imports an engine at module level: installing
``comfy-llm[apple]`` must not pull torch, nor ``[cuda]`` pull mlx.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from comfy_llm_profiles import ModelProfile, ProgressCallback

__all__ = ["create_backend"]

_ENGINES = {
    "mlx_vlm": ("comfy_llm_backend_mlx", "apple"),
    "transformers": ("comfy_llm_backend_cuda", "cuda"),
    "vllm": ("comfy_llm_backend_cuda", "vllm"),
}


def create_backend(profile: ModelProfile, snapshot_path: Path, progress: ProgressCallback) -> Any:
    """Load the backend the profile names (a residency ``BackendFactory``).

    Raises:
        ValueError: The profile names a backend this package does not know.
        ImportError: The engine's package is not installed; names the extra.
    """
    try:
        module_name, extra = _ENGINES[profile.backend]
    except KeyError:
        known = ", ".join(sorted(_ENGINES))
        raise ValueError(
            f"Profile {profile.profile_id} names backend {profile.backend!r}; known: {known}. "
            "Re-resolve the model with this version."
        ) from None
    import importlib

    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name != module_name:
            raise
        raise ImportError(
            f"The {profile.backend} backend is not installed ({error}). "
            f'Install it with: pip install "comfy-llm[{extra}]"'
        ) from error
    return module.create_backend(profile, snapshot_path, progress)
