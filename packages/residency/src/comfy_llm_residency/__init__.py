"""comfy-llm-residency: the resident model manager for comfy-llm.

One process-global :class:`ResidentModelManager` per execution target keeps
loaded models in an LRU of immutable profiles, admits a cold load only when
its memory estimate plus a reserve fits (after asking the host to free memory
and evicting older models), serializes every load and generation under one
lock, and turns a backend's raw token ids into response, reasoning and
JSON-ready metadata. Backends plug in through :data:`BackendFactory`.
"""

from ._generation import report_prompt_opened
from ._host import HostListener, ResidentInfo
from ._loading import admitted_memory
from ._manager import ResidentModelManager
from ._memory import (
    CudaMemoryProbe,
    MemoryProbe,
    MemorySnapshot,
    PsutilMemoryProbe,
    probe_for_target,
)
from ._registry import get_manager, reset_managers
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
from ._types import (
    Backend,
    BackendFactory,
    BackendResult,
    BackendTimings,
    BatchBackend,
    BatchItem,
    BatchTokenCallback,
    GenerationSettings,
    InferenceResult,
    TokenCallback,
)
from .errors import (
    GenerationSettingsError,
    InsufficientMemoryError,
    MemoryProbeError,
    ReentrantCallError,
    ResidencyError,
    TargetMismatchError,
)

__all__ = [
    "admitted_memory",
    "Backend",
    "BackendFactory",
    "BackendResult",
    "BackendTimings",
    "BatchBackend",
    "BatchItem",
    "BatchTokenCallback",
    "CudaMemoryProbe",
    "GenerationSettings",
    "GenerationSettingsError",
    "HostListener",
    "InferenceResult",
    "InsufficientMemoryError",
    "LOCAL_MAX_RESIDENT_ENV",
    "LOCAL_RESERVE_ENV",
    "MAX_RESIDENT_ENV",
    "MODAL_RESERVE_ENV",
    "ManagerState",
    "MemoryProbe",
    "MemoryProbeError",
    "MemorySnapshot",
    "PsutilMemoryProbe",
    "RECOVERY_TIMEOUT_ENV",
    "ReentrantCallError",
    "ResidencyError",
    "ResidentInfo",
    "ResidentModelManager",
    "TargetMismatchError",
    "TokenCallback",
    "default_reserve_gb",
    "get_manager",
    "max_resident_models",
    "memory_recovery_timeout_seconds",
    "probe_for_target",
    "report_prompt_opened",
    "reset_managers",
]
