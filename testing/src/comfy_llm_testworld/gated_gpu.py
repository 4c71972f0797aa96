"""A "GPU" on which only the first request runs until the test opens a gate.

For tests that must catch one worker's call still running when another's has
returned (a Cancel across fan-out workers): equal chunks on two containers
otherwise finish within one poll of each other on a loaded box, and whether a
call is still in flight becomes a race. Wraps whatever backend the Modal
worker's factory loads. The first ``generate``/``generate_batch`` on any
container sharing :data:`GATE_DIR_ENV`'s folder claims it (an exclusive file
create) and runs; every later one holds, as a busy GPU would, until the file
``open`` appears there (or :data:`HOLD_LIMIT_SECONDS` passes, so a test that
fails never leaves a container holding). The hold sleeps in short steps and
says "no token yet" to the sink every half second (``TokenSink.wait``, as
vLLM's backend does in a long prefill), so a cancel lands in it as it would
in a real prefill: the worker holds a cancel that comes during a model load
until the next stage's first event (``CancelShield``), and without that
event a cancelled held request would run on to the gate's time limit. Load
it by name in a stand-in container and carry the folder explicitly (the
container sees only the image's environment)::

    StrictTransport(..., backend_factory=gated_gpu.FACTORY, engine_env=gated_gpu.env(gate))

:data:`HOME_FACTORY` gates each container on its own: the folder is the
container's ``$HOME/gate`` (its own disk; no variable, so the container's
environment, and the preloaded zygote it forks from, stay the image's). A
test finds the held marker there (:func:`held`) and opens it with
:func:`open_gate`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

__all__ = [
    "FACTORY",
    "GATE_DIR_ENV",
    "HOME_FACTORY",
    "HOLD_LIMIT_SECONDS",
    "GatedGPU",
    "env",
    "factory",
    "factory_in_home",
    "held",
    "open_gate",
]

GATE_DIR_ENV = "COMFY_TESTWORLD_GATE_DIR"
FACTORY = "comfy_llm_testworld.gated_gpu:factory"
HOME_FACTORY = "comfy_llm_testworld.gated_gpu:factory_in_home"
HOLD_LIMIT_SECONDS = 300.0
_WAIT_EVERY_SECONDS = 0.5


def env(gate: Path) -> dict[str, str]:
    """The container variable naming the gate's folder (created here)."""
    gate.mkdir(parents=True, exist_ok=True)
    return {GATE_DIR_ENV: str(gate.resolve())}


def open_gate(gate: Path) -> None:
    """Let every held request run."""
    (gate / "open").touch()


def held(gate: Path) -> bool:
    """A request holds at this gate (it reached the GPU step and waits there)."""
    return any(gate.glob("held-*"))


class GatedGPU:
    """The real backend; a request holds unless it is the first or the gate is open."""

    def __init__(self, inner: Any, gate: Path) -> None:
        self._inner = inner
        self._gate = gate

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _wait_turn(self, sink: Any) -> None:
        try:
            os.close(os.open(self._gate / "first", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            (self._gate / f"held-{os.getpid()}").touch()
            deadline = time.monotonic() + HOLD_LIMIT_SECONDS
            said = 0.0
            while not (self._gate / "open").exists() and time.monotonic() < deadline:
                if time.monotonic() - said >= _WAIT_EVERY_SECONDS:
                    sink.wait()  # "no token yet", as an engine in prefill says: cancel here
                    said = time.monotonic()
                time.sleep(0.05)

    def generate(self, inputs: Any, settings: Any, sink: Any) -> Any:
        """The real answer, after this request's turn."""
        self._wait_turn(sink)
        return self._inner.generate(inputs, settings, sink)

    def can_batch(self, items: Any) -> bool:
        """As the real engine says."""
        return bool(self._inner.can_batch(items))

    def generate_batch(self, items: Any, sink: Any) -> Any:
        """The real answers, after this batch's turn."""
        self._wait_turn(sink)
        return self._inner.generate_batch(items, sink)


def factory(profile: Any, path: Path, progress: Any) -> GatedGPU:
    """The Modal worker's backend factory, wrapped (the gate's folder from the environment)."""
    from comfy_llm_backend_cuda import create_backend

    return GatedGPU(create_backend(profile, path, progress), Path(os.environ[GATE_DIR_ENV]))


def factory_in_home(profile: Any, path: Path, progress: Any) -> GatedGPU:
    """The worker's backend factory, gated at the container's own ``$HOME/gate``."""
    from comfy_llm_backend_cuda import create_backend

    gate = Path.home() / "gate"
    gate.mkdir(parents=True, exist_ok=True)
    return GatedGPU(create_backend(profile, path, progress), gate)
