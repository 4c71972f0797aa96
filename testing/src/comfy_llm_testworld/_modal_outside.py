"""What happens to a stand-in app from outside this machine: the dashboard, Modal's status.

Mixed into :class:`~.modal_strict.StrictTransport` (its lock, containers and
current deployment): a deploy that fails as Modal's client raises, the app
stopped from the dashboard or ``modal app stop`` (this machine not told), and
what ``modal app list``/``modal container list`` would say of it.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["OutsideOperations"]


class OutsideOperations:
    """The platform's side of deploy failures, outside stops and status."""

    _lock: threading.RLock
    containers: dict[str, Any]
    retired: list[Any]
    app_name: str
    _current: Any
    _deploy_errors: list[BaseException]

    def fail_deploys(self, *errors: BaseException) -> None:
        """The next deploys raise these, in order (``AuthError``, ``ConnectionError``...)."""
        self._deploy_errors.extend(errors)

    def stop_outside(self) -> None:
        """The app is stopped from the dashboard: containers end, this transport is not told."""
        with self._lock:
            old, self.containers = list(self.containers.values()), {}
            self._current = None
        for container in old:
            container.kill()
            self.retired.append(container)

    def status(self) -> dict[str, Any]:
        """``ModalTransport.status``: deployed or not, containers running."""
        with self._lock:
            live = [c for c in self.containers.values() if not c.stopped]
            return {
                "app": self.app_name,
                "deployed": self._current is not None,
                "containers": len(live),
                "code": self._current.fingerprint if self._current else None,
            }
