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
* **A cancelled input ends TERMINATED**: ``outcome()`` raises ``RemoteError('')``
  (container_io_manager.py:995-999, function_utils.py:527-574); ``terminated``.
* **Spawns** upload arguments over 8 KiB first (``upload_bytes_per_second``;
  :mod:`._modal_spawning`) and return before the container is placed
  (``cold_start_seconds`` for a new one); pools are keyed by every option
  (:meth:`StrictTransport._pool`); unknown GPU types are refused,
  ``unobtainable_gpus`` never start; deploys can fail and the app can be
  stopped from outside (:mod:`._modal_outside`: ``NotFoundError`` on spawn).
* **Modal's clocks, when a test asks** (``platform_seconds``): an input ends
  at its function's ``timeout`` with ``FunctionTimeoutError``
  (function_utils.py:533-534); an idle container ends after its pool's
  ``scaledown_window`` (:meth:`StrictTransport._idle`).
* **Preemption** (:meth:`StrictTransport.preempt`): SIGINT, SIGKILL after the
  grace (exception.py:300-305); the input runs again on a new container, up
  to 8 times (_functions.py:121, 487), its events in the same partition.
* **Hosts' clocks** (``clock_offset_seconds``): an installation's containers
  read another wall clock; a Dict value is never stamped by the server.

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
    transport.kill(key); transport.scaledown(key); transport.preempt(key); transport.stop_app()
    transport.redeploy(strategy="rolling"|"recreate"); transport.deploy_elsewhere(fp)
    transport.queue.partition_size(request_id)  # items, bytes
    transport.calls  # [(kind, info, call)], transport.deploys, transport.stops

``backend_factory`` is an importable ``"module:name"`` (it runs in the
container process); ``probe_for`` returns a :class:`FixedMemoryProbe` whose
fields travel as data. The test process's end of each container (its
process, its line, its inputs) is :mod:`._modal_host`; the container's own
end is :mod:`._modal_container`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._modal_clocks import STAGER_KEY, PlatformClocks
from ._modal_dict import ROUND_TRIP_SECONDS, StrictDict, set_round_trip
from ._modal_forks import ENGINE_PRELOAD, check_zygote_home_untouched
from ._modal_host import StrictCall, StrictContainer
from ._modal_outside import OutsideOperations
from ._modal_probe import GIB, FixedMemoryProbe
from ._modal_queue import QueueService
from ._modal_spawning import GPU_TYPES, upload_size

__all__ = [
    "GIB",
    "STAGER_KEY",
    "FixedMemoryProbe",
    "QueueService",
    "StrictCall",
    "StrictContainer",
    "StrictDict",
    "set_round_trip",
    "StrictTransport",
]

_SECRET_ENV_PREFIXES = ("HF_",)


@dataclasses.dataclass
class _Deployment:
    number: int
    fingerprint: str
    env: dict[str, str]
    stager_image: dict[str, Any]
    """The stager's own image: its environment and what it installs and mounts."""


class StrictTransport(OutsideOperations, PlatformClocks):
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
        upload_bytes_per_second: A spawn whose pickled arguments exceed 8 KiB
            holds its caller this long per byte (None: instant).
        cold_start_seconds: How long a new container takes before its first input.
        unobtainable_gpus: GPU types no container of ever starts (no capacity, or
            not this workspace's): their inputs stay pending until cancelled.
        platform_seconds: Real seconds one of Modal's own seconds takes here, for
            the platform's clocks (None: they never run out, the kinder world):
            an input ends at its function's ``timeout`` with
            ``FunctionTimeoutError`` and an idle container scales down after its
            pool's ``scaledown_window`` (see :meth:`_idle`).
        clock_offset_seconds: How far this installation's containers' wall
            clocks are off the test process's (other hosts; see
            ``_modal_container._set_clock``): two transports on one root with
            different offsets are two installations whose clocks disagree.
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
        upload_bytes_per_second: float | None = None,
        cold_start_seconds: float = 0.0,
        unobtainable_gpus: tuple[str, ...] = (),
        platform_seconds: float | None = None,
        clock_offset_seconds: float = 0.0,
    ) -> None:
        from comfy_llm_modal_remote.deployment import DEPLOY_STRATEGY

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
        """Live containers by pool (affinity key and options; see :meth:`_pool`)."""
        self._latest: dict[str, str] = {}
        self.retired: list[StrictContainer] = []
        self.calls: list[tuple[str, dict[str, Any], StrictCall]] = []
        self.deploys = 0
        self.stops = 0
        self.deployed = False
        self.deployment = 0
        self.fingerprints: dict[int, str] = {}
        """Each deployment's code fingerprint (a container's ``deployment`` is its number)."""
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
        self._upload_rate = upload_bytes_per_second
        self._cold_start = cold_start_seconds
        self._unobtainable = {gpu.upper() for gpu in unobtainable_gpus}
        self._deploy_errors: list[BaseException] = []
        self.platform_seconds = platform_seconds
        if platform_seconds is not None:  # every Dict call a round trip on Modal's clocks
            set_round_trip(self.root, ROUND_TRIP_SECONDS * platform_seconds)
        self._clock_offset = clock_offset_seconds
        self.scaled_down: list[StrictContainer] = []
        """Containers that ended after their idle window (``platform_seconds`` only)."""
        self.uploads: list[int] = []
        """Bytes each spawn uploaded to blob storage (0: sent inline)."""

    # -- deployments ----------------------------------------------------------
    def expected_fingerprint(self) -> str:
        """This machine's code fingerprint (what a deploy bakes in)."""
        from comfy_llm_modal_remote import code_fingerprint

        return str(code_fingerprint())

    def forget_deployment(self) -> None:
        """Deploy again on the next :meth:`ensure_ready`."""
        self.deployed = False

    def _image_env(self, fingerprint: str, *, stager: bool = False) -> dict[str, Any]:
        from comfy_llm_modal_remote import ModalSettings, image_spec

        spec = image_spec(
            ModalSettings.from_env(),
            {"COMFY_MODAL_LLM_CODE_FINGERPRINT": fingerprint},
            stager=stager,
        )
        if not stager:
            return dict(spec.env)
        return {
            "env": dict(spec.env),
            "requirements": list(spec.requirements),
            "local_packages": list(spec.local_packages),
        }

    def _deploy(self, fingerprint: str, strategy: str) -> None:
        with self._lock:
            self.deployment += 1
            self.fingerprints[self.deployment] = fingerprint
            self._current = _Deployment(
                self.deployment,
                fingerprint,
                self._image_env(fingerprint),
                self._image_env(fingerprint, stager=True),
            )
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
        from comfy_llm_core import ProgressEvent, ProgressStage

        progress(
            ProgressEvent(
                stage=ProgressStage.INSPECT,
                message=f"Deploying the Modal app {self.app_name} (first use or new code)",
                indeterminate=True,
            )
        )
        if check_interrupt is not None:
            check_interrupt()
        if self._deploy_errors:
            raise self._deploy_errors.pop(0)
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
    def _deployed_or_first(self) -> None:
        """Deploy quietly for a test's first direct ``start_*``/``container``.

        After a stop the app is gone: ``Function.from_name`` raises ``NotFoundError``.
        """
        with self._lock:
            if self._current is None and self.deployment == 0:
                self._deploy(self.expected_fingerprint(), self.strategy)
                self._implicit = True
            if self._current is None:
                from modal.exception import NotFoundError

                raise NotFoundError(f"App '{self.app_name}' not found in environment 'main'")

    def _spec(self, key: str, kind: str) -> tuple[dict[str, Any], dict[str, str]]:
        self._deployed_or_first()
        assert self._current is not None
        self._started += 1
        name = f"{kind}-{self._tag}-{self._started}"  # transports may share a root
        home = self.root / "containers" / name
        home.mkdir(parents=True, exist_ok=True)
        image = self._current.stager_image if kind == "stager" else None
        env = {
            **(image["env"] if image else self._current.env),
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
            "clock_offset": self._clock_offset,
        }
        if image is not None:
            env.update({k: v for k, v in os.environ.items() if k.startswith(_SECRET_ENV_PREFIXES)})
            spec["image"] = {k: image[k] for k in ("requirements", "local_packages")}
        else:
            probe = self._probe_for(key.split("|", 1)[0])
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

    def _pool(self, key: str, gpu: str | None, function: str) -> str:
        """The pool a call goes to: its affinity key *and* every option of its variant.

        ``with_options`` "return[s] a new variant of the Cls that will autoscale
        independently" (modal/cls.py:756-757) and each parameter set is its own
        pool: another GPU, or ``caption_chunk``'s options (``max_containers=1``,
        a 60 s scaledown) next to ``generate``'s, is another container, cold.
        The options are the product's own (``engine_options``).
        """
        if gpu is None:
            return key
        from comfy_llm_modal_remote.deployment import engine_options

        options = engine_options(gpu, caption=function == "chunk")
        return f"{key}|" + ",".join(f"{name}={value}" for name, value in sorted(options.items()))

    def _resolve(self, key: str) -> str:
        """A pool id as is; an affinity key: the pool its latest call went to."""
        return key if key in self.containers or "|" in key else self._latest.get(key, key)

    def pool(self, key: str) -> StrictContainer | None:
        """The container (live or ended) of a key's latest pool, or None; starts nothing."""
        return self.containers.get(self._resolve(key))

    def container(self, key: str) -> StrictContainer:
        """The live container of ``key`` (a new process after retirement or a deploy).

        ``key`` is an affinity key (its latest pool; before any call, a container
        the key's first call adopts, whatever its options) or a pool id.
        """
        with self._lock:
            key = self._resolve(key)
            existing = self.containers.get(key)
            if existing is not None and not existing.stopped:
                return existing
            if existing is not None:
                self.retired.append(existing)
            spec, env = self._spec(key, "stager" if key == _STAGER else "engine")
            started = self.containers[key] = StrictContainer(self, key, spec, env)
            return started

    def _place(self, call: StrictCall) -> None:
        with self._lock:
            affinity = call.key.split("|", 1)[0]
            early = self.containers.get(affinity)  # a test's container(key) before any call
            if call.key != affinity and call.key not in self.containers and early is not None:
                self.containers[call.key] = self.containers.pop(affinity)
            self._latest[affinity] = call.key
        try:
            existing = self.containers.get(call.key)
            if self._cold_start and (existing is None or existing.stopped):
                time.sleep(self._cold_start)  # a new container boots before its first input
            self.container(call.key).submit(call)
        except Exception as error:  # the container could not start: the input fails
            from modal.exception import RemoteError

            call._finish(None, RemoteError(f"container failed to start: {error}"))

    def _upload(self, request: dict[str, Any]) -> None:
        """``spawn`` uploads its serialized arguments when over 8 KiB (``upload_size``)."""
        uploaded = upload_size(request)
        self.uploads.append(uploaded)
        if uploaded and self._upload_rate:
            time.sleep(uploaded / self._upload_rate)

    def _start(
        self, kind: str, function: str, request: dict[str, Any], key: str, gpu: str | None
    ) -> StrictCall:
        self._deployed_or_first()
        if gpu is not None and gpu.split(":")[0].upper() not in GPU_TYPES:
            from modal.exception import InvalidError

            raise InvalidError(f"Invalid GPU type {gpu!r}")  # the server's check
        self._upload(request)
        call = StrictCall(self, function, request)
        call.key = self._pool(key, gpu, function)
        if gpu is not None and gpu.split(":")[0].upper() in self._unobtainable:
            call.pending_forever = True  # no container of it will start; a cancel ends it
            self.calls.append((kind, {"gpu": gpu, "affinity_key": key, "request": request}, call))
            return call
        info = (
            {"gpu": gpu, "affinity_key": key, "request": request} if gpu else {"request": request}
        )
        self.calls.append((kind, info, call))
        threading.Thread(target=self._place, args=(call,), daemon=True).start()
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
        container = self.containers.get(self._resolve(affinity_key))
        if container is not None:
            container.kill()

    def scaledown(self, affinity_key: str) -> None:
        """The key's container scales down (idle): its process ends."""
        container = self.containers.pop(self._resolve(affinity_key), None)
        if container is not None:
            container.stop()
            self.retired.append(container)


_STAGER = STAGER_KEY
