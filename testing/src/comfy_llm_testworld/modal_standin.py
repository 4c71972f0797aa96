"""An in-process stand-in for Modal: the real worker bodies, a fake platform.

Tests never set Modal credentials, so nothing here talks to Modal. What is
replaced is only the platform: containers are threads, each with its own
view of a shared Volume (a directory copied on commit/reload, so a snapshot
is invisible to an engine until it reloads), progress channels and answers
go through ``pickle`` exactly once each way (so every request, event,
result and error really crosses a serialization boundary), and cancelling a
call raises Modal's own ``InputCancellation`` inside the worker at its next
progress send, as a cancelled Modal input does.

A new GPU container is a new process on Modal: backend-cuda's process-wide
vLLM execution modes start un-promoted there. The containers here share one
process, so :meth:`StandinTransport.container` resets those modes whenever it
starts a container (the tests run one container's calls at a time); a
promotion then reaches a fresh container only through the request's carried
state, as on Modal.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
import queue
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "ContainerLost",
    "DirectoryVolume",
    "FixedMemoryProbe",
    "StandinContainer",
    "StandinTransport",
]

GIB = 1024**3


class DirectoryVolume:
    """One container's view of a shared Volume; ``store`` holds what was committed."""

    def __init__(self, store: Path, view: Path) -> None:
        self.store = Path(store)
        self.view = Path(view)
        self.store.mkdir(parents=True, exist_ok=True)
        self.view.mkdir(parents=True, exist_ok=True)
        self.commits = 0
        self.reloads = 0
        self._copy(self.store, self.view)  # what a fresh container mounts

    @staticmethod
    def _copy(source: Path, dest: Path) -> None:
        shutil.copytree(source, dest, dirs_exist_ok=True, symlinks=True)

    def commit(self) -> None:
        """Publish this view to the store (Volume.commit)."""
        self.commits += 1
        self._copy(self.view, self.store)

    def reload(self) -> None:
        """Refresh this view from the store (Volume.reload)."""
        self.reloads += 1
        self._copy(self.store, self.view)


@dataclasses.dataclass
class FixedMemoryProbe:
    """A GPU-like device reading that never changes.

    A small ``available_bytes`` models memory that does not come back after
    an eviction (the unsafe-worker path).
    """

    total_bytes: int = 80 * GIB
    available_bytes: int = 80 * GIB
    device: str = "cuda:0"

    def snapshot(self) -> Any:
        """The fixed reading."""
        from comfy_llm_residency import MemorySnapshot

        return MemorySnapshot(self.available_bytes, self.total_bytes, self.device)

    def clear_cache(self) -> None:
        """Nothing to clear."""
        return None

    def allocated_bytes(self) -> int | None:
        """Unknown: the manager falls back to the change of ``available_bytes``."""
        return None


class _Cancelled:
    def __init__(self) -> None:
        self.event = threading.Event()
        self.killed = False


class ContainerLost(BaseException):
    """Raised inside a worker whose container was killed (it stops where it is)."""


class _Channel:
    def __init__(self, cancelled: _Cancelled) -> None:
        self.items: queue.Queue[bytes] = queue.Queue()
        self._cancelled = cancelled

    def put_many(self, items: Sequence[dict[str, Any]]) -> None:
        if self._cancelled.killed:
            raise ContainerLost("the container was killed")
        if self._cancelled.event.is_set():
            from modal.exception import InputCancellation

            raise InputCancellation("input cancelled by the dispatcher")
        self.items.put(pickle.dumps(list(items)))


class _Call:
    def __init__(self, body: Any, request: dict[str, Any]) -> None:
        self._cancelled = _Cancelled()
        self.channel = _Channel(self._cancelled)
        self._wire = pickle.dumps(request)
        self._answer: bytes | None = None
        self.raised: BaseException | None = None
        self._body = body
        self._thread = threading.Thread(target=self._run, name="standin-container", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._answer = pickle.dumps(self._body(pickle.loads(self._wire), self.channel))
        except BaseException as error:
            self.raised = error

    def events(self, timeout: float) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        try:
            first = (
                self.channel.items.get(timeout=timeout)
                if timeout > 0
                else self.channel.items.get_nowait()
            )
        except queue.Empty:
            return out
        out.extend(pickle.loads(first))
        while True:
            try:
                out.extend(pickle.loads(self.channel.items.get_nowait()))
            except queue.Empty:
                return out

    def done(self) -> bool:
        return not self._thread.is_alive()

    def outcome(self) -> dict[str, Any]:
        self._thread.join()
        if self._cancelled.killed:
            from modal.exception import RemoteError

            # What FunctionCall.get raises for an input whose container died
            # (modal/_utils/function_utils.py _process_result: a failed status
            # without a serialized exception).
            raise RemoteError("Container terminated unexpectedly (killed)")
        if self.raised is not None:
            raise self.raised
        assert self._answer is not None
        answer: dict[str, Any] = pickle.loads(self._answer)
        return answer

    def cancel(self) -> None:
        self._cancelled.event.set()

    def kill(self) -> None:
        """The container dies: the body stops at its next send, the answer is lost."""
        self._cancelled.killed = True

    def join(self, timeout: float = 60.0) -> None:
        self._thread.join(timeout)


@dataclasses.dataclass
class StandinContainer:
    """One GPU container: its Volume views, engine service and retirement.

    ``compile_cache`` is the compile-cache Volume, present when
    ``COMFY_MODAL_LLM_COMPILE_CACHE_ROOT`` names the process's cache root (its
    view; one Volume per root): every container of this process writes there,
    commits copy it to the Volume's store.
    """

    volume: DirectoryVolume
    service: Any
    stopped: bool = False
    compile_cache: DirectoryVolume | None = None

    def stop_fetching_inputs(self) -> None:
        """Retire this container (the next call on its key starts a new one)."""
        self.stopped = True


class StandinTransport:
    """A ``Transport`` whose workers are threads in this process.

    Args:
        app_name: The app name the dispatcher reports.
        directory: The installation directory (unused; the signature of a factory).
        root: Where the shared Volume and the containers' views live.
        probe_for: ``affinity key -> MemoryProbe`` for each new GPU container.
        event_interval: The workers' progress send interval (0: every event).
        backend_factory: The engines' backend factory (None: the CUDA backends).
    """

    def __init__(
        self,
        app_name: str,
        directory: Path,
        *,
        root: Path,
        probe_for: Any = None,
        event_interval: float = 0.0,
        backend_factory: Any = None,
    ) -> None:
        self.app_name = app_name
        self._backend_factory = backend_factory
        self.directory = directory
        self.root = Path(root)
        self.store = self.root / "volume"
        self._probe_for = probe_for or (lambda key: FixedMemoryProbe())
        self._event_interval = event_interval
        self.stager_volume = DirectoryVolume(self.store, self.root / "stager")
        self.containers: dict[str, StandinContainer] = {}
        self.calls: list[tuple[str, dict[str, Any], _Call]] = []
        self.deploys = 0
        self.deployed = False
        self.stops = 0
        self._started = 0

    def expected_fingerprint(self) -> str:
        """No fingerprint: the stand-in's stager echoes none."""
        return ""

    def forget_deployment(self) -> None:
        """Deploy again on the next call."""
        self.deployed = False

    def ensure_ready(self, progress: Any, check_interrupt: Any = None) -> None:
        """Deploy on first use and after :meth:`stop_app`: count it, say so as the real one does."""
        if self.deployed:
            return
        from comfy_llm_profiles import ProgressEvent, ProgressStage

        progress(
            ProgressEvent(
                stage=ProgressStage.INSPECT,
                message=f"Deploying the Modal app {self.app_name} (first use or new code)",
                indeterminate=True,
            )
        )
        self.deploys += 1
        self.deployed = True

    def start_stage(self, request: dict[str, Any]) -> _Call:
        """Run the real stager body in a worker thread."""
        from comfy_llm_modal_remote import serve_stage

        def body(wire: dict[str, Any], channel: _Channel) -> dict[str, Any]:
            return serve_stage(
                wire,
                channel,
                storage_root=self.stager_volume.view,
                volume=self.stager_volume,
                event_interval=self._event_interval,
            )

        call = _Call(body, request)
        self.calls.append(("stage", {"request": request}, call))
        return call

    def container(self, affinity_key: str) -> StandinContainer:
        """The live container of ``affinity_key`` (a new one after retirement)."""
        from comfy_llm_modal_remote import EngineService

        existing = self.containers.get(affinity_key)
        if existing is not None and not existing.stopped:
            return existing
        index = self._started = self._started + 1
        _fresh_process_state()
        volume = DirectoryVolume(self.store, self.root / f"engine-{index}")
        holder = StandinContainer(volume=volume, service=None)
        cache_root = os.environ.get("COMFY_MODAL_LLM_COMPILE_CACHE_ROOT", "").strip()
        if cache_root:  # one compile-cache Volume per cache root
            digest = hashlib.sha256(cache_root.encode()).hexdigest()[:12]
            holder.compile_cache = DirectoryVolume(
                self.root / "compile-cache" / digest, Path(cache_root)
            )
        holder.service = EngineService(
            storage_root=volume.view,
            volume=volume,
            container=holder,
            backend_factory=self._backend_factory,
            memory_probe=self._probe_for(affinity_key),
            event_interval=self._event_interval,
            compile_cache=holder.compile_cache,
        )
        self.containers[affinity_key] = holder
        return holder

    def stop_app(self) -> None:
        """``modal app stop``: every container goes (the Volumes stay); counts a stop."""
        self.stops += 1
        self.deployed = False
        for holder in self.containers.values():
            holder.stopped = True
            holder.service.manager.unload_all()
        self.containers.clear()

    def start_generate(self, request: dict[str, Any], *, gpu: str, affinity_key: str) -> _Call:
        """Run the real engine body in the key's container, in a worker thread."""
        holder = self.container(affinity_key)
        call = _Call(holder.service.serve, request)
        info = {"gpu": gpu, "affinity_key": affinity_key, "request": request}
        self.calls.append(("generate", info, call))
        return call

    def start_chunk(self, request: dict[str, Any], *, gpu: str, affinity_key: str) -> _Call:
        """Run the real chunk body in the key's container, in a worker thread."""
        from comfy_llm_modal_remote import serve_chunk

        holder = self.container(affinity_key)
        call = _Call(lambda wire, channel: serve_chunk(holder.service, wire, channel), request)
        info = {"gpu": gpu, "affinity_key": affinity_key, "request": request}
        self.calls.append(("chunk", info, call))
        return call

    def kill(self, affinity_key: str) -> None:
        """Kill the key's container mid-call: its calls lose their answers, the key starts anew."""
        holder = self.containers.get(affinity_key)
        if holder is not None:
            holder.stopped = True
        for _, info, call in self.calls:
            if info.get("affinity_key") == affinity_key and not call.done():
                call.kill()


def _fresh_process_state() -> None:
    """What a new container process starts with: no vLLM promotion observed."""
    import importlib

    try:
        module = importlib.import_module("comfy_llm_backend_cuda")
    except ImportError:
        return
    accessor = getattr(module, "execution_modes", None)
    if accessor is not None:
        accessor().reset()
