"""The node's way in: one dispatcher per app, Modal checked before anything else."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ..wire._plain import WireDict
from ._dispatch import Dispatcher
from ._installation import app_name
from ._transport import ModalTransport, Transport, check_modal_available

__all__ = ["app_status", "connect", "stop_app", "transport_factory", "use_transport"]

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


class _Managed(Protocol):
    def status(self) -> WireDict: ...

    def stop_app(self) -> None: ...


def app_status(directory: Path) -> WireDict:
    """This installation's app: its name, deployed or not, running containers (billed).

    Raises:
        ModalUnavailableError: ``modal`` is missing, has no credentials, or
            refused them; Modal could not be reached.
    """
    from ._errors import translate_client_error

    transport: _Managed = connect(directory).transport  # type: ignore[assignment]
    try:
        return dict(transport.status())
    except Exception as error:
        translated = translate_client_error(error, app_name(Path(directory)))
        if translated is None:
            raise
        raise translated from error


def stop_app(directory: Path) -> WireDict:
    """Stop this installation's app: every container (warm GPUs included) ends now.

    The Volumes and their models stay; the next run deploys the app again.
    """
    before = app_status(directory)
    if before["deployed"]:
        transport: _Managed = connect(directory).transport  # type: ignore[assignment]
        transport.stop_app()
    return {
        "app": before["app"],
        "was_deployed": before["deployed"],
        "containers_stopped": before["containers"],
    }
