"""Two-way memory with a host application (ComfyUI) that runs its own models.

The manager tells a :class:`HostListener` about every model it loads (with the
memory the load measurably took) and every model it unloads; the host may ask
for a resident model back through ``ResidentModelManager.evict_for_host``.
Nothing here knows which host it is: ComfyUI's specifics live in comfy-node.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Protocol, runtime_checkable

logger = logging.getLogger("comfy_llm_residency")


@dataclasses.dataclass(frozen=True, slots=True)
class ResidentInfo:
    """What a host learns about one model the manager just loaded.

    Attributes:
        profile_id: The resident's profile id (the key for ``evict_for_host``).
        repository: Its repository, for the host's logs.
        backend: The engine that holds it (``transformers``, ``mlx_vlm``, ...).
        resident_bytes: Memory the load took, measured (the process's own
            allocation delta where the probe can see it, else the device's
            free-memory delta); never the estimate.
        device: What the probe measured (``cpu``, ``apple_unified``, ``cuda:0``).
    """

    profile_id: str
    repository: str
    backend: str
    resident_bytes: int
    device: str


@runtime_checkable
class HostListener(Protocol):
    """Receives the manager's loads and unloads (called under the manager's lock).

    Both methods must return quickly and must not call back into the manager;
    an exception they raise is logged and otherwise ignored.
    """

    def resident_loaded(self, info: ResidentInfo) -> None:
        """A model became resident."""
        ...

    def resident_unloaded(self, profile_id: str, *, by_host: bool) -> None:
        """A model was unloaded; ``by_host`` when the host asked for it."""
        ...


def notify_loaded(listener: HostListener | None, info: ResidentInfo) -> None:
    if listener is None:
        return
    try:
        listener.resident_loaded(info)
    except Exception:
        logger.exception("The host listener failed on the load of %s", info.profile_id)


def notify_unloaded(listener: HostListener | None, profile_id: str, *, by_host: bool) -> None:
    if listener is None:
        return
    try:
        listener.resident_unloaded(profile_id, by_host=by_host)
    except Exception:
        logger.exception("The host listener failed on the unload of %s", profile_id)
