"""The RemoteEngine's body: one warm GPU worker serving requests one at a time.

Per request::

    retired already?                      → WorkerUnsafeError (the dispatcher retries)
    import carried promotion state        (a retry after auto promotion stays compiled)
    snapshot visible under the root?  no  → Volume.reload(), look again, else
                                            SnapshotNotVisibleError; a reload that
                                            fails (files open under the mount,
                                            modal/volume.py:917) retires the worker
    residency manager for ``modal``       (CUDA probe, reserve, LRU limit, recovery
                                           timeout, backend chosen by the profile)
      memory recovery exhausted           → retire: stop fetching inputs, raise
                                            WorkerUnsafeError with the exported state
    cold vLLM load                        → commit the compile-cache Volume, so the
                                            next new container loads the compiled
                                            artifacts instead of compiling again
                                            (``modal_compile_cache_commit``)
    result + the seed's gpu_* fields, ``modal_compile_cache_warm``

Cancellation arrives as Modal's ``InputCancellation`` (a ``BaseException``),
raised by a SIGUSR1 handler in the main thread at whatever bytecode runs
(modal/_container_entrypoint.py:250-260). Outside a model load it goes
straight through: the manager and backend let it pass, the model stays
resident and the lock is released. During a cold load it is held until the
load returns (``_serve.CancelShield``): a vLLM engine builds on another
thread, and a cancel that unwound the caller mid-build would leave an engine
nobody owns holding GPU memory. The load finishes, the manager owns the
model, then the cancellation is raised.
"""

from __future__ import annotations

import importlib
import logging
import time
from pathlib import Path
from typing import Protocol

from comfy_llm_core import ExecutionTarget, env_str
from comfy_llm_inputs import PreparedInputs
from comfy_llm_profiles import ModelProfile
from comfy_llm_residency import (
    InferenceResult,
    InsufficientMemoryError,
    MemoryProbe,
    ModalWorkerFacts,
    ResidentModelManager,
    create_backend,
)
from comfy_llm_residency.backend import BackendFactory
from comfy_llm_staging import IncompleteSnapshotError, require_completed_snapshot

from ..errors import DeploymentMismatchError, SnapshotNotVisibleError, WorkerUnsafeError
from ..wire._channel import ProgressChannel
from ..wire._plain import WireDict, WireMapping
from ..wire._settings import COMPILE_CACHE_ROOT_ENV, FINGERPRINT_ENV
from ..wire._wire import EngineRequest, EventSender
from ._container import ContainerControl, VolumeStore
from ._serve import CancelShield, serve_input

__all__ = ["EngineService"]

logger = logging.getLogger("comfy_llm_modal_remote")
_GIB = 1024**3
_CUDA_BACKEND = "comfy_llm_backend_cuda"
"""Where the vLLM execution modes a retry carries live (read by name, never imported here)."""
_COMPILED_DIR = ("vllm", "torch_compile_cache")
"""Where vLLM (0.32) keeps its compiled artifacts below a cache namespace."""


class EngineService:
    """The state of one GPU container: its manager, Volume view and retirement flag.

    Args:
        storage_root: Where the weight Volume is mounted.
        volume: The weight Volume (reloaded when a snapshot is not visible yet).
        container: Retires the container when memory does not come back.
        backend_factory: Loads backends; residency's ``create_backend`` (the
            package the profile's engine record names, imported by name) when None.
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
            backend_factory=backend_factory or create_backend,
            memory_probe=memory_probe,
        )
        self._event_interval = event_interval
        self._carried_state: WireDict = {}
        self.unsafe = False
        self.reloads = 0
        self.compile_cache_commits = 0
        self.last_compile_cache_commit: str | None = None

    # -- vLLM promotion state ------------------------------------------------
    def export_promotion_state(self) -> WireDict:
        """The execution state a fresh worker should start from.

        The vLLM backend's process-wide execution modes when backend-cuda has
        them, else what this worker was handed (carried through unchanged).
        """
        modes = _execution_modes()
        if modes is not None:
            return modes.export_state()
        return dict(self._carried_state)

    def import_promotion_state(self, state: WireMapping) -> None:
        """Adopt a retired worker's execution state (auto promotion survives)."""
        modes = _execution_modes()
        if modes is not None:
            modes.import_state(dict(state))
        else:
            self._carried_state.update(state)

    # -- one request ---------------------------------------------------------
    def serve(self, request_wire: WireMapping, channel: ProgressChannel) -> WireDict:
        """Serve one wire request; every ordinary error comes back as an envelope."""
        return serve_input(
            lambda: self.generate(EngineRequest.from_wire(request_wire), channel).to_dict(),
            channel,
            what="Request",
            container="GPU",
        )

    def generate(self, request: EngineRequest, channel: ProgressChannel) -> InferenceResult:
        """Serve one request (see the module docstring for the order)."""
        started = time.monotonic()
        if self.unsafe:
            raise WorkerUnsafeError(
                "this worker was already retired after a failed memory recovery.",
                self.export_promotion_state(),
            )
        deployed = env_str(FINGERPRINT_ENV)
        if request.code_fingerprint and deployed and request.code_fingerprint != deployed:
            raise DeploymentMismatchError(request.code_fingerprint, deployed)
        if request.promotion_state:
            self.import_promotion_state(request.promotion_state)
        profile = ModelProfile.from_dict(request.profile)
        path = self.visible_snapshot(profile, request.snapshot)
        inputs = PreparedInputs.from_wire(request.inputs)
        settings = request.generation_settings()
        sender = EventSender(channel, interval=self.event_interval)
        shield = CancelShield()
        free_before = self._free_bytes()
        compiled_before = _compiled_graphs()
        self.last_compile_cache_commit = None
        try:
            result = self.manager.run(
                profile,
                path,
                inputs,
                settings,
                reserve_gb=request.reserve_gb,
                keep_loaded=request.keep_loaded,
                progress=shield.relay(sender),
                prompt_id=request.prompt_id,
            )
        except InsufficientMemoryError as error:
            if error.recovery_timed_out or self.manager.unsafe_for_reuse:
                raise self.retire(str(error)) from error
            raise
        finally:
            shield.release(raise_pending=False)
            sender.flush()
        shield.raise_pending()
        if self.manager.unsafe_for_reuse:
            self.retire("an unload failed after the request.")
        metadata = result.metadata
        namespace = metadata.engine.details.get("vllm_compile_cache_namespace")
        cold = metadata.residency.cache_status == "cold"
        if isinstance(namespace, str) and cold:
            self.commit_compile_cache()
        worker = ModalWorkerFacts(
            gpu_total_gib=_number(metadata.residency.total_memory_bytes) / _GIB,
            gpu_free_before_gib=(free_before if free_before is not None else 0) / _GIB,
            gpu_free_after_gib=_number(metadata.residency.available_memory_bytes) / _GIB,
            modal_volume_reloads=self.reloads,
            modal_compile_cache_warm=_found_own_graphs(namespace, compiled_before),
            modal_compile_cache_commit=self.last_compile_cache_commit,
            modal_progress_events_dropped=sender.dropped,
            modal_worker_seconds=round(time.monotonic() - started, 3),
        )
        return InferenceResult(
            result.response, result.reasoning, metadata.replace(modal_worker=worker)
        )

    # -- what a request body uses (``generate`` here, the fan-out's chunk body) --
    @property
    def event_interval(self) -> float:
        """Seconds between progress sends while generating (this worker's setting)."""
        return self._event_interval

    def commit_compile_cache(self) -> None:
        """Publish what a cold vLLM load compiled; the outcome goes to the metadata.

        ``Volume.commit()`` reloads after committing (modal/volume.py:902-904),
        and that reload fails while this process holds files open under the
        mount: the failure is reported (``modal_compile_cache_commit``), not
        swallowed; a failed commit costs the next container a recompile.
        """
        if self._compile_cache is None:
            return
        try:
            self._compile_cache.commit()
        except Exception as error:
            logger.warning("Committing the compile-cache Volume failed: %s", error)
            self.last_compile_cache_commit = f"failed: {type(error).__name__}: {error}"[:300]
            return
        self.compile_cache_commits += 1
        self.last_compile_cache_commit = "ok"

    def _reload_weights(self) -> None:
        """``Volume.reload()``, which fails while files under the mount are open.

        A warm backend holds its weights open or mapped (the strict stand-in
        shows Transformers does), so a refused reload retires this worker: the
        dispatcher's one retry lands on a fresh container, which mounts the
        latest state with clean memory. Unloading the residents here instead
        would lose them just the same and could not tell memory that never
        comes back from memory that does.
        """
        try:
            self._volume.reload()
        except RuntimeError as error:
            reason = f"the weight Volume could not be reloaded to see a new model ({error})."
            raise self.retire(reason) from error
        self.reloads += 1

    def visible_snapshot(self, profile: ModelProfile, relative: str) -> Path:
        """The staged snapshot under this worker's mount, reloading the Volume once.

        ``relative`` comes over the wire: a path that leaves the storage root,
        or a snapshot still not complete after one reload, is
        :class:`SnapshotNotVisibleError`; a refused reload retires the worker
        (:meth:`_reload_weights`).
        """
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
                self._reload_weights()
        raise SnapshotNotVisibleError(profile.repository, profile.revision, str(self.storage_root))

    def _free_bytes(self) -> int | None:
        try:
            return self.manager.memory_probe.snapshot().available_bytes
        except Exception:
            logger.exception("Reading GPU memory before the request failed")
            return None

    def retire(self, reason: str) -> WorkerUnsafeError:
        """Mark this worker unsafe and stop fetching inputs; returns the error to raise.

        The error carries the exported promotion state, so the dispatcher's
        retry on a fresh container keeps the execution mode; the current input
        ends with it and the container is not handed another.
        """
        self.unsafe = True
        try:
            self._container.stop_fetching_inputs()
        except Exception:
            logger.exception("stop_fetching_inputs failed; the worker stays marked unsafe")
        return WorkerUnsafeError(reason, self.export_promotion_state())


class _ExecutionModes(Protocol):
    """What backend-cuda's ``execution_modes()`` gives the worker (found by name, not imported)."""

    def export_state(self) -> WireDict: ...

    def import_state(self, state: WireDict) -> None: ...


def _execution_modes() -> _ExecutionModes | None:
    """backend-cuda's process-wide vLLM execution modes, when it provides them."""
    try:
        module = importlib.import_module(_CUDA_BACKEND)
    except ImportError:
        return None
    accessor = getattr(module, "execution_modes", None)
    return accessor() if accessor is not None else None


def _compiled_graphs() -> dict[str, frozenset[str]] | None:
    """Per cache namespace, the compiled-graph folders vLLM already keeps there.

    vLLM keeps one folder per model and compilation config below
    ``<namespace>/vllm/torch_compile_cache/<hash>``. Read before a request and
    compared after it by :func:`_found_own_graphs`. None when no root is
    configured (outside the GPU image).
    """
    configured = env_str(COMPILE_CACHE_ROOT_ENV)
    if not configured:
        return None
    root = Path(configured)
    try:
        namespaces = [entry for entry in root.iterdir() if entry.is_dir()]
    except OSError:
        return {}
    graphs: dict[str, frozenset[str]] = {}
    for namespace in namespaces:
        compiled = namespace.joinpath(*_COMPILED_DIR)
        try:
            graphs[namespace.name] = frozenset(
                entry.name for entry in compiled.iterdir() if entry.is_dir()
            )
        except OSError:
            graphs[namespace.name] = frozenset()
    return graphs


def _found_own_graphs(namespace: object, before: dict[str, frozenset[str]] | None) -> bool | None:
    """Whether this request's load found its own model's compiled graphs.

    True when the namespace held compiled graphs before and the load added
    no new graph folder (a compile of this model and config would have
    written one); a first compile of model B next to model A's graphs is
    therefore False. None without a namespace or root.
    """
    if not isinstance(namespace, str) or before is None:
        return None
    after = _compiled_graphs() or {}
    had = before.get(namespace, frozenset())
    return bool(had) and not (after.get(namespace, frozenset()) - had)


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0
