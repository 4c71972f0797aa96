"""Starting a stand-in container's process: spawned fresh, or forked from a preloaded zygote.

The test-process side of :mod:`comfy_llm_testworld._modal_zygote` (read its
docstring for what a forked container keeps of a fresh process). One zygote
serves every container whose environment is the same apart from the
per-container values (:data:`PER_CONTAINER`), across tests: the zygotes live
until the test process ends.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
from multiprocessing.connection import Listener
from pathlib import Path
from typing import Any

__all__ = ["ENGINE_PRELOAD", "ForkedProcess", "start_container_process"]

TESTWORLD_KNOBS = (
    "COMFY_TESTWORLD_GPU_BATCH_SECONDS",
    "COMFY_TESTWORLD_GPU_IMAGE_TOKEN_SECONDS",
    "COMFY_TESTWORLD_GATE_DIR",
    "COMFY_TESTWORLD_PREFILL_MARKER",
)
"""A test's own backend knobs (``engine_env``: timed_gpu's service times, gated_gpu's
folder, long_prefill's switch), read by the backend factory when a model loads."""

PER_CONTAINER = (
    "HOME",
    "COMFY_MODAL_LLM_COMPILE_CACHE_ROOT",
    "COMFY_MODAL_LLM_CODE_FINGERPRINT",
    *TESTWORLD_KNOBS,
)
"""What may differ between two children of one zygote: each container's own paths, the
deployed code's fingerprint (``deploy_elsewhere``) and the test's backend knobs. The
zygote holds placeholders for them and refuses to serve if a preloaded module captured
one at import; a child missing one has it unset, as a fresh process would."""

ENGINE_PRELOAD = (
    "numpy",
    "PIL.Image",
    "torch",
    "transformers",
    "transformers.models.auto.modeling_auto",
    "transformers.models.auto.processing_auto",
    "modal",
    "modal.exception",
    "comfy_llm_modal_remote",  # its root imports the worker bodies (EngineService, ...)
    "comfy_llm_backend_cuda",
    "comfy_llm_testworld._modal_container",
)
"""What an engine container imports before its first answer (torch and Transformers: ~9 s CPU)."""

HOME_CAPTURES_ALLOWED = (
    "site.USER_",
    "huggingface_hub.constants.",
    "transformers.utils.",
    "transformers.dynamic_module_utils.HF_MODULES_CACHE",
    "torchvision._internally_replaced_utils._HOME",
    "accelerate.commands.config.",
)
"""Default cache paths computed from HOME at import (the user site, the Hub cache,
Transformers' remote-code modules, torch hub's, and the config file of ``accelerate``'s
command line, which Transformers imports when the bitsandbytes extra installed it:
``accelerate/commands/config/config_args.py``, read only by ``accelerate config`` and
``launch``). The placeholder HOME never exists, so a container that uses one of them is
caught when its transport closes."""

_START_SECONDS = 300.0
_MAX_IDLE_ZYGOTES = 3


class ForkedProcess:
    """``subprocess.Popen``'s face for a zygote's child: pid, poll, wait, kill, returncode."""

    def __init__(self, pid: int, home: Path) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.zygote_home = home
        self._ended = threading.Event()

    def _exited(self, code: int) -> None:
        self.returncode = code
        self._ended.set()

    def poll(self) -> int | None:
        """The exit status, or None while it runs."""
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit; ``subprocess.TimeoutExpired`` after ``timeout``."""
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(f"container {self.pid}", timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        """SIGKILL, as ``Popen.kill``."""
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


def _listen() -> tuple[Listener, str, bytes]:
    address = os.path.join(tempfile.mkdtemp(prefix="mst-"), "c")
    authkey = secrets.token_bytes(16)
    return Listener(address, family="AF_UNIX", authkey=authkey), address, authkey


def _accept(listener: Listener, process: subprocess.Popen[bytes], what: str) -> Any:
    accepted: list[Any] = []
    acceptor = threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True)
    acceptor.start()
    acceptor.join(_START_SECONDS)
    listener.close()
    if not accepted:
        process.kill()
        raise RuntimeError(f"{what} did not start (exit {process.poll()})")
    return accepted[0]


class _Zygote:
    def __init__(self, base_env: dict[str, str], preload: tuple[str, ...]) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="mst-zygote-"))
        self.home = self.folder / "home-never-created"
        placeholders = {
            "HOME": str(self.home),
            "COMFY_MODAL_LLM_COMPILE_CACHE_ROOT": str(self.folder / "compile-cache-placeholder"),
            "COMFY_MODAL_LLM_CODE_FINGERPRINT": "fingerprint-placeholder-" + secrets.token_hex(8),
            # Not numbers or paths: a module that parsed one at import fails the preload.
            **{knob: "knob-placeholder-" + secrets.token_hex(8) for knob in TESTWORLD_KNOBS},
        }
        listener, address, authkey = _listen()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "comfy_llm_testworld._modal_zygote", address],
            env={**base_env, **placeholders, "STANDIN_AUTHKEY": authkey.hex()},
        )
        self._connection = _accept(listener, self.process, "the stand-in's container zygote")
        self._connection.send({"preload": list(preload), "placeholders": placeholders})
        ready = self._connection.recv()
        if ready[0] != "ready":
            self.close()
            raise RuntimeError(f"the stand-in's container zygote refused: {ready[1]}")
        found: dict[str, list[str]] = ready[2]
        unexpected = [n for n in found.pop("HOME") if not n.startswith(HOME_CAPTURES_ALLOWED)]
        unexpected += [name for names in found.values() for name in names]
        if unexpected:
            self.close()
            raise RuntimeError(
                f"preloaded modules captured a per-container value at import: {unexpected}; "
                "a forked container would not see its own. Drop those modules from the preload."
            )
        self.children: dict[int, ForkedProcess] = {}
        self._forked: queue.SimpleQueue[ForkedProcess] = queue.SimpleQueue()
        self._lock = threading.Lock()
        threading.Thread(target=self._read, name="standin-zygote", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                message = self._connection.recv()
            except (EOFError, OSError):
                for child in list(self.children.values()):
                    if child.returncode is None:
                        child._exited(-signal.SIGKILL)  # children die with their zygote
                return
            if message[0] == "forked":
                child = self.children[message[1]] = ForkedProcess(message[1], self.home)
                self._forked.put(child)
            elif message[0] == "exited":
                ended = self.children.pop(message[1], None)
                if ended is not None:
                    ended._exited(message[2])

    def fork(self, env: dict[str, str], address: str) -> ForkedProcess:
        with self._lock:
            self._connection.send(("fork", env, address))
            return self._forked.get(timeout=_START_SECONDS)

    def idle(self) -> bool:
        return not any(child.returncode is None for child in self.children.values())

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._connection.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_zygotes: dict[tuple[tuple[str, str], ...], _Zygote] = {}
_zygotes_lock = threading.Lock()


def _zygote_for(base_env: dict[str, str], preload: tuple[str, ...]) -> _Zygote:
    key = (*sorted(base_env.items()), ("", ",".join(preload)))
    with _zygotes_lock:
        found = _zygotes.pop(key, None)
        if found is None or found.process.poll() is not None:
            idle = [k for k, z in _zygotes.items() if z.idle()]
            for old in idle[: max(0, len(_zygotes) + 1 - _MAX_IDLE_ZYGOTES)]:
                _zygotes.pop(old).close()
            found = _Zygote(base_env, preload)
        _zygotes[key] = found  # most recently used last
        return found


@atexit.register
def _close_zygotes() -> None:
    for zygote in list(_zygotes.values()):
        zygote.close()


def start_container_process(
    env: dict[str, str], address: str, preload: tuple[str, ...] | None
) -> subprocess.Popen[bytes] | ForkedProcess:
    """The container's process: forked from the zygote of its environment, or spawned."""
    if not preload:
        return subprocess.Popen(  # its own process group: a container ends whole
            [sys.executable, "-m", "comfy_llm_testworld._modal_container", address],
            env=env,
            start_new_session=True,
        )
    base = {k: v for k, v in env.items() if k not in PER_CONTAINER and k != "STANDIN_AUTHKEY"}
    return _zygote_for(base, preload).fork(env, address)


def check_zygote_home_untouched(process: Any) -> None:
    """Raise if a forked container wrote under the HOME its preloaded modules captured."""
    home = getattr(process, "zygote_home", None)
    if home is not None and Path(home).exists():
        raise RuntimeError(
            f"a container created {home}, the placeholder HOME its preloaded modules "
            "captured at import (a fresh process would have used its own HOME): drop the "
            "module that computed that path from ENGINE_PRELOAD"
        )
