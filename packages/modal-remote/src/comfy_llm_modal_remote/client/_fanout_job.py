"""What a caption fan-out is given: the job, its images, where results go, the transport.

Plain types shared by the fan-out's loop (``_fanout``) and its callers (the
node, the CLI, the benchmark); nothing here talks to Modal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Protocol

from comfy_llm_core import InvalidSettingError, ProgressCallback, defaults, env_int
from comfy_llm_profiles import ModelProfile, engine_batch_size, engine_spec
from comfy_llm_residency.backend import GenerationSettings

from ..wire._chunk_wire import ChunkImage, ChunkResult
from ..wire._plain import WireDict
from ._transport import RemoteCall

__all__ = [
    "DEFAULT_CHUNK_IMAGES",
    "DEFAULT_GPU_LIMIT",
    "GPU_LIMIT_ENV",
    "MAX_WORKERS",
    "ChunkCollector",
    "ChunkTransport",
    "FanOutImage",
    "FanOutJob",
    "chunk_images",
    "gpu_limit",
]

DEFAULT_CHUNK_IMAGES = 96
"""Images per chunk: at 128 output tokens, a 3-8B VLM on one H100 under vLLM
captions a chunk this size in roughly 10-40 s, so the per-chunk round trip
(spawn, upload ~20 MB, answer) stays a few percent of the chunk. A
continuous-batching engine gets at least two of its sub-batches (:func:`chunk_images`)."""
MAX_CHUNK_IMAGES = 4096
MAX_WORKERS = defaults.MAX_MODAL_WORKERS
GPU_LIMIT_ENV = "COMFY_MODAL_GPU_LIMIT"
DEFAULT_GPU_LIMIT = 10
"""GPUs a Modal workspace may run at once on the Starter plan (modal.com/pricing;
Team and Enterprise workspaces have more: set :data:`GPU_LIMIT_ENV`)."""


def gpu_limit() -> int:
    """The workspace's GPU limit this installation assumes (:data:`GPU_LIMIT_ENV`)."""
    return env_int(GPU_LIMIT_ENV, DEFAULT_GPU_LIMIT, minimum=1, maximum=100_000)


class ChunkTransport(Protocol):
    """What the fan-out needs from a transport: one chunk call on one worker key."""

    app_name: str

    def ensure_ready(
        self, progress: ProgressCallback, check_interrupt: Callable[[], None] = lambda: None
    ) -> None:
        """Deploy on first use (Cancel stops the wait)."""
        ...

    def start_chunk(self, request: WireDict, *, gpu: str, affinity_key: str) -> RemoteCall:
        """Spawn ``RemoteEngine(affinity=affinity_key).with_options(gpu=gpu).caption_chunk``."""
        ...

    def expected_fingerprint(self) -> str:
        """The code fingerprint a deploy from this machine bakes in."""
        ...

    def forget_deployment(self) -> None:
        """Deploy again on the next :meth:`ensure_ready`."""
        ...


class ChunkCollector(Protocol):
    """Receives results as they come (the node writes caption files here)."""

    def captions(self, result: ChunkResult) -> None:
        """A chunk came back: one caption or per-image error for each of its images."""
        ...

    def failed(self, indices: Sequence[int], message: str) -> None:
        """These images failed: unreadable locally, or their chunk failed twice."""
        ...


@dataclasses.dataclass(frozen=True)
class FanOutImage:
    """An image still to caption; encoded only when its chunk is sent (bounded memory).

    Attributes:
        index: Its position in the job (what the collector is told).
        name: For messages.
        encode: Returns the bytes worth sending; raises for an unreadable image.
    """

    index: int
    name: str
    encode: Callable[[], ChunkImage]


@dataclasses.dataclass(frozen=True)
class FanOutJob:
    """What every chunk shares, and how wide to go.

    Attributes:
        model: ``owner/model[@revision]`` or a curated id.
        prompt: The captioning instruction.
        system_prompt: Optional system prompt.
        settings: Sampling settings (the same seed for every image).
        gpu: Modal GPU type (``H100``, ``L40S``, ...).
        workers: GPU containers to use at once (1 to :data:`MAX_WORKERS`).
        chunk_images: Images per chunk (one call); None: :func:`chunk_images`
            decides once the profile is known.
        batch_size: Images per ``run_batch`` call inside a worker (vLLM at
            least twice its ``max_num_seqs``: profiles' ``engine_batch_size``).
        reserve_gb: VRAM to keep free on each worker.
    """

    model: str
    prompt: str
    system_prompt: str | None
    settings: GenerationSettings
    gpu: str
    workers: int = 1
    chunk_images: int | None = None
    batch_size: int = 8
    reserve_gb: float | None = None

    def __post_init__(self) -> None:
        """Check the GPU and the sizes, naming the setting and the range.

        A fallback list (``H100,A100-80GB``) captions on its first type: the
        workers' keys and pools are per GPU type.
        """
        from ._gpu import gpu_choices

        object.__setattr__(self, "gpu", gpu_choices(self.gpu)[0])
        for name, value, limit in (
            ("modal_workers", self.workers, MAX_WORKERS),
            ("chunk_images", self.chunk_images, MAX_CHUNK_IMAGES),
            ("batch_size", self.batch_size, 4096),
        ):
            if name == "chunk_images" and value is None:
                continue  # decided once the profile is known
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
                raise InvalidSettingError(name, value, f"a whole number from 1 to {limit}")


def chunk_images(job: FanOutJob, profile: ModelProfile) -> int:
    """Images per chunk: the job's choice, else :data:`DEFAULT_CHUNK_IMAGES`.

    A continuous-batching engine (vLLM) runs a chunk in sub-batches of twice
    its ``max_num_seqs`` (``engine_batch_size``); a chunk of one sub-batch
    would leave the worker's feeder nothing to prepare while the engine runs
    and pay the round trip (spawn, upload, answer) for half the work, so an
    unchosen size holds at least two (at most :data:`MAX_CHUNK_IMAGES`).
    """
    if job.chunk_images is not None:
        return job.chunk_images
    if not engine_spec(profile.backend).continuous_batching:
        return DEFAULT_CHUNK_IMAGES
    two = 2 * engine_batch_size(profile, job.batch_size)
    return min(MAX_CHUNK_IMAGES, max(DEFAULT_CHUNK_IMAGES, two))
