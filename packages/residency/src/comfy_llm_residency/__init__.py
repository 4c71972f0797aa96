"""comfy-llm-residency: the resident model manager for comfy-llm.

One process-global :class:`ResidentModelManager` per execution target keeps
loaded models in an LRU of immutable profiles, admits a cold load only when
its memory estimate plus a reserve fits (after asking the host to free memory
and evicting older models), serializes every load and generation under one
lock, and turns a backend's raw token ids into response, reasoning and
JSON-ready metadata. Backends implement the contract of the public module
:mod:`comfy_llm_residency.backend` and plug in through its ``BackendFactory``;
the one factory, :func:`create_backend`, loads the package a profile's engine
record names (``comfy_llm_profiles.ENGINES``).
"""

from ._factory import create_backend
from ._generation import BatchTokenCallback, DecodeTiming, TokenCallback, TokenRelay
from ._host import HostListener, ResidentInfo
from ._loading import admitted_memory, serving_batch
from ._manager import ResidentModelManager
from ._memory import (
    CudaMemoryProbe,
    MemoryProbe,
    MemorySnapshot,
    PsutilMemoryProbe,
    probe_for_target,
)
from ._registry import get_manager, reset_managers
from ._result import InferenceResult
from ._run_metadata import (
    EmptyAnswer,
    HostFacts,
    ModalFacts,
    ModalWorkerFacts,
    RunMetadata,
    StagingFacts,
)
from ._settings import (
    LOCAL_MAX_RESIDENT_ENV,
    LOCAL_RESERVE_ENV,
    MAX_RESIDENT_ENV,
    MODAL_RESERVE_ENV,
    RECOVERY_TIMEOUT_ENV,
    default_reserve_gb,
    max_resident_models,
    memory_recovery_timeout_seconds,
)
from ._state import ManagerState
from .errors import (
    BackendError,
    BackendUnloadedError,
    DeviceOutOfMemoryError,
    EngineNotInstalledError,
    GenerationSettingsError,
    InsufficientMemoryError,
    MemoryProbeError,
    ModelLoadError,
    ReentrantCallError,
    ResidencyError,
    TargetMismatchError,
    UnsupportedBackendError,
    UnsupportedInputError,
)

__version__ = "0.1.0"

__all__ = [
    "DecodeTiming",
    "TokenRelay",
    "admitted_memory",
    "serving_batch",
    "BatchTokenCallback",
    "CudaMemoryProbe",
    "EmptyAnswer",
    "GenerationSettingsError",
    "HostFacts",
    "HostListener",
    "InferenceResult",
    "InsufficientMemoryError",
    "LOCAL_MAX_RESIDENT_ENV",
    "LOCAL_RESERVE_ENV",
    "MAX_RESIDENT_ENV",
    "MODAL_RESERVE_ENV",
    "ManagerState",
    "MemoryProbe",
    "ModalFacts",
    "ModalWorkerFacts",
    "MemoryProbeError",
    "MemorySnapshot",
    "PsutilMemoryProbe",
    "RECOVERY_TIMEOUT_ENV",
    "ReentrantCallError",
    "ResidencyError",
    "ResidentInfo",
    "ResidentModelManager",
    "RunMetadata",
    "StagingFacts",
    "TargetMismatchError",
    "TokenCallback",
    "UnsupportedInputError",
    "default_reserve_gb",
    "get_manager",
    "max_resident_models",
    "memory_recovery_timeout_seconds",
    "probe_for_target",
    "reset_managers",
    # the one backend factory, and the errors every backend package shares
    "create_backend",
    "BackendError",
    "BackendUnloadedError",
    "DeviceOutOfMemoryError",
    "EngineNotInstalledError",
    "ModelLoadError",
    "UnsupportedBackendError",
]
