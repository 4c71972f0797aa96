"""The RemoteEngine's body: one warm GPU worker serving requests one at a time.

Per request::

    retired already?                      → WorkerUnsafeError (the dispatcher retries)
    import carried promotion state        (a retry after auto promotion stays compiled)
    snapshot visible under the root?  no  → Volume.reload(), look again, else
                                            SnapshotNotVisibleError
    residency manager for ``modal``       (CUDA probe, reserve, LRU limit, recovery
                                           timeout, backend chosen by the profile)
      memory recovery exhausted           → retire: stop fetching inputs, raise
                                            WorkerUnsafeError with the exported state
    cold vLLM load                        → commit the compile-cache Volume, so the
                                            next new container loads the compiled
                                            artifacts instead of compiling again
    result + the seed's gpu_* fields, ``modal_compile_cache_warm``

Cancellation arrives as Modal's ``InputCancellation`` (a ``BaseException``)
inside the running request; the manager and backend let it through, the model
stays resident and the lock is released for the next input.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from comfy_llm_core import env_str
from comfy_llm_inputs import PreparedInputs
from comfy_llm_profiles import ExecutionTarget, ModelProfile, ProgressCallback
from comfy_llm_residency import (
    BackendFactory,
    InferenceResult,
    InsufficientMemoryError,
    MemoryProbe,
    ResidentModelManager,
)
from comfy_llm_staging import IncompleteSnapshotError, require_completed_snapshot

from ._container import ContainerControl, ProgressChannel, VolumeStore
from ._settings import COMPILE_CACHE_ROOT_ENV
from ._wire import EngineRequest, EventSender, error_envelope, ok_envelope
from .errors import SnapshotNotVisibleError, WorkerUnsafeError

__all__ = ["EngineService", "create_cuda_backend"]

logger = logging.getLogger("comfy_llm_modal_remote")
_GIB = 1024**3
_CUDA_BACKEND = "comfy_llm_backend_cuda"
_COMPILED_DIR = ("vllm", "torch_compile_cache")
"""Where vLLM (0.32) keeps its compiled artifacts below a cache namespace."""


def create_cuda_backend(
    profile: ModelProfile, snapshot_path: Path, progress: ProgressCallback
) -> Any:
    """The worker's ``BackendFactory``: Transformers or vLLM, as the profile says.

    Imported by name, like the node's engine table, so importing this package
    (the node does, for the dispatcher) never reaches an engine.
    """
    return importlib.import_module(_CUDA_BACKEND).create_backend(profile, snapshot_path, progress)


class EngineService:
    """The state of one GPU container: its manager, Volume view and retirement flag.

    Args:
        storage_root: Where the weight Volume is mounted.
        volume: The weight Volume (reloaded when a snapshot is not visible yet).
        container: Retires the container when memory does not come back.
        backend_factory: Loads backends; the CUDA backends when None.
        memory_probe: The manager's probe; ``torch.cuda.mem_get_info`` when None.
        event_interval: Seconds between progress sends while generating.
        compile_cache: The compile-cache Volume mounted at the vLLM backend's
            cache root (``COMFY_MODAL_LLM_COMPILE_CACHE_ROOT``), committed after
            each cold vLLM load; None where there is none.
    """

    def __init__(
        self,
        *,
        storage_root: Path,
        volume: VolumeStore,
        container: ContainerControl,
        backend_factory: BackendFactory | None = None,
        memory_probe: MemoryProbe | None = None,
        event_interval: float = 0.2,
        compile_cache: VolumeStore | None = None,
    ) -> None:
        self.storage_root = Path(storage_root)
        self._volume = volume
        self._compile_cache = compile_cache
        self._container = container
        self.manager = ResidentModelManager(
            ExecutionTarget.MODAL,
            backend_factory=backend_factory or create_cuda_backend,
            memory_probe=memory_probe,
        )
        self._event_interval = event_interval
        self._carried_state: dict[str, Any] = {}
        self.unsafe = False
        self.reloads = 0
        self.compile_cache_commits = 0

    # -- vLLM promotion state ------------------------------------------------
    def export_promotion_state(self) -> dict[str, Any]:
        """The execution state a fresh worker should start from.

        The vLLM backend's process-wide execution modes when backend-cuda has
        them, else what this worker was handed (carried through unchanged).
        """
        modes = _execution_modes()
        if modes is not None:
            state: dict[str, Any] = modes.export_state()
            return state
        return dict(self._carried_state)

    def import_promotion_state(self, state: Mapping[str, Any]) -> None:
        """Adopt a retired worker's execution state (auto promotion survives)."""
        modes = _execution_modes()
        if modes is not None:
            modes.import_state(dict(state))
        else:
            self._carried_state.update(state)

    # -- one request ---------------------------------------------------------
    def serve(self, request_wire: Mapping[str, Any], channel: ProgressChannel) -> dict[str, Any]:
        """Serve one wire request; every ordinary error comes back as an envelope."""
        try:
            request = EngineRequest.from_wire(request_wire)
            result = self.generate(request, channel)
        except Exception as error:
            logger.info("Request failed: %s: %s", type(error).__name__, error)
            return error_envelope(error)
        return ok_envelope(result.to_dict())

    def generate(self, request: EngineRequest, channel: ProgressChannel) -> InferenceResult:
        """Serve one request (see the module docstring for the order)."""
        started = time.monotonic()
        if self.unsafe:
            raise WorkerUnsafeError(
                "this worker was already retired after a failed memory recovery.",
                self.export_promotion_state(),
            )
        if request.promotion_state:
            self.import_promotion_state(request.promotion_state)
        profile = ModelProfile.from_dict(request.profile)
        path = self._visible_snapshot(profile, request.snapshot)
        inputs = PreparedInputs.from_wire(request.inputs)
        settings = request.generation_settings()
        sender = EventSender(channel, interval=self._event_interval)
        free_before = self._free_bytes()
        compiled_before = _compiled_namespaces()
        try:
            result = self.manager.run(
                profile,
                path,
                inputs,
                settings,
                reserve_gb=request.reserve_gb,
                keep_loaded=request.keep_loaded,
                progress=sender,
                prompt_id=request.prompt_id,
            )
        except InsufficientMemoryError as error:
            if error.recovery_timed_out or self.manager.unsafe_for_reuse:
                raise self._retire(str(error)) from error
            raise
        finally:
            sender.flush()
        if self.manager.unsafe_for_reuse:
            self._retire("an unload failed after the request.")
        metadata = dict(result.metadata)
        namespace = metadata.get("vllm_compile_cache_namespace")
        if isinstance(namespace, str) and metadata.get("cache_status") == "cold":
            self._commit_compile_cache()
        total = _number(metadata.get("total_memory_bytes"))
        metadata.update(
            gpu_total_gib=total / _GIB,
            gpu_free_before_gib=(free_before if free_before is not None else 0) / _GIB,
            gpu_free_after_gib=_number(metadata.get("available_memory_bytes")) / _GIB,
            modal_volume_reloads=self.reloads,
            modal_compile_cache_warm=(
                namespace in compiled_before
                if isinstance(namespace, str) and compiled_before is not None
                else None
            ),
            modal_worker_seconds=round(time.monotonic() - started, 3),
        )
        return InferenceResult(result.response, result.reasoning, metadata)

    def _commit_compile_cache(self) -> None:
        """Publish what a cold vLLM load compiled; a failed commit costs only a recompile."""
        if self._compile_cache is None:
            return
        try:
            self._compile_cache.commit()
        except Exception:
            logger.exception("Committing the compile-cache Volume failed")
            return
        self.compile_cache_commits += 1

    def _visible_snapshot(self, profile: ModelProfile, relative: str) -> Path:
        path = (self.storage_root / relative).resolve()
        if not path.is_relative_to(self.storage_root.resolve()):
            raise SnapshotNotVisibleError(profile.repository, profile.revision, relative)
        for attempt in range(2):
            try:
                return require_completed_snapshot(
                    path, repository=profile.repository, revision=profile.revision
                )
            except IncompleteSnapshotError:
                if attempt == 1:
                    break
                self._volume.reload()
                self.reloads += 1
        raise SnapshotNotVisibleError(profile.repository, profile.revision, str(self.storage_root))

    def _free_bytes(self) -> int | None:
        try:
            return self.manager.memory_probe.snapshot().available_bytes
        except Exception:
            logger.exception("Reading GPU memory before the request failed")
            return None

    def _retire(self, reason: str) -> WorkerUnsafeError:
        self.unsafe = True
        try:
            self._container.stop_fetching_inputs()
        except Exception:
            logger.exception("stop_fetching_inputs failed; the worker stays marked unsafe")
        return WorkerUnsafeError(reason, self.export_promotion_state())


def _execution_modes() -> Any:
    """backend-cuda's process-wide vLLM execution modes, when it provides them."""
    try:
        module = importlib.import_module(_CUDA_BACKEND)
    except ImportError:
        return None
    accessor = getattr(module, "execution_modes", None)
    return accessor() if accessor is not None else None


def _compiled_namespaces() -> set[str] | None:
    """Cache namespaces under the compile-cache root that already hold compiled artifacts.

    None when no root is configured (outside the GPU image). Read before a
    request, so the metadata can say whether its cold load found a warm cache
    (the benchmark's *cached compilation* versus *first compilation*).
    """
    configured = env_str(COMPILE_CACHE_ROOT_ENV)
    if not configured:
        return None
    root = Path(configured)
    try:
        namespaces = [entry for entry in root.iterdir() if entry.is_dir()]
    except OSError:
        return set()
    warm: set[str] = set()
    for namespace in namespaces:
        compiled = namespace.joinpath(*_COMPILED_DIR)
        try:
            if compiled.is_dir() and next(compiled.iterdir(), None) is not None:
                warm.add(namespace.name)
        except OSError:
            continue
    return warm


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0
