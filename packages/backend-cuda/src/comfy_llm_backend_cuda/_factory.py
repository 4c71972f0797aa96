"""The residency ``BackendFactory``: dispatch a profile to the engine it names.

The top of the package's one-way imports: it knows both backends; neither
backend knows it or the other (vLLM is imported only for a vllm profile).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

from comfy_llm_core import ProgressCallback
from comfy_llm_profiles import ModelProfile

from .errors import ENGINE_NAME, VLLM_ENGINE_NAME, UnsupportedBackendError
from .transformers import TransformersBackend

if TYPE_CHECKING:
    from .vllm import VllmBackend

__all__ = ["ENGINE_NAMES", "create_backend", "create_vllm_backend"]

ENGINE_NAMES: Final = (ENGINE_NAME, VLLM_ENGINE_NAME)
"""The engine records (``ModelProfile.backend`` values) this package serves."""


def create_vllm_backend(
    profile: ModelProfile, snapshot_path: Path, progress: ProgressCallback
) -> VllmBackend:
    """Start a resident vLLM engine for a ``vllm`` profile (imports vLLM lazily).

    Raises:
        IncompleteSnapshotError: The snapshot is not complete (from staging).
        EngineNotInstalledError: vllm cannot be imported (names the extra).
        UnsupportedQuantizationError: vLLM says the GPU cannot run the format.
        ModelLoadError: vLLM or the processor could not load the files.
    """
    from .vllm import VllmBackend

    return VllmBackend.load(profile, snapshot_path, progress)


def create_backend(
    profile: ModelProfile, snapshot_path: Path, progress: ProgressCallback
) -> TransformersBackend | VllmBackend:
    """Load a profile's model with the engine it names (a residency ``BackendFactory``).

    ``transformers`` profiles load with Transformers; ``vllm`` profiles start a
    resident vLLM engine (see :func:`create_vllm_backend`).

    Args:
        profile: A profile whose backend is ``transformers`` or ``vllm``.
        snapshot_path: The completed snapshot directory staging returned.
        progress: Receives indeterminate LOAD events ("Loading processor",
            "Loading model"); may raise to cancel.

    Returns:
        The loaded backend.

    Raises:
        UnsupportedBackendError: The profile names another backend.
        EngineNotInstalledError: A ``vllm`` profile, and vllm cannot be imported.
        IncompleteSnapshotError: ``snapshot_path`` has no valid completion
            marker for the profile's repository and revision (from
            ``comfy_llm_staging``).
        EngineNotInstalledError: torch or transformers is missing (an
            ``ImportError`` naming ``comfy-llm[cuda]``).
        ModelLoadError: The engine could not load the processor or model.
    """
    if profile.backend not in ENGINE_NAMES:
        expected = " or ".join(ENGINE_NAMES)
        raise UnsupportedBackendError(profile.profile_id, "backend", profile.backend, expected)
    if profile.backend == VLLM_ENGINE_NAME:
        return create_vllm_backend(profile, snapshot_path, progress)
    return TransformersBackend.load(profile, snapshot_path, progress)
