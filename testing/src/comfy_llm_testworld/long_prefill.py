"""A backend with a long prefill: a place to land a Cancel during prefill.

Wraps the real engine the Modal worker's factory loads. When :data:`MARKER_ENV`
is ``1``, ``generate`` first writes ``$HOME/in-prefill`` (the container's own
disk; so a test knows the container is in prefill: the model is loaded, the
request admitted, no token out yet), then holds there for
:data:`PREFILL_SECONDS` as a long prompt's prefill would (the engine notices a
cancellation at its next token, as with a real prefill); then the real engine
answers. Load it in a stand-in container by name (:data:`FACTORY`) and carry
the switch explicitly (the container sees only the image's environment; a
constant value keeps one preloaded zygote for every test that uses it)::

    StrictTransport(..., backend_factory=long_prefill.FACTORY,
                    engine_env={long_prefill.MARKER_ENV: "1"})
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

__all__ = ["FACTORY", "MARKER_ENV", "PREFILL_SECONDS", "LongPrefill", "factory"]

MARKER_ENV = "COMFY_TESTWORLD_PREFILL_MARKER"
FACTORY = "comfy_llm_testworld.long_prefill:factory"
PREFILL_SECONDS = 5.0


class LongPrefill:
    """The real backend, whose first ``generate`` holds in prefill (each later one does not)."""

    def __init__(self, inner: Any, marker: Path | None) -> None:
        self._inner = inner
        self._marker = marker
        self.prefills = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def generate(self, inputs: Any, settings: Any, sink: Any) -> Any:
        """Hold in prefill on the first request, then the real answer."""
        self.prefills += 1
        if self._marker is not None and self.prefills == 1:
            self._marker.write_text(str(os.getpid()))
            deadline = time.monotonic() + PREFILL_SECONDS
            while time.monotonic() < deadline:
                time.sleep(0.05)
        return self._inner.generate(inputs, settings, sink)


def factory(profile: Any, path: Path, progress: Any) -> LongPrefill:
    """The Modal worker's backend factory, wrapped (the marker from the environment)."""
    from comfy_llm_backend_cuda import create_backend

    marker = Path.home() / "in-prefill" if os.environ.get(MARKER_ENV) == "1" else None
    return LongPrefill(create_backend(profile, path, progress), marker)
