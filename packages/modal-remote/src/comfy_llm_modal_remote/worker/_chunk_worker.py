"""The RemoteEngine's chunk body: caption many images on the resident engine.

Per chunk, on the container's one :class:`EngineService`::

    retired already?                → WorkerUnsafeError (the chunk goes to another container)
    another machine's code?         → DeploymentMismatchError (the fan-out redeploys once)
    carried promotion state         (a retry after auto promotion stays compiled)
    snapshot visible?               (reload once, as for one request)
    decode + prepare every image    an image that fails is that image's error;
                                    each its own seed (core.item_seed(seed, name));
                                    a clip's frames become its video frame parts
    run_batch on the resident engine: the whole chunk under vLLM (continuous
                                    batching), batch_size at a time otherwise
      memory recovery exhausted     → retire, WorkerUnsafeError
    one ImageCaption per image, in order

Progress goes to the chunk's partition: the engine's own events (stage,
tokens of the running batch) plus one ``images`` event per finished batch,
which is what the dispatcher shows as this worker's state. Cancellation is
Modal's ``InputCancellation`` (a ``BaseException``), let through unchanged,
except during a cold load: as for one request, it is held until the load
returns (``_serve.CancelShield``), so the manager owns the model and the
container's next chunk finds it warm (a Cancel early in a fan-out lands in
every worker's first load).
It shares the container's service with ``_engine`` through the service's
public steps (``visible_snapshot``, ``retire``, ``commit_compile_cache``,
``event_interval``): one container, one resident engine, whichever method a
call arrives on.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import platform
import time

from comfy_llm_core import (
    ImageLimits,
    MediaLimits,
    ProgressEvent,
    ProgressStage,
    env_str,
    item_seed,
    render_error,
)
from comfy_llm_inputs import (
    InputError,
    PreparedInputs,
    VideoFramePart,
    VideoInputError,
    assemble_prompt,
    prepare_inputs,
)
from comfy_llm_profiles import ModelProfile, engine_spec
from comfy_llm_residency import InsufficientMemoryError
from comfy_llm_residency.backend import BatchItem, GenerationSettings

from ..errors import DeploymentMismatchError, WorkerUnsafeError
from ..wire._channel import ProgressChannel
from ..wire._chunk_wire import (
    ChunkImage,
    ChunkRequest,
    ChunkResult,
    ImageCaption,
    decode_wire_image,
)
from ..wire._plain import WireDict, WireMapping
from ..wire._settings import FINGERPRINT_ENV
from ..wire._wire import EventSender
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
    ready: list[tuple[int, BatchItem]] = []
    limits = MediaLimits(image=ImageLimits(max_images=1, max_image_side=max(1, *_sides(request))))
    for image in request.images:
        try:
            prepared = (
                _clip_inputs(request, image, profile)
                if image.frames
                else prepare_inputs(
                    request.prompt,
                    system_prompt=request.system_prompt or None,
                    images=[decode_wire_image(image)],
                    limits=limits,
                )
            )
        except (InputError, ValueError, OSError) as error:
            answers[image.index] = ImageCaption(image.index, error=render_error(error))
        else:
            # each image its own seed, from the job's seed and its name, as locally
            seeded = dataclasses.replace(settings, seed=item_seed(settings.seed, image.name))
            ready.append((image.index, BatchItem(prepared, seeded)))
    done = len(answers)
    # An engine that batches continuously (vLLM) takes the whole chunk at once;
    # the others batch ``batch_size`` images at a time, as they do locally.
    whole = engine_spec(profile.backend).continuous_batching
    size = max(1, len(ready)) if whole else request.batch_size
    shield = CancelShield()  # a cancel during the cold load waits for the load, as in generate
    progress = shield.relay(sender)
    try:
        for at in range(0, len(ready), size):
            batch = ready[at : at + size]
            results = service.manager.run_batch(
                profile,
                path,
                [item for _, item in batch],
                reserve_gb=request.reserve_gb,
                keep_loaded=True,
                progress=progress,
            )
            for (index, _), result in zip(batch, results, strict=True):
                answers[index] = ImageCaption(
                    index, result.response, result.reasoning, result.metadata.to_dict()
                )
            done += len(batch)
            sender(_images_event(request, done, time.monotonic() - started))
            _commit_after_cold_load(service, results[0].metadata.to_dict())
    except InsufficientMemoryError as error:
        if error.recovery_timed_out or service.manager.unsafe_for_reuse:
            raise service.retire(str(error)) from error
        raise
    finally:
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


def _clip_inputs(request: ChunkRequest, clip: ChunkImage, profile: ModelProfile) -> PreparedInputs:
    """A clip's request as ``prepare_inputs`` builds one for a video: frames, then the prompt.

    The prompt carries the frames' timestamps (``assemble_prompt``); a model
    that takes no video, or fewer frames than were sent, refuses this clip.

    Raises:
        VideoInputError: The model takes no video, or not this many frames.
        ImageInputError: A frame could not be decoded.
    """
    limit = profile.limits.media.video.max_video_frames
    if len(clip.frames) > limit:
        takes = f"at most {limit} frames per clip" if limit else "no video"
        raise VideoInputError(
            f"{clip.name!r} is a video clip ({len(clip.frames)} frames) and this model takes "
            f"{takes}: leave clips out (exclude_patterns *.mp4) or pick a model reviewed for "
            "video, e.g. the curated qwen2.5-vl-3b-instruct",
            value=len(clip.frames),
            limit=limit,
        )
    frames = tuple(
        VideoFramePart(
            decode_wire_image(
                ChunkImage(clip.index, f"{clip.name} frame {f.index}", f.data, f.width, f.height)
            ),
            timestamp_seconds=f.timestamp_seconds,
            index=f.index,
        )
        for f in clip.frames
    )
    text = assemble_prompt(request.prompt, video_timestamps=[f.timestamp_seconds for f in frames])
    system = (
        request.system_prompt if request.system_prompt and request.system_prompt.strip() else None
    )
    return PreparedInputs.text(text, *frames, system_prompt=system)


def _commit_after_cold_load(service: EngineService, metadata: WireMapping) -> None:
    """As for one request: a cold vLLM load publishes its compiled artifacts."""
    if isinstance(metadata.get("vllm_compile_cache_namespace"), str) and (
        metadata.get("cache_status") == "cold"
    ):
        service.commit_compile_cache()


def _sides(request: ChunkRequest) -> list[int]:
    return [max(image.width, image.height) for image in request.images] or [1]


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
