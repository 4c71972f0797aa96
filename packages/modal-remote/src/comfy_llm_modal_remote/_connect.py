"""The node's way in: one dispatcher per app, Modal checked before anything else."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from ._dispatch import Dispatcher
from ._installation import app_name
from ._transport import ModalTransport, Transport, check_modal_available

__all__ = ["connect", "transport_factory", "use_transport"]

TransportFactory = Callable[[str, Path], Transport]

_LOCK = threading.Lock()
_DISPATCHERS: dict[tuple[str, str], Dispatcher] = {}
_FACTORY: TransportFactory | None = None


def use_transport(factory: TransportFactory | None) -> None:
    """Replace the Modal transport (tests: an in-process stand-in); None restores it."""
    global _FACTORY  # noqa: PLW0603 - the one process-wide seam tests replace
    with _LOCK:
        _FACTORY = factory
        _DISPATCHERS.clear()


def transport_factory() -> TransportFactory | None:
    """The replacement :func:`use_transport` installed, or None for Modal itself."""
    with _LOCK:
        return _FACTORY


def connect(directory: Path) -> Dispatcher:
    """The dispatcher of this installation's app (created once per process).

    Args:
        directory: ComfyUI's user directory, or the storage root outside
            ComfyUI: holds the installation id and the deployment record.

    Raises:
        ModalUnavailableError: ``modal`` is missing or has no credentials
            (only with the real transport).
    """
    with _LOCK:
        factory = _FACTORY
        if factory is None:
            check_modal_available()
        name = app_name(Path(directory))
        key = (name, str(directory))
        dispatcher = _DISPATCHERS.get(key)
        if dispatcher is None:
            transport = (factory or ModalTransport)(name, Path(directory))
            dispatcher = _DISPATCHERS[key] = Dispatcher(transport)
        return dispatcher
