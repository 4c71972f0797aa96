"""A backend whose prefill lasts until cancelled: a place to land a Cancel during prefill.

Wraps the real engine the Modal worker's factory loads. ``generate`` first
writes the file named by :data:`MARKER_ENV` (so a test knows the container is
in prefill: the model is loaded, the request admitted, no token out yet), then
waits there as a long prompt's prefill would, until a cancellation arrives or
:data:`PREFILL_SECONDS` pass; after that the real engine answers. Load it in
a stand-in container by name (:data:`FACTORY`) and carry the marker path
explicitly (the container sees only the image's environment)::

    StrictTransport(..., backend_factory=long_prefill.FACTORY,
                    engine_env={long_prefill.MARKER_ENV: str(marker)})
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

__all__ = ["FACTORY", "MARKER_ENV", "PREFILL_SECONDS", "LongPrefill", "factory"]

MARKER_ENV = "COMFY_TESTWORLD_PREFILL_MARKER"
FACTORY = "comfy_llm_testworld.long_prefill:factory"
PREFILL_SECONDS = 120.0


class LongPrefill:
    """The real backend, whose first ``generate`` holds in prefill (each later one does not)."""

    def __init__(self, inner: Any, marker: Path | None) -> None:
        self._inner = inner
        self._marker = marker
        self.prefills = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def generate(self, inputs: Any, settings: Any, on_token: Any) -> Any:
        """Hold in prefill on the first request (until cancelled), then the real answer."""
        self.prefills += 1
        if self._marker is not None and self.prefills == 1:
            self._marker.write_text(str(os.getpid()))
            deadline = time.monotonic() + PREFILL_SECONDS
            while time.monotonic() < deadline:
                time.sleep(0.05)  # SIGUSR1's InputCancellation lands here
        return self._inner.generate(inputs, settings, on_token)


def factory(profile: Any, path: Path, progress: Any) -> LongPrefill:
    """The Modal worker's backend factory, wrapped (the marker from the environment)."""
    from comfy_llm_backend_cuda import create_backend

    marker = os.environ.get(MARKER_ENV)
    return LongPrefill(create_backend(profile, path, progress), Path(marker) if marker else None)
