"""The RemoteEngine's chunk body: caption many images on the resident engine.

Per chunk, on the container's one :class:`EngineService`::

    retired already?                → WorkerUnsafeError (the chunk goes to another container)
    another machine's code?         → DeploymentMismatchError (the fan-out redeploys once)
    carried promotion state         (a retry after auto promotion stays compiled)
    snapshot visible?               (reload once, as for one request)
    sub-batches of profiles' engine_batch_size: batch_size, and for an engine
      that batches continuously (vLLM) at least 2 x max_num_seqs
    per sub-batch:
      decode + prepare its images   the first here, each later one on a
                                    one-thread feeder while the engine runs
                                    the one before (``_chunk_inputs``): an
                                    image that fails is that image's error;
                                    each its own seed (core.item_seed)
      run_batch on the resident engine
        memory recovery exhausted   → retire, WorkerUnsafeError
      one ``images`` event
    one ImageCaption per image, in the request's order

The feeder is why the engine never waits on the CPU between sub-batches:
decoding and preparing a 1024² JPEG costs 10-15 ms of CPU against about
20 ms of GPU per caption at the 50 captions a second aimed for, so
preparing the whole chunk before the engine started left the GPU idle for
more than half as long again, on every chunk. On any exit the feeder is told to stop (it
checks before each image) and is shut down before the body returns or
raises, so no thread outlives the chunk.

Progress goes to the chunk's partition: the engine's own events (stage,
tokens of the running batch) plus one ``images`` event per finished
sub-batch, which is what the dispatcher shows as this worker's state.
Cancellation is Modal's ``InputCancellation`` (a ``BaseException``), let
through unchanged, except during a cold load: as for one request, it is
held until the load returns (``_serve.CancelShield``), so the manager owns
the model and the container's next chunk finds it warm (a Cancel early in a
fan-out lands in every worker's first load).
It shares the container's service with ``_engine`` through the service's
public steps (``visible_snapshot``, ``retire``, ``commit_compile_cache``,
``event_interval``): one container, one resident engine, whichever method a
call arrives on.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import platform
import threading
import time
from collections.abc import Sequence

from comfy_llm_core import ProgressEvent, ProgressStage, env_str
from comfy_llm_profiles import ModelProfile, engine_batch_size
from comfy_llm_residency import InsufficientMemoryError
from comfy_llm_residency.backend import GenerationSettings

from ..errors import DeploymentMismatchError, WorkerUnsafeError
from ..wire._channel import ProgressChannel
from ..wire._chunk_wire import ChunkImage, ChunkRequest, ChunkResult, ImageCaption
from ..wire._plain import WireDict, WireMapping
from ..wire._settings import FINGERPRINT_ENV
from ..wire._wire import EventSender
from ._chunk_inputs import SubBatch, chunk_limits, prepare_images
from ._engine import EngineService
from ._serve import CancelShield, serve_input

__all__ = ["caption_chunk", "serve_chunk"]

logger = logging.getLogger("comfy_llm_modal_remote")


def serve_chunk(
    service: EngineService, request_wire: WireMapping, channel: ProgressChannel
) -> WireDict:
    """Serve one chunk; an error of the whole chunk comes back as an envelope."""
    return serve_input(
        lambda: caption_chunk(service, ChunkRequest.from_wire(request_wire), channel).to_wire(),
        channel,
        what="Chunk",
        container="GPU",
    )


def caption_chunk(
    service: EngineService, request: ChunkRequest, channel: ProgressChannel
) -> ChunkResult:
    """Caption one chunk (see the module docstring for the order)."""
    started = time.monotonic()
    if service.unsafe:
        raise WorkerUnsafeError(
            "this worker was already retired after a failed memory recovery.",
            service.export_promotion_state(),
        )
    deployed = env_str(FINGERPRINT_ENV)
    if request.code_fingerprint and deployed and request.code_fingerprint != deployed:
        raise DeploymentMismatchError(request.code_fingerprint, deployed)
    if request.promotion_state:
        service.import_promotion_state(request.promotion_state)
    profile = ModelProfile.from_dict(request.profile)
    path = service.visible_snapshot(profile, request.snapshot)
    settings = GenerationSettings.from_dict(request.settings)
    sender = EventSender(channel, interval=service.event_interval)
    answers: dict[int, ImageCaption] = {}
    size = engine_batch_size(profile, request.batch_size)
    batches = [request.images[at : at + size] for at in range(0, len(request.images), size)]
    limits = chunk_limits(request)
    stop = threading.Event()

    def prepare(images: Sequence[ChunkImage]) -> SubBatch:
        return prepare_images(
            request, images, profile=profile, settings=settings, limits=limits, stop=stop
        )

    feeder = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="chunk-feed")
    upcoming: concurrent.futures.Future[SubBatch] | None = None
    done = 0
    shield = CancelShield()  # a cancel during the cold load waits for the load, as in generate
    progress = shield.relay(sender)
    try:
        for number, images in enumerate(batches):
            made = upcoming.result() if upcoming is not None else prepare(images)
            upcoming = None
            if number + 1 < len(batches):  # prepared while the engine runs this one
                upcoming = feeder.submit(prepare, batches[number + 1])
            answers.update((answer.index, answer) for answer in made.failed)
            if made.ready:
                results = service.manager.run_batch(
                    profile,
                    path,
                    [item for _, item in made.ready],
                    reserve_gb=request.reserve_gb,
                    keep_loaded=True,
                    progress=progress,
                )
                for (index, _), result in zip(made.ready, results, strict=True):
                    answers[index] = ImageCaption(
                        index, result.response, result.reasoning, result.metadata.to_dict()
                    )
                _commit_after_cold_load(service, results[0].metadata.to_dict())
            done += len(images)
            sender(_images_event(request, done, time.monotonic() - started))
    except InsufficientMemoryError as error:
        if error.recovery_timed_out or service.manager.unsafe_for_reuse:
            raise service.retire(str(error)) from error
        raise
    finally:
        stop.set()  # a sub-batch still being prepared stops at its next image
        feeder.shutdown(wait=True, cancel_futures=True)
        shield.release(raise_pending=False)
        sender.flush()
    shield.raise_pending()
    if service.manager.unsafe_for_reuse:
        service.retire("an unload failed after the chunk.")
    return ChunkResult(
        chunk_id=request.chunk_id,
        captions=tuple(answers[image.index] for image in request.images),
        worker_seconds=round(time.monotonic() - started, 3),
        container=f"{platform.node()}:{os.getpid()}:{id(service):x}",
    )


def _commit_after_cold_load(service: EngineService, metadata: WireMapping) -> None:
    """As for one request: a cold vLLM load publishes its compiled artifacts."""
    if isinstance(metadata.get("vllm_compile_cache_namespace"), str) and (
        metadata.get("cache_status") == "cold"
    ):
        service.commit_compile_cache()


def _images_event(request: ChunkRequest, done: int, elapsed: float) -> ProgressEvent:
    total = len(request.images)
    return ProgressEvent(
        stage=ProgressStage.GENERATE,
        message=f"chunk {request.chunk_id}: {done}/{total} images",
        value=float(done),
        maximum=float(total),
        unit="images",
        elapsed_seconds=elapsed,
    )
