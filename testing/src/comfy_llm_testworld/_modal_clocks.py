"""Modal's clocks and preemption for the strict stand-in, when a test asks for them.

Mixed into :class:`~.modal_strict.StrictTransport` (its lock, containers and
``platform_seconds``): an idle container ends after its pool's
``scaledown_window``, and Modal preempts a container (its input runs again
on another). The input timeout is the container's own
(``_modal_host.StrictContainer._time_limit``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["STAGER_KEY", "PlatformClocks"]

STAGER_KEY = "__stager__"
"""The stager's container key (``transport.kill(STAGER_KEY)`` kills it mid-stage)."""


class PlatformClocks:
    """Scaledown after the idle window, and preemption."""

    _lock: threading.RLock
    containers: dict[str, Any]
    retired: list[Any]
    scaled_down: list[Any]
    platform_seconds: float | None

    _resolve: Callable[[str], str]

    def _idle(self, container: Any) -> None:
        """An idle container ends after its pool's ``scaledown_window`` (platform seconds).

        The window is the variant's option when the product passes one
        (``engine_options``: a caption key's 60 s), else the class's decoration
        (``ENGINE_SCALEDOWN_SECONDS``); the stager passes none, so the client
        sends 0 (modal/_functions.py:1120 ``task_idle_timeout_secs=scaledown_window
        or 0``) and the server's default, 60 s, applies.
        """
        if self.platform_seconds is None:
            return
        from comfy_llm_modal_remote.deployment import ENGINE_SCALEDOWN_SECONDS

        window = 60.0 if container.key == STAGER_KEY else float(ENGINE_SCALEDOWN_SECONDS)
        for option in container.key.partition("|")[2].split(","):
            if option.startswith("scaledown_window="):
                window = float(option.split("=", 1)[1])
        idle_round = container.idle_round = container.idle_round + 1

        def end() -> None:
            with self._lock:
                if container.idle_round != idle_round or container.busy() or container.stopped:
                    return  # an input came meanwhile, or it already went
                key = container.key
                if self.containers.get(key) is container:
                    del self.containers[key]
                self.retired.append(container)
                self.scaled_down.append(container)
            container.stop()

        timer = threading.Timer(window * self.platform_seconds, end)
        timer.daemon = True
        timer.start()

    def preempt(self, affinity_key: str, grace_seconds: float | None = None) -> Any:
        """Modal preempts the key's container; the input it ran runs again on a new one.

        See :meth:`StrictContainer.preempt` (SIGINT, then SIGKILL after the
        grace: 30 platform seconds, or 5 s when the platform is not timed).
        """
        with self._lock:
            container = self.containers.pop(self._resolve(affinity_key))
            self.retired.append(container)
        scale = self.platform_seconds
        grace = grace_seconds if grace_seconds is not None else 30 * scale if scale else 5.0
        container.preempt(grace)
        return container
