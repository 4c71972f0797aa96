"""A "GPU" for orchestration benchmarks: the real engine plus a service time per batch.

Wraps whatever backend the Modal worker's factory loads (the tiny test
checkpoints under Transformers) and, after each batch, sleeps
``batch_seconds + image_token_seconds * images * max_new_tokens``: the time a
real GPU would spend, while the real engine's own (small) share still runs.
Importable as ``comfy_llm_testworld.timed_gpu:factory`` so a stand-in that
runs containers as processes can load it by name; the service times come
from :data:`BATCH_SECONDS_ENV` and :data:`IMAGE_TOKEN_SECONDS_ENV` (read at
load time, in the container). The strict stand-in starts containers with the
image's environment only, so a caller carries them explicitly::

    StrictTransport(..., backend_factory=timed_gpu.FACTORY,
                    engine_env=timed_gpu.env(batch_seconds=0.2, image_token_seconds=0.15))
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

__all__ = ["BATCH_SECONDS_ENV", "FACTORY", "IMAGE_TOKEN_SECONDS_ENV", "TimedGPU", "env", "factory"]

BATCH_SECONDS_ENV = "COMFY_TESTWORLD_GPU_BATCH_SECONDS"
IMAGE_TOKEN_SECONDS_ENV = "COMFY_TESTWORLD_GPU_IMAGE_TOKEN_SECONDS"
FACTORY = "comfy_llm_testworld.timed_gpu:factory"
""":func:`factory` by name, for a stand-in that loads it in a container process."""


def env(batch_seconds: float, image_token_seconds: float) -> dict[str, str]:
    """The container variables that set this "GPU"'s service times."""
    for name, value in (
        ("batch_seconds", batch_seconds),
        ("image_token_seconds", image_token_seconds),
    ):
        if not value >= 0:
            raise ValueError(f"{name} must be a number of seconds >= 0, got {value!r}")
    return {
        BATCH_SECONDS_ENV: repr(float(batch_seconds)),
        IMAGE_TOKEN_SECONDS_ENV: repr(float(image_token_seconds)),
    }


class TimedGPU:
    """A backend whose batches take a configured service time on top of the real engine."""

    def __init__(self, inner: Any, batch_seconds: float, image_token_seconds: float) -> None:
        self._inner = inner
        self._batch = batch_seconds
        self._image_token = image_token_seconds

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _serve(self, images: int, tokens: int) -> None:
        time.sleep(self._batch + self._image_token * images * max(1, tokens))

    def generate(self, inputs: Any, settings: Any, sink: Any) -> Any:
        """The real engine's answer, then one image's service time."""
        result = self._inner.generate(inputs, settings, sink)
        self._serve(1, settings.max_new_tokens)
        return result

    def can_batch(self, items: Any) -> bool:
        """As the real engine says."""
        return bool(self._inner.can_batch(items))

    def generate_batch(self, items: Any, sink: Any) -> Any:
        """The real engine's answers, then the batch's service time."""
        results = self._inner.generate_batch(items, sink)
        self._serve(len(items), items[0].settings.max_new_tokens)
        return results


def factory(profile: Any, path: Path, progress: Any) -> TimedGPU:
    """The Modal worker's backend factory, wrapped (service times from the environment)."""
    from comfy_llm_backend_cuda import create_backend

    return TimedGPU(
        create_backend(profile, path, progress),
        float(os.environ.get(BATCH_SECONDS_ENV) or 0.2),
        float(os.environ.get(IMAGE_TOKEN_SECONDS_ENV) or 0.15),
    )
