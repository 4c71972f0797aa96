"""comfy-llm-modal-remote: the Modal side of comfy-llm.

The app (``_app``, imported only when Modal is used), the CPU ModelStager and
GPU RemoteEngine bodies (``stage_model`` / ``serve_stage``, ``EngineService``),
the wire between them and the local :class:`Dispatcher` the node uses when
``run_on_modal`` is on. Only this package imports ``modal``, and only lazily.
"""

from .client._connect import app_status, connect, stop_app, use_transport
from .client._dispatch import DEFAULT_AFFINITY_KEY, Dispatcher, RemoteRun
from .client._fanout import (
    DEFAULT_CHUNK_IMAGES,
    MAX_WORKERS,
    ChunkCollector,
    ChunkTransport,
    FanOutImage,
    FanOutJob,
    FanOutReport,
    caption_fan_out,
)
from .client._installation import app_name, installation_id
from .client._transport import (
    ModalTransport,
    RemoteCall,
    Transport,
    check_modal_available,
)
from .errors import (
    DeploymentConflictError,
    DeploymentMismatchError,
    GPUUnavailableError,
    ModalAppMissingError,
    ModalDeployError,
    ModalRemoteError,
    ModalUnavailableError,
    RemoteCallCancelledError,
    RemoteExecutionError,
    RemoteTimeoutError,
    SnapshotNotVisibleError,
    WorkerUnsafeError,
)
from .wire._channel import ProgressChannel
from .wire._chunk_wire import (
    WIRE_IMAGE_SIDE,
    ChunkFrame,
    ChunkImage,
    ChunkResult,
    ImageCaption,
    encode_image_file,
    encode_pil_image,
    encode_video_file,
)
from .wire._fingerprint import code_fingerprint
from .wire._image import ImageSpec, image_spec
from .wire._settings import ModalSettings
from .wire._wire import EngineRequest, StageRequest, StageResult
from .worker._chunk_worker import serve_chunk
from .worker._container import ContainerControl, VolumeStore
from .worker._engine import EngineService
from .worker._stage_lease import LeaseStore, StageLeases
from .worker._stager import serve_stage, stage_model

__version__ = "0.1.0"

__all__ = [
    "DeploymentConflictError",
    "DeploymentMismatchError",
    "ModalDeployError",
    "DEFAULT_AFFINITY_KEY",
    "DEFAULT_CHUNK_IMAGES",
    "MAX_WORKERS",
    "WIRE_IMAGE_SIDE",
    "ChunkCollector",
    "ChunkFrame",
    "ChunkImage",
    "ChunkResult",
    "ChunkTransport",
    "ContainerControl",
    "Dispatcher",
    "EngineRequest",
    "EngineService",
    "FanOutImage",
    "FanOutJob",
    "FanOutReport",
    "GPUUnavailableError",
    "ImageCaption",
    "ImageSpec",
    "LeaseStore",
    "ModalAppMissingError",
    "ModalRemoteError",
    "ModalSettings",
    "ModalTransport",
    "ModalUnavailableError",
    "ProgressChannel",
    "RemoteCall",
    "RemoteCallCancelledError",
    "RemoteTimeoutError",
    "RemoteExecutionError",
    "RemoteRun",
    "SnapshotNotVisibleError",
    "StageLeases",
    "StageRequest",
    "StageResult",
    "Transport",
    "VolumeStore",
    "WorkerUnsafeError",
    "app_name",
    "app_status",
    "caption_fan_out",
    "check_modal_available",
    "code_fingerprint",
    "connect",
    "encode_image_file",
    "encode_pil_image",
    "encode_video_file",
    "image_spec",
    "installation_id",
    "serve_chunk",
    "serve_stage",
    "stage_model",
    "stop_app",
    "use_transport",
]
