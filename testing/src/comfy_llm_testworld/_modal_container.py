"""One stand-in Modal container: its own process, the real worker bodies, Modal's rules.

Started by :mod:`comfy_llm_testworld.modal_strict` as
``python -m comfy_llm_testworld._modal_container <address>`` with only the
image's environment (plus, for the stager, its secret), it connects back to
the test process and serves inputs one at a time in its main thread, as a
sync Modal function without ``@modal.concurrent`` does. Each rule below is
the modal 1.6.4 client's (paths under ``site-packages/modal``):

* Cancellation: while an input runs, SIGUSR1 raises ``InputCancellation``
  from a handler in the main thread, at whatever bytecode runs; the handler
  is installed before the input and restored after it
  (_container_entrypoint.py:250-260). The test process cancels with
  ``os.kill(pid, SIGUSR1)``, as the container's cancel callback does.
* Volume views (:class:`StrictVolume`, :mod:`._modal_volume`): the
  container sees the Volume as of its start or its last ``reload()``; a
  commit publishes only its own changes since (writes and deletions, never
  a stale file); ``reload()`` and ``commit()``'s reload fail while the
  process holds files open under the mount (volume.py:902-935); background
  commits (allow_background_commits, volume.py:480) publish its changes,
  partial writes included, every ``background_commit_seconds``.
* Queue puts: the worker's own ``ModalQueueChannel`` calls
  :class:`_QueueClient`, which has ``Queue.put_many``'s signature and
  semantics over the test process's queue service (partition limits, TTL):
  non-blocking raises ``queue.Full``, blocking retries until its timeout,
  client-side, as ``_put_many_blocking`` does (queue.py:669-700).
* ``stop_fetching_inputs``: the current input finishes, then the container
  exits (modal/experimental).
* Named Dicts (the stager's leases) are :mod:`._modal_dict`'s, shared by
  every container and app on the same store root.
* The stager imports only what its slim image installs and mounts
  (:mod:`._modal_image`): a torch import there fails as it would on Modal.
"""

from __future__ import annotations

import importlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from multiprocessing.connection import Client, Connection
from pathlib import Path
from types import FrameType
from typing import Any

from ._modal_volume import StrictVolume

__all__ = ["StrictVolume", "main"]

_PUT_RETRY_SECONDS = 0.05


class _Link:
    """The container's line to the test process (inputs in, puts and answers out).

    Only two daemon threads touch the connection: one writes, one reads. The
    main thread hands messages over through a ``SimpleQueue`` (its ``put``
    is one C call, which no signal handler can split) and waits for replies
    on a future. That is how the real client behaves: a blocking call such
    as ``Queue.put_many`` runs on synchronicity's event-loop thread while the
    caller waits on a ``concurrent.futures.Future``, so an
    ``InputCancellation`` raised in the caller abandons the wait, never a
    half-written or half-read message (a cancel landing inside a
    main-thread ``recv`` once left the stream out of step: EOFError).
    """

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._outbox: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self._inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._replies: dict[int, Future[Any]] = {}
        self._lock = threading.Lock()
        self._sequence = 0
        self._writer = threading.Thread(target=self._write, name="link-writer", daemon=True)
        self._writer.start()
        threading.Thread(target=self._read, name="link-reader", daemon=True).start()

    def _write(self) -> None:
        while (message := self._outbox.get()) is not None:
            try:
                self._connection.send(message)
            except OSError:
                return

    def _read(self) -> None:
        while True:
            try:
                message = self._connection.recv()
            except (EOFError, OSError):
                with self._lock:
                    waiting, self._replies = list(self._replies.values()), {}
                for future in waiting:
                    future.set_exception(ConnectionError("the test process hung up"))
                self._inbox.put(("stop",))
                return
            if isinstance(message, tuple) and message and message[0] == "put-reply":
                with self._lock:
                    answered = self._replies.pop(message[2], None)
                if answered is not None:
                    answered.set_result(message[1])
            else:
                self._inbox.put(message)

    def request(self, message: tuple[Any, ...]) -> Any:
        """Send ``message`` with a sequence number; wait for the reply that echoes it."""
        future: Future[Any] = Future()
        with self._lock:
            self._sequence += 1
            sequence = self._sequence
            self._replies[sequence] = future
        self._outbox.put((*message, sequence))
        return future.result()

    def send(self, message: tuple[Any, ...]) -> None:
        self._outbox.put(message)

    def recv(self) -> Any:
        return self._inbox.get()

    def close(self) -> None:
        """Flush what was sent, so a message sent just before exit is not lost."""
        self._outbox.put(None)
        self._writer.join(10.0)


class _QueueClient:
    """``modal.Queue.put_many`` as the client implements it, over the queue service.

    ``block=False`` raises ``queue.Full`` at once on a full partition
    (queue.py:704-719); ``block=True`` retries until ``timeout``, forever
    when it is None (``max_retries=None``, queue.py:686-693). The worker's
    real ``ModalQueueChannel`` chooses which.
    """

    def __init__(self, link: _Link) -> None:
        self._link = link
        self.ttls: list[int] = []

    def put_many(
        self,
        vs: list[Any],
        block: bool = True,
        timeout: float | None = None,
        *,
        partition: str | None = None,
        partition_ttl: int = 24 * 3600,
    ) -> None:
        if not partition or len(partition.encode()) > 64:
            raise ValueError("Partition keys must be non-empty and must not exceed 64 bytes")
        self.ttls.append(partition_ttl)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            answer = self._link.request(("put", partition, list(vs), partition_ttl))
            if answer == "ok":
                return
            if answer.startswith("error:"):  # what the client re-raises (queue.py:719-727)
                import modal.exception

                kind = answer.removeprefix("error:")
                raise getattr(modal.exception, kind)(f"Queue.put_many failed ({kind})")
            if not block or (deadline is not None and time.monotonic() >= deadline):
                raise queue.Full(f"partition {partition} is full ({answer})")
            time.sleep(_PUT_RETRY_SECONDS)


class _Control:
    """``ContainerControl``: retire after the current input."""

    def __init__(self) -> None:
        self.stopped = False

    def stop_fetching_inputs(self) -> None:
        self.stopped = True


class _Probe:
    def __init__(self, total_bytes: int, available_bytes: int, device: str) -> None:
        self.total_bytes, self.available_bytes, self.device = total_bytes, available_bytes, device

    def snapshot(self) -> Any:
        from comfy_llm_residency import MemorySnapshot

        return MemorySnapshot(self.available_bytes, self.total_bytes, self.device)

    def clear_cache(self) -> None:
        return None

    def allocated_bytes(self) -> int | None:
        return None


def _resolve(reference: str | None) -> Any:
    if not reference:
        return None
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


class _Container:
    def __init__(self, link: _Link, spec: dict[str, Any]) -> None:
        self.link = link
        self.spec = spec
        self.control = _Control()
        self.volume = StrictVolume(
            Path(spec["store"]),
            Path(spec["view"]),
            background_commit_seconds=float(spec.get("background_commit_seconds", 0.0)),
        )
        self.compile_cache: StrictVolume | None = None
        if spec.get("compile_cache_store"):
            self.compile_cache = StrictVolume(
                Path(spec["compile_cache_store"]), Path(spec["compile_cache_view"])
            )
        self.service: Any = None
        self.probe: _Probe | None = None
        if spec["kind"] == "engine":
            from comfy_llm_modal_remote import EngineService

            probe = spec.get("probe")
            self.probe = _Probe(**probe) if probe else None
            self.service = EngineService(
                storage_root=self.volume.view,
                volume=self.volume,
                container=self.control,
                backend_factory=_resolve(spec.get("backend_factory")),
                memory_probe=self.probe,
                event_interval=float(spec.get("event_interval", 0.0)),
                compile_cache=self.compile_cache,
            )

    def run(self, function: str, request: dict[str, Any], channel: Any) -> dict[str, Any]:
        if function == "stage":
            from comfy_llm_modal_remote import serve_stage

            from ._modal_dict import stage_leases

            answer: dict[str, Any] = serve_stage(
                request,
                channel,
                storage_root=self.volume.view,
                volume=self.volume,
                leases=stage_leases(Path(self.spec["dict_root"])),  # shared by the store path
                event_interval=float(self.spec.get("event_interval", 0.0)),
            )
            return answer
        if function == "chunk":
            from comfy_llm_modal_remote import serve_chunk

            chunk_answer: dict[str, Any] = serve_chunk(self.service, request, channel)
            return chunk_answer
        served: dict[str, Any] = self.service.serve(request, channel)
        return served

    def state(self) -> dict[str, Any]:
        service = self.service
        info: dict[str, Any] = {
            "pid": os.getpid(),
            "reloads": self.volume.reloads,
            "commits": self.volume.commits,
            "stopped": self.control.stopped,
            "env": dict(os.environ),
        }
        if service is not None:
            manager_state = service.manager.state()
            info.update(
                resident_profiles=list(manager_state.resident_profiles),
                busy=bool(manager_state.busy),
                unsafe=bool(service.unsafe),
                engine_reloads=service.reloads,
                compile_cache_commits=service.compile_cache_commits,
                promotion_state=service.export_promotion_state(),
            )
        return info

    def residents(self) -> list[dict[str, Any]]:
        """Each resident backend as data: what a test may ask of a model in this container.

        ``backend_id`` tells one backend object from its successor; ``last_abort``
        and ``unfinished_requests`` are the vLLM backend's (None elsewhere).
        """
        found: list[dict[str, Any]] = []
        for entry in self.service.manager._resident.values():
            backend = entry.backend
            processor = getattr(getattr(backend, "_engine", None), "output_processor", None)
            last_abort = getattr(backend, "last_abort", None)
            found.append(
                {
                    "repository": backend.profile.repository,
                    "backend_id": id(backend),
                    "last_abort": list(last_abort) if last_abort else None,
                    "unfinished_requests": (
                        processor.get_num_unfinished_requests() if processor is not None else None
                    ),
                }
            )
        return found

    def command(self, name: str, argument: Any) -> Any:
        if name == "state":
            return self.state()
        if name == "import_promotion_state":
            self.service.import_promotion_state(argument)
            return None
        if name == "mark_unsafe":  # as after a failed memory recovery
            self.service.unsafe = True
            return None
        if name == "unload_all":
            self.service.manager.unload_all()
            return None
        if name == "set_available_bytes":  # the GPU's free memory from now on
            assert self.probe is not None
            self.probe.available_bytes = int(argument)
            return None
        if name == "residents":
            return self.residents()
        if name == "start_child":  # a process the container starts (as vLLM's EngineCore)
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            return child.pid
        if name == "hold_open":  # a test holds a file open under the mount
            self._held = open(self.volume.view / argument, "rb")  # noqa: SIM115
            return None
        raise ValueError(f"unknown command {name!r}")


def _serve_input(container: _Container, call_id: str, function: str, payload: Any) -> None:
    from comfy_llm_modal_remote.deployment import ModalQueueChannel
    from modal.exception import InputCancellation

    request = payload
    channel = ModalQueueChannel(_QueueClient(container.link), str(request.get("request_id")))

    def cancel_input(signum: int, frame: FrameType | None) -> None:
        del signum, frame
        raise InputCancellation("Input was cancelled by user")

    container.link.send(("started", call_id))
    outcome: tuple[Any, ...]
    try:
        signal.signal(signal.SIGUSR1, cancel_input)
        try:
            outcome = ("answer", call_id, container.run(function, request, channel))
        finally:
            signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    except BaseException as error:  # what escapes the body escapes the input
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        outcome = ("raised", call_id, type(error).__name__, str(error))
    container.link.send(outcome)


def _set_clock(offset: float) -> None:
    """This container's wall clock is ``offset`` seconds off the test process's.

    Containers run on different hosts; nothing in a named Dict is stamped by
    the server (a value is what its writer put, dict.py:556-571, and the only
    server-side time is the 7-day idle expiry, dict.py:265-266), so a
    deadline one container writes is read against another host's clock.
    ``time.monotonic`` stays the host's own: durations are not skewed.
    """
    if not offset:
        return
    real = time.time
    time.time = lambda: real() + offset  # type: ignore[assignment]
    time.time_ns = lambda: int((real() + offset) * 1e9)  # type: ignore[assignment]


def main(address: str) -> None:
    """Connect to the test process and serve until told to stop (or retired)."""
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # between inputs a cancel finds nothing
    # A preemption's SIGINT raises KeyboardInterrupt in the body (modal/exception.py:
    # 300-305), as in any fresh interpreter. This process inherits the test run's
    # disposition: a run started in the background by a shell without job control
    # (`.ci/run &`, nohup) ignores SIGINT, and Python then keeps it ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    authkey = bytes.fromhex(os.environ.pop("STANDIN_AUTHKEY"))
    link = _Link(Client(address, family="AF_UNIX", authkey=authkey))
    spec = link.recv()
    if spec.get("image"):  # the stager's slim image: nothing else is installed there
        from ._modal_image import refuse_outside_image

        refuse_outside_image(spec["image"]["requirements"], spec["image"]["local_packages"])
    _set_clock(float(spec.get("clock_offset", 0.0)))
    container = _Container(link, spec)
    link.send(("ready", os.getpid()))
    while True:
        message = link.recv()
        kind = message[0]
        if kind == "stop":
            break
        if kind == "input":
            _serve_input(container, *message[1:])
            if container.control.stopped:
                link.send(("retired",))
                break
        elif kind == "command":
            try:
                link.send(("reply", container.command(message[1], message[2])))
            except Exception as error:
                link.send(("reply-error", f"{type(error).__name__}: {error}"))
    link.close()


if __name__ == "__main__":
    main(sys.argv[1])
