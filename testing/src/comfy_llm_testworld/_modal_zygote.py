"""A preloaded parent that forks stand-in containers, so each start skips the heavy imports.

An engine container's first input imports torch and Transformers: about 9 s
of CPU each time, most of what the strict stand-in's tests cost on a 2-core
box. A zygote imports them once and forks one child per container. Each
child is still what :mod:`comfy_llm_testworld.modal_strict` promises of a
container, and nothing kinder:

* **its own process and memory** (``fork``: copy-on-write pages, its own pid;
  SIGUSR1 reaches only it);
* **only the image's environment.** The zygote starts with exactly the
  environment its containers get, except the per-container values (``HOME``
  and the compile-cache mount path), which it holds as placeholders; a child
  replaces ``os.environ`` whole before running the container's code. A
  preloaded module that captured a per-container value at import would see
  the placeholder, so after preloading the zygote looks through every
  module's globals for the placeholders: the compile-cache one must appear
  nowhere (the zygote refuses to serve), the ``HOME`` one only where the
  caller allows it (huggingface_hub's and Transformers' default cache
  paths). The placeholder ``HOME`` never exists: the transport checks, when
  it closes, that no container created anything there (a fresh process would
  have written under its own ``HOME``);
* **per-process state a fresh process would draw anew is drawn anew:**
  ``random`` reseeds itself after fork (CPython's ``os.register_at_fork``),
  NumPy's global generator is reseeded from the OS here. The hash seed is
  the zygote's (a fresh process would pick its own);
* **it ends like a process.** The zygote reaps its children and reports each
  exit status (negative: the signal that killed it, as ``Popen.returncode``);
  a child dies with its zygote (``PR_SET_PDEATHSIG``), the zygote when the
  test process hangs up.

The zygote is single-threaded when it forks (checked), so no lock held by
another thread is copied into a child.

Started as ``python -m comfy_llm_testworld._modal_zygote <address>``.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib
import os
import signal
import sys
import threading
import traceback
from multiprocessing.connection import Client, Connection
from typing import Any

__all__ = ["captured", "main"]

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def captured(placeholders: dict[str, str]) -> dict[str, list[str]]:
    """``{placeholder name: ["module.global", ...]}`` of module globals holding one."""
    found: dict[str, list[str]] = {name: [] for name in placeholders}
    for module_name, module in list(sys.modules.items()):
        if module_name in {"__main__", "__mp_main__", __name__}:
            continue
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for key, held in list(namespace.items()):
            value = os.fspath(held) if isinstance(held, os.PathLike) else held
            if not isinstance(value, str | bytes):
                continue
            text = value if isinstance(value, str) else value.decode(errors="replace")
            for name, placeholder in placeholders.items():
                if placeholder in text:
                    found[name].append(f"{module_name}.{key}")
    return found


def _exit_status(status: int) -> int:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _run_child(connection: Connection, env: dict[str, str], address: str) -> None:
    """In the forked child: become the container, then exit without returning."""
    code = 1
    try:
        connection.close()  # the zygote's line is not the container's
        os.setsid()  # its own process group: a container ends whole, children included
        _die_with_parent()
        os.environ.clear()
        os.environ.update(env)
        sys.argv = ["-m comfy_llm_testworld._modal_container", address]
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            numpy.random.seed()  # a fresh process seeds from the OS
        from comfy_llm_testworld import _modal_container

        _modal_container.main(address)
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _reap(connection: Connection) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        connection.send(("exited", pid, _exit_status(status)))


def main(address: str) -> None:
    """Preload, report what captured a placeholder, then fork on request until hung up.

    The zygote itself ends when the test process hangs up (not by
    ``PR_SET_PDEATHSIG``, which fires when the parent *thread* ends, and the
    test process may start a zygote from a short-lived thread).
    """
    authkey = bytes.fromhex(os.environ.pop("STANDIN_AUTHKEY"))
    connection = Client(address, family="AF_UNIX", authkey=authkey)
    setup: dict[str, Any] = connection.recv()
    try:
        for module in setup["preload"]:
            importlib.import_module(module)
    except BaseException as error:
        connection.send(("failed", f"preloading: {type(error).__name__}: {error}"))
        return
    found = captured(setup["placeholders"])
    threads = [thread.name for thread in threading.enumerate()]
    if len(threads) != 1:
        connection.send(("failed", f"preloading started threads {threads}: fork is unsafe"))
        return
    connection.send(("ready", os.getpid(), found))
    while True:
        try:
            ready = connection.poll(0.05)
            message = connection.recv() if ready else None
        except (EOFError, OSError):
            os._exit(0)  # at once: tearing down torch's modules is no container's business
        if message is not None and message[0] == "fork":
            _, env, container_address = message
            pid = os.fork()
            if pid == 0:
                _run_child(connection, env, container_address)
            connection.send(("forked", pid))
        try:
            _reap(connection)
        except OSError:
            os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1])
