"""One process-global manager per execution target."""

from __future__ import annotations

import threading
from typing import Any

from comfy_llm_core import ExecutionTarget

from ._manager import ResidentModelManager
from ._settings import coerce_target
from .backend import BackendFactory

_managers: dict[ExecutionTarget, ResidentModelManager] = {}
_registry_lock = threading.Lock()


def get_manager(
    target: ExecutionTarget | str, *, backend_factory: BackendFactory, **kwargs: Any
) -> ResidentModelManager:
    """Return the process-global manager for ``target``, creating it on first use.

    The first call configures the manager; later calls for the same target
    return that manager and ignore their arguments (the node, the CLI and the
    Modal RemoteEngine each pass the same factory).

    Args:
        target: The execution target.
        backend_factory: Loads a backend (used only when the manager is created).
        **kwargs: Further :class:`ResidentModelManager` arguments (first call only).

    Returns:
        The manager for ``target``.

    Raises:
        InvalidSettingError: When the target, an argument or an environment
            variable is invalid.
    """
    resolved = coerce_target(target)
    with _registry_lock:
        manager = _managers.get(resolved)
        if manager is None:
            manager = ResidentModelManager(resolved, backend_factory=backend_factory, **kwargs)
            _managers[resolved] = manager
        return manager


def reset_managers() -> None:
    """Unload every model of every global manager and forget the managers.

    Meant for tests and process shutdown. Every manager is forgotten even
    when an unload raises; the first error is raised afterwards.

    Raises:
        Exception: The first error an ``unload_all`` raised.
    """
    with _registry_lock:
        managers = list(_managers.values())
        _managers.clear()
    first_error: BaseException | None = None
    for manager in managers:
        try:
            manager.unload_all()
        except Exception as error:
            first_error = first_error or error
    if first_error is not None:
        raise first_error
