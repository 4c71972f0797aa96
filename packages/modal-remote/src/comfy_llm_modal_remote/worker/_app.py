"""The Modal app: image, Volumes, secret, ModelStager and RemoteEngine.

Imported only when Modal is used (it imports ``modal``), on the local side to
deploy and look functions up, and in the containers to run them. Its names
come from :class:`ModalSettings` at import time; the image bakes them into
the container environment, so both sides build the same definitions.

* ``model_stager``: CPU only, the weight Volume and the secret (HF_TOKEN);
  the only function that downloads, on its own slim image (``stager_image``:
  modal-remote's closure, no torch, CUDA or vLLM: about 68 MiB of wheels
  against the GPU image's 3.7 GiB); each snapshot is staged once, across
  its containers and the installations sharing the Volume, under a lease in
  ``stage_leases``, a Dict named after the Volume (see ``_stage_lease``).
* ``RemoteEngine``: the GPU class, warm across calls, one container pool per
  ``affinity`` key, the weight Volume at the storage root and the
  compile-cache Volume at :data:`COMPILE_CACHE_MOUNT`; no secret (it never
  touches the network). Its GPU is chosen per call with
  ``RemoteEngine.with_options(gpu=...)``; it reserves CPU and memory (Modal's
  default is 0.125 core) and caps its containers (settings). Sync methods and no
  ``@modal.concurrent``: a cancel then raises ``InputCancellation`` in the
  request instead of stopping the container.

The image's source mounts are the only local files that travel:
``include_source=False`` keeps Modal from adding a second, differently
filtered mount of this package for each function (_functions.py:790). The
image's environment carries the code fingerprint (``FINGERPRINT_ENV``),
computed here on the local side and read back from the environment inside
a container, where the stager echoes it to the dispatcher.
"""

from pathlib import Path

import modal
from comfy_llm_core import defaults, env_str

from ..wire._fingerprint import code_fingerprint
from ..wire._image import build_image, image_spec
from ..wire._plain import WireDict
from ..wire._settings import (
    COMPILE_CACHE_MOUNT,
    COMPILE_CACHE_ROOT_ENV,
    ENGINE_SCALEDOWN_SECONDS,
    ENGINE_TIMEOUT_SECONDS,
    FINGERPRINT_ENV,
    STAGER_TIMEOUT_SECONDS,
    ModalSettings,
)
from ._chunk_worker import serve_chunk
from ._container import ModalContainerControl, ModalQueueChannel, ModalVolume
from ._engine import EngineService
from ._stage_lease import StageLeases
from ._stager import serve_stage

__all__ = [
    "DEFAULT_APP_NAME",
    "DEFAULT_GPU",
    "ENGINE_TIMEOUT_SECONDS",
    "STAGER_TIMEOUT_SECONDS",
    "RemoteEngine",
    "app",
    "compile_cache_volume",
    "fingerprint",
    "image",
    "model_stager",
    "secret",
    "settings",
    "stage_leases",
    "stager_image",
    "weight_volume",
]

DEFAULT_APP_NAME = "comfy-llm"
DEFAULT_GPU = defaults.DEFAULT_GPU
STAGER_CPU = 2.0
STAGER_MEMORY_MB = 16 * 1024
STAGER_MAX_CONTAINERS = 4
"""Stagers at once: a stage that waits on another installation's lease (the Dict
lease serializes each snapshot) leaves others free for models already complete."""

settings = ModalSettings.from_env()
fingerprint = code_fingerprint() if modal.is_local() else (env_str(FINGERPRINT_ENV) or "")
image = build_image(
    image_spec(
        settings, {COMPILE_CACHE_ROOT_ENV: COMPILE_CACHE_MOUNT, FINGERPRINT_ENV: fingerprint}
    )
)
weight_volume = modal.Volume.from_name(settings.volume_name, create_if_missing=True)
compile_cache_volume = modal.Volume.from_name(
    settings.compile_cache_volume_name, create_if_missing=True
)
secret = modal.Secret.from_name(settings.secret_name)
stage_leases = modal.Dict.from_name(settings.stage_lease_dict_name, create_if_missing=True)
stager_image = build_image(image_spec(settings, {FINGERPRINT_ENV: fingerprint}, stager=True))
"""The stager's slim image: it only downloads, so no torch, CUDA or vLLM (``image_spec``)."""
app = modal.App(settings.app_name or DEFAULT_APP_NAME, image=image, include_source=False)


def _channel(queue_name: str, request: WireDict) -> ModalQueueChannel:
    return ModalQueueChannel(modal.Queue.from_name(queue_name), str(request.get("request_id")))


@app.function(
    image=stager_image,
    cpu=STAGER_CPU,
    memory=STAGER_MEMORY_MB,
    volumes={settings.storage_root: weight_volume},
    secrets=[secret],
    timeout=STAGER_TIMEOUT_SECONDS,
    max_containers=STAGER_MAX_CONTAINERS,
)
def model_stager(request: WireDict, queue_name: str) -> WireDict:
    """Resolve and stage one reference on the weight Volume (see ``_stager``)."""
    return serve_stage(
        request,
        _channel(queue_name, request),
        storage_root=Path(settings.storage_root),
        volume=ModalVolume(weight_volume),
        leases=StageLeases.from_settings(stage_leases, settings),
    )


@app.cls(
    gpu=DEFAULT_GPU,
    volumes={settings.storage_root: weight_volume, COMPILE_CACHE_MOUNT: compile_cache_volume},
    timeout=ENGINE_TIMEOUT_SECONDS,
    scaledown_window=ENGINE_SCALEDOWN_SECONDS,
    cpu=settings.engine_cpu,
    memory=settings.engine_memory_mb,
    max_containers=settings.engine_max_containers,
)
class RemoteEngine:
    """The warm GPU worker (see ``_engine``)."""

    affinity: str = modal.parameter(default="default")

    @modal.enter()
    def start(self) -> None:
        """Create the container's engine service once."""
        self.service = EngineService(
            storage_root=Path(settings.storage_root),
            volume=ModalVolume(weight_volume),
            container=ModalContainerControl(),
            compile_cache=ModalVolume(compile_cache_volume),
        )

    @modal.method()
    def generate(self, request: WireDict, queue_name: str) -> WireDict:
        """Serve one request; progress goes to the request's queue partition."""
        return self.service.serve(request, _channel(queue_name, request))

    @modal.method()
    def caption_chunk(self, request: WireDict, queue_name: str) -> WireDict:
        """Caption one chunk of images on the resident engine (``_chunk_worker``)."""
        return serve_chunk(self.service, request, _channel(queue_name, request))
