"""What this package asks of Modal, public: the seam the strict stand-in models Modal with.

The test world's Modal stand-in must hold the product to the platform's
rules with the product's own values (the pool a spawn lands in depends on
the options it passes; a scaledown or a timeout on the windows the app
declares; a deploy on the strategy it uses; a worker's progress through the
worker's own Queue writer). Those values live in private modules; this
module is the one public place the stand-in (or anything outside the
package) reads them from, so the private layout can move freely.
"""

from __future__ import annotations

from .client._deploy import DEPLOY_STRATEGY
from .client._transport import EngineOptions, engine_options
from .wire._modal_api import DictStore, QueueWriter, VolumeHandle
from .wire._plain import WireDict, WireMapping, WireValue
from .wire._settings import (
    ENGINE_SCALEDOWN_SECONDS,
    ENGINE_TIMEOUT_SECONDS,
    STAGER_TIMEOUT_SECONDS,
)
from .worker._container import ModalQueueChannel

__all__ = [
    "DEPLOY_STRATEGY",
    "ENGINE_SCALEDOWN_SECONDS",
    "ENGINE_TIMEOUT_SECONDS",
    "STAGER_TIMEOUT_SECONDS",
    "DictStore",
    "EngineOptions",
    "ModalQueueChannel",
    "QueueWriter",
    "VolumeHandle",
    "WireDict",
    "WireMapping",
    "WireValue",
    "engine_options",
]
