"""A Modal stand-in as strict as Modal: containers are processes, the rules are Modal's.

Tests never have Modal credentials, so the platform is replaced, and only
the platform: the worker bodies are the real ones. Where the old thread
stand-in was kinder than Modal, this one holds to what the modal 1.6.4
client implements (each rule cites ``site-packages/modal``):

* **Containers are processes.** Each container is its own Python process
  (``python -m comfy_llm_testworld._modal_container``) started with only the
  image's environment (:func:`comfy_llm_modal_remote.image_spec` of the
  deployment's settings, the code fingerprint and the compile-cache root)
  plus, for the stager only, the secret (HF_TOKEN and the test world's Hub
  variables). A warm container keeps its process, so module state (vLLM
  execution modes, loaded models) survives between its inputs and never
  leaks into another container. :meth:`StrictTransport.scaledown` ends one.
  Engine containers are forked from a zygote that imported torch and
  Transformers once (:mod:`._modal_zygote`: its own process and memory all
  the same, the environment replaced whole, and a refusal when a preloaded
  module captured a per-container value at import); ``preload=None`` spawns
  each one fresh.
* **Inputs run one at a time in the main thread** (sync, no
  ``@modal.concurrent``), and **cancellation is a signal**: ``cancel()``
  sends SIGUSR1, whose handler raises ``InputCancellation`` at whatever
  bytecode runs (_container_entrypoint.py:250-260): staging, a load,
  prefill, generation, a blocked progress put.
* **Volumes are per-container views** (``_modal_volume.StrictVolume``):
  a container's changes (writes and deletions) reach others only on
  ``commit()``, and only its own (a stale view never republishes an old
  file); others' are seen only after ``reload()``; both fail while the
  container holds files open under the mount (volume.py:902-935);
  background commits publish its changes at any time (volume.py:480).
* **The progress Queue** (:class:`QueueService`): a partition holds at most
  5,000 items and 64 MiB (queue.py:294-295); a non-blocking put on a full
  partition raises ``queue.Full`` (queue.py:719), a blocking one retries
  until its timeout (queue.py:669-700); a partition is cleared
  ``partition_ttl`` seconds after its last put (queue.py:650).
* **Named Dicts** (:class:`StrictDict`, the stager's leases): one per name
  under the store root, shared by every app and container on that root, as
  a workspace's Dict is shared by every app naming it; ``put``'s
  ``skip_if_exists`` is atomic (dict.py:556-571).
* **Deploys**: ``"recreate"`` ends every old container at once (in-flight
  inputs fail); ``"rolling"`` lets old containers finish their input while
  new inputs start new ones (app.py:627-628). :meth:`redeploy` and
  :meth:`deploy_elsewhere` (another machine deploying other code under the
  same app name) drive them.
* **Retirement**: ``stop_fetching_inputs`` ends the container after its
  input; the key's next input starts a new one. :meth:`kill` kills a
  container's process (its input's ``FunctionCall.get`` raises
  ``RemoteError``).

API (what tests and the fan-out's helpers use)::

    transport = StrictTransport(app_name, directory, root=tmp_path / "modal",
                                probe_for=lambda key: FixedMemoryProbe(...),
                                backend_factory="package.module:factory",
                                engine_env=timed_gpu.env(0.2, 0.15))  # optional
    transport.ensure_ready(progress, check_interrupt)   # deploy (counted)
    call = transport.start_stage(request) / start_generate(request, gpu=, affinity_key=)
           / start_chunk(request, gpu=, affinity_key=)
    call.events(timeout); call.done(); call.outcome(); call.cancel(); call.join()
    container = transport.container(key)   # started on demand
    container.state()  # pid, resident_profiles, busy, unsafe, reloads, promotion_state, env
    container.import_promotion_state(state); container.hold_open(relative_path)
    container.mark_unsafe(); container.unload_all(); container.residents()
    container.set_available_bytes(n)   # the GPU's free memory from now on
    transport.kill(key); transport.scaledown(key); transport.stop_app()
    transport.redeploy(strategy="rolling"|"recreate"); transport.deploy_elsewhere(fp)
    transport.queue.partition_size(request_id)  # items, bytes
    transport.calls  # [(kind, info, call)], transport.deploys, transport.stops

``backend_factory`` is an importable ``"module:name"`` (it runs in the
container process); ``probe_for`` returns a :class:`FixedMemoryProbe` whose
fields travel as data.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import queue as queue_module
import secrets
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from multiprocessing.connection import Listener
from pathlib import Path
from typing import Any

from ._modal_dict import StrictDict
from ._modal_forks import ENGINE_PRELOAD, check_zygote_home_untouched, start_container_process
from ._modal_queue import QueueService

__all__ = [
    "GIB",
    "STAGER_KEY",
    "FixedMemoryProbe",
    "QueueService",
    "StrictCall",
    "StrictContainer",
    "StrictDict",
    "StrictTransport",
]

GIB = 1024**3
_START_SECONDS = 120.0
_SECRET_ENV_PREFIXES = ("HF_",)


@dataclasses.dataclass
class FixedMemoryProbe:
    """A GPU-like device reading that never changes; its fields travel to the container as data.

    A small ``available_bytes`` models memory that does not come back after
    an eviction (the unsafe-worker path).
    """

    total_bytes: int = 80 * GIB
    available_bytes: int = 80 * GIB
    device: str = "cuda:0"

    def snapshot(self) -> Any:
        """The fixed reading (for a manager in the test process)."""
        from comfy_llm_residency import MemorySnapshot

        return MemorySnapshot(self.available_bytes, self.total_bytes, self.device)

    def clear_cache(self) -> None:
        """Nothing to clear."""
        return None

    def allocated_bytes(self) -> int | None:
        """Unknown: the manager falls back to the change of ``available_bytes``."""
        return None


class StrictCall:
    """One spawned input (``FunctionCall``): events from its partition, answer, cancel."""

    def __init__(self, transport: StrictTransport, function: str, request: dict[str, Any]) -> None:
        self.call_id = uuid.uuid4().hex
        self.function = function
        self.request = request
        self.partition = str(request.get("request_id"))
        self.container: StrictContainer | None = None
        self.started = threading.Event()
        self.finished = threading.Event()
        self.answer: dict[str, Any] | None = None
        self.raised: BaseException | None = None
        self._transport = transport
        self._cancel_requested = False
        self.key = ""

    def events(self, timeout: float) -> list[dict[str, Any]]:
        """Events that arrived in the call's partition (waits at most ``timeout``)."""
        return list(self._transport.queue.get_many(self.partition, 256, timeout))

    def done(self) -> bool:
        """True once the input ended (its events may still be queued)."""
        return self.finished.is_set()

    def outcome(self) -> dict[str, Any]:
        """The envelope, or what ``FunctionCall.get`` raises."""
        self.finished.wait()
        if self.raised is not None:
            raise self.raised
        assert self.answer is not None
        return self.answer

    def cancel(self) -> None:
        """``FunctionCall.cancel()``: SIGUSR1 to the running container.

        ``terminate_containers=False``, Modal's default: the container lives on.
        """
        self._cancel_requested = True
        container = self.container
        if container is not None and self.started.is_set() and not self.finished.is_set():
            container.signal(signal.SIGUSR1)

    def join(self, timeout: float = 120.0) -> None:
        """Wait for the input to end."""
        self.finished.wait(timeout)

    def _finish(self, answer: dict[str, Any] | None, raised: BaseException | None) -> None:
        self.answer, self.raised = answer, raised
        self.finished.set()


def _remote_error(text: str) -> BaseException:
    from modal.exception import RemoteError

    return RemoteError(text)


class StrictContainer:
    """A container process and the line to it."""

    def __init__(
        self, transport: StrictTransport, key: str, spec: dict[str, Any], env: dict[str, str]
    ) -> None:
        self.key = key
        self.deployment = transport.deployment
        self.stopped = False
        self.draining = False
        self.volume_view = Path(spec["view"])
        self._transport = transport
        self._pending: collections.deque[StrictCall] = collections.deque()
        self._current: StrictCall | None = None
        self._replies: queue_module.Queue[tuple[str, Any]] = queue_module.Queue()
        self._lock = threading.RLock()
        socket_dir = tempfile.mkdtemp(prefix="mst-")
        address = os.path.join(socket_dir, "c")
        authkey = secrets.token_bytes(16)
        listener = Listener(address, family="AF_UNIX", authkey=authkey)
        self.process = start_container_process(
            {**env, "STANDIN_AUTHKEY": authkey.hex()},
            address,
            transport.preload if spec["kind"] == "engine" else None,
        )
        accepted: list[Any] = []
        acceptor = threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True)
        acceptor.start()
        acceptor.join(_START_SECONDS)
        if not accepted:
            self.process.kill()
            raise RuntimeError(
                f"stand-in container {key} did not start (exit {self.process.poll()})"
            )
        self._connection = accepted[0]
        listener.close()
        self._connection.send(spec)
        ready = self._connection.recv()
        self.pid = int(ready[1])
        threading.Thread(target=self._read, name=f"standin-{key}", daemon=True).start()

    # -- the line ------------------------------------------------------------
    def _send(self, message: tuple[Any, ...]) -> None:
        with self._lock:
            self._connection.send(message)

    def _read(self) -> None:
        while True:
            try:
                message = self._connection.recv()
            except (EOFError, OSError):
                self._lost()
                return
            kind = message[0]
            if kind == "put":
                _, partition, items, ttl, sequence = message
                self._send(
                    ("put-reply", self._transport.queue.put(partition, items, ttl), sequence)
                )
            elif kind == "started":
                if self._current is not None:
                    self._current.started.set()
                    if self._current._cancel_requested:
                        self.signal(signal.SIGUSR1)
            elif kind in {"answer", "raised"}:
                self._done(message)
            elif kind == "retired":
                self.stopped = True
            elif kind in {"reply", "reply-error"}:
                self._replies.put((kind, message[1]))

    def _done(self, message: tuple[Any, ...]) -> None:
        with self._lock:
            call, self._current = self._current, None
        if call is not None:
            if message[0] == "answer":
                call._finish(message[2], None)
            else:
                call._finish(None, _raised(message[2], message[3]))
        self._next()

    def _end_group(self) -> None:
        """Kill what the container started (vLLM's EngineCore, say) with it.

        A Modal container ends whole: its sandbox goes, and every process in
        it. Each stand-in container leads its own process group, so whatever
        it spawned is killed with it, never left running on the test box.
        """
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)

    def _lost(self) -> None:
        self.stopped = True
        with self._lock:
            call, self._current = self._current, None
            pending, self._pending = list(self._pending), collections.deque()
        if call is not None:
            call._finish(None, _remote_error("Container terminated unexpectedly"))
        for waiting in pending:  # never started here: the platform places them anew
            self._transport._place(waiting)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)  # its own exit first (its status is the container's)
        self._end_group()

    def _next(self) -> None:
        with self._lock:
            if self._current is not None or not self._pending:
                return
            if self.stopped or self.draining:
                pending, self._pending = list(self._pending), collections.deque()
                for waiting in pending:
                    self._transport._place(waiting)
                if self.draining:
                    self.stop()
                return
            call = self._current = self._pending.popleft()
        call.container = self
        self._send(("input", call.call_id, call.function, call.request))

    def submit(self, call: StrictCall) -> None:
        """Queue an input on this container (one runs at a time)."""
        with self._lock:
            self._pending.append(call)
        self._next()

    # -- platform operations ------------------------------------------------
    def signal(self, number: int) -> None:
        """Send a signal to the container process."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, number)

    def busy(self) -> bool:
        """An input runs or waits here."""
        return self._current is not None or bool(self._pending)

    def stop(self) -> None:
        """Scale down: the process ends (after its input, when one runs)."""
        self.stopped = True
        if self._current is None:
            with contextlib.suppress(OSError):
                self._send(("stop",))
        else:
            self.draining = True

    def kill(self) -> None:
        """The process dies where it is."""
        self.stopped = True
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self._end_group()

    def command(self, name: str, argument: Any = None, timeout: float = 60.0) -> Any:
        """Run an inspection command in the container between inputs."""
        deadline = time.monotonic() + timeout
        while self._current is not None and time.monotonic() < deadline:
            time.sleep(0.02)  # one thing at a time on the main thread, as in Modal
        self._send(("command", name, argument))
        kind, value = self._replies.get(timeout=timeout)
        if kind == "reply-error":
            raise RuntimeError(value)
        return value

    def state(self) -> dict[str, Any]:
        """What the container process reports about itself (see the module docstring)."""
        value: dict[str, Any] = self.command("state")
        return value

    def import_promotion_state(self, state: dict[str, Any]) -> None:
        """Hand the engine a promotion state (as a retry would)."""
        self.command("import_promotion_state", dict(state))

    def mark_unsafe(self) -> None:
        """Mark the engine retired, as after a failed memory recovery."""
        self.command("mark_unsafe")

    def unload_all(self) -> None:
        """Unload the engine's resident models."""
        self.command("unload_all")

    def set_available_bytes(self, available: int) -> None:
        """The container's GPU reports ``available`` free bytes from now on."""
        self.command("set_available_bytes", available)

    def residents(self) -> list[dict[str, Any]]:
        """The resident backends as data (see ``_modal_container._Container.residents``)."""
        value: list[dict[str, Any]] = self.command("residents")
        return value

    def hold_open(self, relative: str) -> None:
        """Open a file under the weight Volume in the container (until it exits)."""
        self.command("hold_open", relative)


def _raised(name: str, message: str) -> BaseException:
    if name == "InputCancellation":
        from modal.exception import InputCancellation

        return InputCancellation(message)
    return _remote_error(f"{name}: {message}")


@dataclasses.dataclass
class _Deployment:
    number: int
    fingerprint: str
    env: dict[str, str]


class StrictTransport:
    """A ``Transport`` whose containers are processes under Modal's rules.

    Args:
        app_name: The app name the dispatcher reports.
        directory: The installation directory (the factory signature; unused).
        root: Where the Volumes' stores and the containers' views live.
        probe_for: ``affinity key -> FixedMemoryProbe`` for each new GPU container.
        event_interval: The workers' progress send interval (0: every event).
        backend_factory: ``"module:name"`` of the engines' backend factory (None: CUDA backends).
        background_commit_seconds: How often containers publish their Volume view on their own.
        strategy: The deploy strategy :meth:`ensure_ready` uses (``ModalTransport``'s).
        engine_env: Variables added to every engine container's environment, on
            top of the image's (none by default: a container sees only what the
            image bakes in). An explicit knob for what a test's own backend
            factory reads in the container, e.g. :func:`comfy_llm_testworld.timed_gpu.env`
            (the benchmark "GPU"'s service times); never copied from this process.
        preload: What engine containers' zygote imports before forking them
            (:mod:`._modal_zygote`); None spawns every container fresh.
    """

    def __init__(
        self,
        app_name: str,
        directory: Path,
        *,
        root: Path,
        probe_for: Any = None,
        event_interval: float = 0.0,
        backend_factory: str | None = None,
        background_commit_seconds: float = 0.5,
        strategy: str | None = None,
        engine_env: Mapping[str, str] | None = None,
        preload: tuple[str, ...] | None = ENGINE_PRELOAD,
    ) -> None:
        from comfy_llm_modal_remote._deploy import DEPLOY_STRATEGY

        self.app_name = app_name
        self.directory = directory
        self.root = Path(root)
        self.store = self.root / "volume"
        self.compile_stores = self.root / "compile-cache"
        """One store per compile-cache Volume name (the deployment's setting), as on Modal."""
        self.queue = QueueService()
        self.strategy = strategy or DEPLOY_STRATEGY
        self.preload = preload
        self.containers: dict[str, StrictContainer] = {}
        self.retired: list[StrictContainer] = []
        self.calls: list[tuple[str, dict[str, Any], StrictCall]] = []
        self.deploys = 0
        self.stops = 0
        self.deployed = False
        self.deployment = 0
        self._probe_for = probe_for or (lambda key: FixedMemoryProbe())
        self._event_interval = event_interval
        self._backend_factory = backend_factory
        self._background = background_commit_seconds
        self._engine_env = {str(k): str(v) for k, v in (engine_env or {}).items()}
        self._current: _Deployment | None = None
        self._implicit = False
        self._started = 0
        self._tag = uuid.uuid4().hex[:8]
        self._lock = threading.RLock()

    # -- deployments ----------------------------------------------------------
    def expected_fingerprint(self) -> str:
        """This machine's code fingerprint (what a deploy bakes in)."""
        from comfy_llm_modal_remote import code_fingerprint

        return str(code_fingerprint())

    def forget_deployment(self) -> None:
        """Deploy again on the next :meth:`ensure_ready`."""
        self.deployed = False

    def _image_env(self, fingerprint: str) -> dict[str, str]:
        from comfy_llm_modal_remote import ModalSettings, image_spec

        spec = image_spec(
            ModalSettings.from_env(), {"COMFY_MODAL_LLM_CODE_FINGERPRINT": fingerprint}
        )
        return dict(spec.env)

    def _deploy(self, fingerprint: str, strategy: str) -> None:
        with self._lock:
            self.deployment += 1
            self._current = _Deployment(self.deployment, fingerprint, self._image_env(fingerprint))
            old, self.containers = list(self.containers.values()), {}
        for container in old:
            self.retired.append(container)
            if strategy == "recreate":
                container.kill()  # in-flight inputs fail; nothing old serves again
            else:
                container.stop()  # rolling: it finishes its input, new inputs go elsewhere

    def ensure_ready(self, progress: Any, check_interrupt: Any = None) -> None:
        """Deploy on first use and when forgotten, with :attr:`strategy`; counted."""
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
        if check_interrupt is not None:
            check_interrupt()
        if not self._implicit:
            self._deploy(self.expected_fingerprint(), self.strategy)
        self._implicit = False  # a test started containers first: that was this deploy
        self.deploys += 1
        self.deployed = True

    def redeploy(self, strategy: str = "recreate") -> None:
        """A new deploy of the same code (e.g. a changed setting) while calls may run."""
        self._deploy(self.expected_fingerprint(), strategy)
        self.deploys += 1
        self.deployed = True

    def deploy_elsewhere(self, fingerprint: str, strategy: str = "recreate") -> None:
        """Another machine deploys other code under this app name (a shared app name)."""
        self._deploy(fingerprint, strategy)

    def stop_app(self) -> None:
        """``App.stop()``: every container ends (the Volumes stay); deploy anew next."""
        self.stops += 1
        self.deployed = False
        with self._lock:
            old, self.containers = list(self.containers.values()), {}
            self._current = None
            self._implicit = False
        for container in old:
            container.kill()
            self.retired.append(container)

    def close(self) -> None:
        """End every container process (tests' teardown)."""
        for container in [*self.containers.values(), *self.retired]:
            container.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                container.process.wait(10)
        for container in [*self.containers.values(), *self.retired]:
            check_zygote_home_untouched(container.process)

    # -- containers -------------------------------------------------------
    def _spec(self, key: str, kind: str) -> tuple[dict[str, Any], dict[str, str]]:
        if self._current is None:  # a direct start_* without ensure_ready: deploy quietly
            self._deploy(self.expected_fingerprint(), self.strategy)
            self._implicit = True
        assert self._current is not None
        self._started += 1
        name = f"{kind}-{self._tag}-{self._started}"  # transports may share a root
        home = self.root / "containers" / name
        home.mkdir(parents=True, exist_ok=True)
        env = {
            **self._current.env,
            "HOME": str(home),
            "MODAL_CONFIG_PATH": os.environ.get("MODAL_CONFIG_PATH", os.devnull),
            "MODAL_IS_REMOTE": "1",
            "PYTHONUNBUFFERED": "1",
        }
        spec: dict[str, Any] = {
            "kind": kind,
            "store": str(self.store),
            "dict_root": str(self.root),
            "view": str(home / "storage"),
            "event_interval": self._event_interval,
            "background_commit_seconds": self._background,
        }
        if kind == "stager":
            env.update({k: v for k, v in os.environ.items() if k.startswith(_SECRET_ENV_PREFIXES)})
        else:
            probe = self._probe_for(key)
            spec["probe"] = {
                "total_bytes": probe.total_bytes,
                "available_bytes": probe.available_bytes,
                "device": probe.device,
            }
            spec["backend_factory"] = self._backend_factory
            volume_name = env.get("COMFY_MODAL_LLM_COMPILE_CACHE_VOLUME_NAME", "default")
            spec["compile_cache_store"] = str(self.compile_stores / volume_name)
            spec["compile_cache_view"] = str(home / "llm-compile-cache")
            env["COMFY_MODAL_LLM_COMPILE_CACHE_ROOT"] = spec["compile_cache_view"]
            env.update(self._engine_env)
        return spec, env

    def container(self, key: str) -> StrictContainer:
        """The live container of ``key`` (a new process after retirement or a deploy)."""
        with self._lock:
            existing = self.containers.get(key)
            if existing is not None and not existing.stopped:
                return existing
            if existing is not None:
                self.retired.append(existing)
            spec, env = self._spec(key, "stager" if key == _STAGER else "engine")
            started = self.containers[key] = StrictContainer(self, key, spec, env)
            return started

    def _place(self, call: StrictCall) -> None:
        self.container(call.key).submit(call)

    def _start(
        self, kind: str, function: str, request: dict[str, Any], key: str, gpu: str | None
    ) -> StrictCall:
        call = StrictCall(self, function, request)
        call.key = key
        info = (
            {"gpu": gpu, "affinity_key": key, "request": request} if gpu else {"request": request}
        )
        self.calls.append((kind, info, call))
        self._place(call)
        return call

    def start_stage(self, request: dict[str, Any]) -> StrictCall:
        """The stager: ``max_containers=1``, so every stage runs in its one container."""
        return self._start("stage", "stage", request, _STAGER, None)

    def start_generate(self, request: dict[str, Any], *, gpu: str, affinity_key: str) -> StrictCall:
        """``RemoteEngine(affinity=key).generate.spawn`` in the key's container."""
        return self._start("generate", "generate", request, affinity_key, gpu)

    def start_chunk(self, request: dict[str, Any], *, gpu: str, affinity_key: str) -> StrictCall:
        """``RemoteEngine(affinity=key).caption_chunk.spawn`` in the key's container."""
        return self._start("chunk", "chunk", request, affinity_key, gpu)

    def kill(self, affinity_key: str) -> None:
        """Kill the key's container mid-call: its input's answer is lost, the key starts anew."""
        container = self.containers.get(affinity_key)
        if container is not None:
            container.kill()

    def scaledown(self, affinity_key: str) -> None:
        """The key's container scales down (idle): its process ends."""
        container = self.containers.pop(affinity_key, None)
        if container is not None:
            container.stop()
            self.retired.append(container)


STAGER_KEY = _STAGER = "__stager__"
"""The stager's container key (``transport.kill(STAGER_KEY)`` kills it mid-stage)."""
