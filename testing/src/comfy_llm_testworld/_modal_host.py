"""The test process's side of one stand-in container: its process, its line, its inputs.

:class:`StrictContainer` starts a container process (:mod:`._modal_forks`),
feeds it inputs one at a time and answers its queue puts from the
platform's :class:`~._modal_queue.QueueService`; :class:`StrictCall` is one
spawned input (``FunctionCall``). Where an input goes, and what happens to
the inputs of a container that went, is the platform's
(:class:`~.modal_strict.StrictTransport`, seen here as :class:`Platform`).
"""

from __future__ import annotations

import collections
import contextlib
import os
import queue as queue_module
import secrets
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from multiprocessing.connection import Listener
from pathlib import Path
from typing import Any, Protocol

from ._modal_forks import start_container_process
from ._modal_queue import QueueService

__all__ = ["Platform", "StrictCall", "StrictContainer"]

_START_SECONDS = 120.0


_MAX_INTERNAL_FAILURES = 8
"""Replays of one input before ``get()`` raises ``InternalFailure``
(modal/_functions.py:121 MAX_INTERNAL_FAILURE_COUNT)."""


class Platform(Protocol):
    """What a container and its calls need of the platform (``StrictTransport``)."""

    queue: QueueService
    deployment: int
    preload: tuple[str, ...] | None
    platform_seconds: float | None

    def _place(self, call: StrictCall) -> None: ...

    def _idle(self, container: StrictContainer) -> None: ...


class StrictCall:
    """One spawned input (``FunctionCall``): events from its partition, answer, cancel."""

    def __init__(self, transport: Platform, function: str, request: dict[str, Any]) -> None:
        self.call_id = uuid.uuid4().hex
        self.function = function
        self.request = request
        self.partition = str(request.get("request_id"))
        self.container: StrictContainer | None = None
        self.started = threading.Event()
        self.finished = threading.Event()
        self.answer: dict[str, Any] | None = None
        self.raised: BaseException | None = None
        self.terminated = False
        """The input ended cancelled (Modal's TERMINATED status); ``raised`` is then
        ``RemoteError('')``, what ``FunctionCall.get()`` raises for it."""
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self._transport = transport
        self._cancel_requested = False
        self.pending_forever = False
        """Its GPU type never gets a container (the platform holds the input)."""
        self.key = ""
        self.attempts = 1
        """Times the input started on a container (a preempted input runs again)."""
        self.timed_out = False

    @property
    def busy_seconds(self) -> float:
        """How long the input ran in its container: the platform's clock, start to answer."""
        if self.started_at is None or self.ended_at is None:
            return 0.0
        return self.ended_at - self.started_at

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
        if self.pending_forever and not self.finished.is_set():  # a pending input just ends
            self._finish(None, _remote_error(""), terminated=True)
            return
        container = self.container
        if container is not None and self.started.is_set() and not self.finished.is_set():
            container.signal(signal.SIGUSR1)

    def join(self, timeout: float = 120.0) -> None:
        """Wait for the input to end."""
        self.finished.wait(timeout)

    def _finish(
        self,
        answer: dict[str, Any] | None,
        raised: BaseException | None,
        *,
        terminated: bool = False,
    ) -> None:
        self.ended_at = time.monotonic()
        self.answer, self.raised, self.terminated = answer, raised, terminated
        self.finished.set()


def _remote_error(text: str) -> BaseException:
    from modal.exception import RemoteError

    return RemoteError(text)


class StrictContainer:
    """A container process and the line to it."""

    def __init__(
        self, transport: Platform, key: str, spec: dict[str, Any], env: dict[str, str]
    ) -> None:
        self.key = key
        self.deployment = transport.deployment
        self.stopped = False
        self.draining = False
        self.preempting = False
        self.idle_round = 0
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
                    self._current.started_at = time.monotonic()
                    self._current.started.set()
                    self._time_limit(self._current)
                    if self._current._cancel_requested:
                        self.signal(signal.SIGUSR1)
            elif kind in {"answer", "raised"}:
                self._done(message)
            elif kind == "retired":
                self.stopped = True
            elif kind in {"reply", "reply-error"}:
                self._replies.put((kind, message[1]))

    def _time_limit(self, call: StrictCall) -> None:
        """End the input at its function's ``timeout`` (in platform seconds, when timed).

        The server ends an input past the function's ``timeout=`` and its
        ``FunctionCall.get()`` raises ``FunctionTimeoutError``
        (modal/_utils/function_utils.py:533-534); the container running it
        is stopped with it (here: killed, as a preemption's SIGKILL).
        """
        scale = self._transport.platform_seconds
        if scale is None:
            return
        from comfy_llm_modal_remote.deployment import (
            ENGINE_TIMEOUT_SECONDS,
            STAGER_TIMEOUT_SECONDS,
        )

        limit = STAGER_TIMEOUT_SECONDS if call.function == "stage" else ENGINE_TIMEOUT_SECONDS

        def expire() -> None:
            if self._current is call and not call.finished.is_set():
                call.timed_out = True
                self.kill()

        timer = threading.Timer(limit * scale, expire)
        timer.daemon = True
        timer.start()

    def _replayed(self, call: StrictCall) -> bool:
        """A preempted container's input runs again elsewhere (True), or fails for good.

        The server answers a preempted input with an internal failure and runs
        it again, up to 8 times (modal/_functions.py:121, 487-518: "lost
        inputs or worker preemption"); its events go to the same partition.
        """
        if not self.preempting or call.finished.is_set() or call._cancel_requested:
            return False
        if call.attempts >= _MAX_INTERNAL_FAILURES:
            from modal.exception import InternalFailure

            call._finish(None, InternalFailure("input preempted too many times"))
            return True
        call.attempts += 1
        call.container = None
        call.started.clear()
        self._transport._place(call)
        return True

    def preempt(self, grace_seconds: float) -> None:
        """Modal preempts this container: SIGINT now, SIGKILL after the grace.

        ``KeyboardInterrupt`` lands in the body (modal/exception.py:300-305 says
        so of the real one: SIGINT first, a second, uncatchable interrupt 30 s
        later); whatever input ran is run again on another container.
        """
        self.preempting = True
        self.stopped = True
        self.signal(signal.SIGINT)
        timer = threading.Timer(grace_seconds, self.kill)
        timer.daemon = True
        timer.start()

    def _done(self, message: tuple[Any, ...]) -> None:
        with self._lock:
            call, self._current = self._current, None
        if call is not None and self._replayed(call):
            self.kill()  # preempted: the container goes once the body unwound
            self._next()
            return
        if call is not None:
            if message[0] == "answer":
                call._finish(message[2], None)
            elif message[2] == "InputCancellation":
                # A cancelled input ends TERMINATED with no data
                # (modal/_runtime/container_io_manager.py:995-999), and
                # FunctionCall.get() raises RemoteError(result.exception), an empty
                # string (modal/_utils/function_utils.py:527-574).
                call._finish(None, _remote_error(""), terminated=True)
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
        if call is not None and not self._replayed(call):
            if call.timed_out:
                from modal.exception import FunctionTimeoutError

                call._finish(None, FunctionTimeoutError("Function timed out"))
            else:
                call._finish(None, _remote_error("Container terminated unexpectedly"))
        for waiting in pending:  # never started here: the platform places them anew
            self._transport._place(waiting)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)  # its own exit first (its status is the container's)
        self._end_group()

    def _next(self) -> None:
        with self._lock:
            if self._current is None and not self._pending and not self.stopped:
                self._transport._idle(self)
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
    return _remote_error(f"{name}: {message}")
