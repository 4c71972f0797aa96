"""A residency ``BackendFactory``: a profile and its staged folder to a loaded backend.

A ``llama_cpp`` profile (profiles' engine table; decided from the GGUF header
by ``comfy_llm_profiles.decide_gguf``) reaches this factory through
residency's ``create_backend``: the folder holds the model GGUF and its ``mmproj-*.gguf`` (or the
profile's ``backend_options`` name them), and the GPU budget is the reading
admission admitted the load with, less the target's reserve.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from comfy_llm_residency import admitted_memory, default_reserve_gb

from ._backend import DEFAULT_CONTEXT_TOKENS, LlamaCppBackend
from ._files import find_gguf_files
from .errors import ENGINE_NAME, UnsupportedBackendError

if TYPE_CHECKING:
    from comfy_llm_core import ProgressCallback
    from comfy_llm_profiles import ModelProfile

__all__ = ["create_backend", "gpu_budget_bytes"]

_MODEL_OPTION = "gguf_file"
_PROJECTOR_OPTION = "mmproj_file"


def gpu_budget_bytes(profile: ModelProfile) -> int | None:
    """GPU memory this load may use: admission's reading less the reserve; None off a GPU."""
    reading = admitted_memory()
    if reading is None or not reading.device.startswith("cuda"):
        return None
    reserve = int(default_reserve_gb(profile.execution_target) * 2**30)
    return max(0, reading.available_bytes - reserve)


def _files(profile: ModelProfile, folder: Path) -> tuple[Path, Path | None]:
    options = dict(profile.backend_options)
    model, projector = options.get(_MODEL_OPTION), options.get(_PROJECTOR_OPTION)
    if isinstance(model, str):
        return folder / model, folder / projector if isinstance(projector, str) else None
    return find_gguf_files(folder)


def create_backend(
    profile: ModelProfile, snapshot_path: Path, progress: ProgressCallback
) -> LlamaCppBackend:
    """Load a llama.cpp backend for a ``llama_cpp`` profile (a residency ``BackendFactory``).

    Raises:
        UnsupportedBackendError: The profile is for another engine.
        GgufFilesError: The folder does not hold one model (and one projector).
        UnsafeGgufError: A file was refused before llama.cpp saw it.
        EngineNotInstalledError: llama-cpp-python is not installed.
        ModelLoadError: llama.cpp could not load a checked file.
    """
    if profile.backend != ENGINE_NAME:
        raise UnsupportedBackendError(profile.profile_id, "backend", profile.backend, ENGINE_NAME)
    model, projector = _files(profile, Path(snapshot_path))
    return LlamaCppBackend.open(
        model,
        projector,
        label=profile.repository,
        reasoning_parser=profile.reasoning_parser,
        architecture=profile.architecture,
        context_tokens=profile.limits.context_tokens or DEFAULT_CONTEXT_TOKENS,
        gpu_budget_bytes=gpu_budget_bytes(profile),
        progress=progress,
    )
