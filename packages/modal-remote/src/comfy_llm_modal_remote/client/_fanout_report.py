"""The fan-out's record: what a captioning job on N Modal GPUs cost and what failed."""

from __future__ import annotations

import dataclasses
from typing import TypedDict

from ..wire._plain import WireDict

__all__ = ["CAPTION_SCALEDOWN_SECONDS", "FanOutReport", "Reservation"]

CAPTION_SCALEDOWN_SECONDS = 60
"""Idle seconds a caption worker stays up after its last chunk (the node's own
engine keeps 600): a worker is idle only between chunks, and after the job
each of the N GPUs bills at most this long; a resume within it finds them warm."""


class Reservation(TypedDict):
    """``_dispatch.reservation``: the ``modal_*`` cost facts of :class:`ModalFacts`."""

    modal_reserved_cpu: float
    modal_reserved_memory_mb: int
    modal_idle_window_seconds: float


@dataclasses.dataclass
class FanOutReport:
    """What the run cost and what failed (JSON-ready through :meth:`to_dict`)."""

    app_name: str
    gpu: str
    workers: int
    chunk_images: int
    gpu_limit: int = 0
    """The workspace GPU limit the job assumed (``COMFY_MODAL_GPU_LIMIT``)."""
    workers_used: int = 0
    """Workers actually fed: ``workers`` capped by the GPU limit and the chunk count."""
    images: int = 0
    captioned: int = 0
    failed_images: int = 0
    chunks: int = 0
    chunks_retried: int = 0
    failed_chunks: list[WireDict] = dataclasses.field(default_factory=list)
    wall_seconds: float = 0.0
    gpu_seconds: float = 0.0
    """What the workers measured themselves busy on chunks (load and captioning)."""
    worker_seconds: float = 0.0
    call_seconds: float = 0.0
    """Each call from its spawn's return to its answer here: what containers were
    held for, cold starts and GPU queueing included (failed calls too)."""
    stage_seconds: float = 0.0
    bytes_sent: int = 0
    images_sent: int = 0
    chunk_overhead_seconds: list[float] = dataclasses.field(default_factory=list)
    per_worker: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    reservation: Reservation | None = None
    """What each worker reserves beside its GPU (cores, memory, idle window)."""
    profile: WireDict = dataclasses.field(default_factory=dict)
    """The staged profile's ``to_dict()`` (not part of the cost record)."""

    @property
    def images_per_gpu_second(self) -> float:
        """Captioned images per GPU-second the workers measured (0 before any)."""
        return round(self.captioned / self.gpu_seconds, 4) if self.gpu_seconds > 0 else 0.0

    @property
    def images_per_second(self) -> float:
        """Captioned images per second of the whole job's wall time (0 before any)."""
        return round(self.captioned / self.wall_seconds, 4) if self.wall_seconds > 0 else 0.0

    def to_dict(self) -> WireDict:
        """The record the node and CLI put in their metadata (``modal_*`` keys)."""
        overhead = self.chunk_overhead_seconds
        record: WireDict = {
            "modal_app_name": self.app_name,
            "modal_gpu": self.gpu,
            "modal_workers": self.workers,
            "modal_workers_used": self.workers_used,
            "modal_gpu_limit": self.gpu_limit,
            "modal_chunk_images": self.chunk_images,
            "modal_chunks": self.chunks,
            "modal_chunks_retried": self.chunks_retried,
            "modal_failed_chunks": list(self.failed_chunks),
            "modal_wall_seconds": round(self.wall_seconds, 3),
            "modal_stage_seconds": round(self.stage_seconds, 3),
            "modal_gpu_seconds": round(self.gpu_seconds, 3),
            "modal_worker_seconds": round(self.worker_seconds, 3),
            "modal_call_seconds": round(self.call_seconds, 3),
            "modal_images_per_gpu_second": self.images_per_gpu_second,
            "modal_images_per_second": self.images_per_second,
            "modal_chunk_overhead_seconds": (
                round(sum(overhead) / len(overhead), 4) if overhead else 0.0
            ),
            "modal_idle_tail_gpu_seconds_max": len(self.per_worker) * CAPTION_SCALEDOWN_SECONDS,
            "modal_bytes_sent": self.bytes_sent,
            "modal_bytes_per_image": (
                round(self.bytes_sent / self.images_sent) if self.images_sent else 0
            ),
            "modal_per_worker": {key: dict(value) for key, value in self.per_worker.items()},
        }
        if self.reservation is not None:
            record["modal_reserved_cpu"] = self.reservation["modal_reserved_cpu"]
            record["modal_reserved_memory_mb"] = self.reservation["modal_reserved_memory_mb"]
            record["modal_idle_window_seconds"] = self.reservation["modal_idle_window_seconds"]
        return record
