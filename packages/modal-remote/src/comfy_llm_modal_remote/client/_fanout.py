"""Caption a dataset on N Modal GPUs: chunk, send, collect — Modal does the rest.

    transport ready, model staged once by the ModelStager   (no GPU yet)
    images cut into chunks of ``chunk_images`` (unchosen: the default, for vLLM
      at least two of the worker's sub-batches, once the profile is known)
    N workers = N affinity keys ``caption-<gpu>-<i>``: each key is its own
      warm container pool of ``RemoteEngine`` (a parametrized Modal class:
      "each unique combination of arguments will behave like an individual
      Modal Function with its own auto-scaling", modal.com/docs/guide/
      parametrized-functions), so N keys are N GPU containers, each serving
      one chunk at a time
      through ``run_batch`` on its resident engine
    each worker's call is a ``spawn`` of ``RemoteEngine.caption_chunk``
      (a FunctionCall each: Cancel cancels every one of them), made, uploaded
      and followed on a thread of its own (``_fanout_worker``): the loop only
      polls Cancel, hands out chunks and collects, so N workers are fed at
      once and Cancel is seen within ``poll_seconds`` whatever is uploading
    every chunk carries this machine's code fingerprint: staged or answered
      by another machine's code → redeploy once (the dispatcher's rule)
    a returned chunk goes to the collector at once (captions written)
    a chunk whose call failed (container lost, timeout, WorkerUnsafeError,
      any error of the whole chunk) goes once more to another container:
      that worker's key is replaced by a fresh one and the chunk must not
      run on the key that failed; a second failure is named in the report

Why spawned calls on distinct keys and not ``map``/``spawn_map`` (read in the
modal 1.6.4 client): ``Function.spawn_map`` returns None (``parallel_map.py``
``_spawn_map_sync``: "exiting as soon as the inputs are created"), so there
is no FunctionCall to cancel and no result to read; ``map`` has no handle to
cancel either (closing its iterator only cancels local tasks, the inputs run
on), and with ``order_outputs=False`` a failed input comes back as a bare
exception without its index, so the chunk to retry is unknown until the map
ends. One chunk per call also gives each chunk its own progress partition
and lets a retry choose *another* container, which a map input cannot.
The only scheduling here is the chunk queue the N worker slots take from.

Cost on the record: wall time, GPU-seconds (what the workers measured
themselves busy on each chunk: load and captioning, not the upload, a GPU
queue or this loop), call seconds (each call from its spawn's return to its
answer: what a container was held for, cold starts included), the idle
:data:`CAPTION_SCALEDOWN_SECONDS` after the last chunk at most, images per
GPU-second, chunks retried, the app and the GPU. ``modal_workers`` above the
workspace's GPU limit (:data:`GPU_LIMIT_ENV`) is said before any spawn and
capped: the extra workers would only queue, billing their queue time nowhere
useful.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Sequence

from comfy_llm_core import (
    ProgressCallback,
    ProgressEvent,
    ProgressStage,
    ignore_progress,
)
from comfy_llm_profiles import ModelProfile

from ..errors import (
    DeploymentMismatchError,
)
from ..wire._wire import StageResult
from ._dispatch import Dispatcher, reservation
from ._errors import ensure_ready
from ._fanout_job import (
    DEFAULT_CHUNK_IMAGES,
    DEFAULT_GPU_LIMIT,
    GPU_LIMIT_ENV,
    MAX_WORKERS,
    ChunkCollector,
    ChunkTransport,
    FanOutImage,
    FanOutJob,
    chunk_images,
    gpu_limit,
)
from ._fanout_loop import FanOutLoop, RestartJob
from ._fanout_report import CAPTION_SCALEDOWN_SECONDS, FanOutReport, Reservation
from ._fanout_worker import ChunkTask

__all__ = [
    "CAPTION_SCALEDOWN_SECONDS",
    "DEFAULT_CHUNK_IMAGES",
    "DEFAULT_GPU_LIMIT",
    "GPU_LIMIT_ENV",
    "MAX_WORKERS",
    "ChunkCollector",
    "ChunkTransport",
    "FanOutImage",
    "FanOutJob",
    "FanOutReport",
    "caption_fan_out",
]


def caption_fan_out(
    dispatcher: Dispatcher,
    job: FanOutJob,
    images: Sequence[FanOutImage],
    collector: ChunkCollector,
    *,
    done_before: int = 0,
    total: int | None = None,
    progress: ProgressCallback = ignore_progress,
    check_interrupt: Callable[[], None] = lambda: None,
    poll_seconds: float = 0.01,
) -> FanOutReport:
    """Caption ``images`` on ``job.workers`` GPU containers (see the module docstring).

    Args:
        dispatcher: This installation's dispatcher (its transport and staging cache).
        job: The shared settings.
        images: What to caption, in order.
        collector: Gets each chunk's captions as it returns.
        done_before: Images already done (kept captions) counted on the bar.
        total: The bar's total (default: ``done_before + len(images)``).
        progress: The node's bar and status text.
        check_interrupt: Raises on Cancel.
        poll_seconds: Sleep between sweeps when nothing happened.

    Raises:
        BaseException: What ``check_interrupt``/``progress``/the collector
            raised (every call in flight is cancelled first), or an error of
            the whole job that any chunk would meet (an invalid setting, the
            app cancelled or deployed over from elsewhere).
    """
    transport: ChunkTransport = dispatcher.transport  # type: ignore[assignment]
    started = time.monotonic()
    limit = gpu_limit()
    if job.workers > limit:  # said before anything is deployed or spawned
        progress(
            ProgressEvent(
                stage=ProgressStage.INSPECT,
                message=f"modal_workers {job.workers} is above this workspace's GPU limit "
                f"({limit}, {GPU_LIMIT_ENV}): using {limit}; more would only queue. Set "
                f"{GPU_LIMIT_ENV} to your plan's limit to use more.",
                indeterminate=True,
            )
        )
    staged = _staged(dispatcher, job, progress, check_interrupt)
    size = chunk_images(job, ModelProfile.from_dict(staged.profile))
    tasks = collections.deque(
        ChunkTask(number, list(images[at : at + size]))
        for number, at in enumerate(range(0, len(images), size))
    )
    report = FanOutReport(
        app_name=transport.app_name,
        gpu=job.gpu,
        workers=job.workers,
        chunk_images=size,
        images=len(images),
        stage_seconds=float(staged.seconds),
        profile=dict(staged.profile),
        gpu_limit=limit,
        reservation=_reservation(),
    )
    report.chunks = len(tasks)
    fan = FanOutLoop(
        job, transport, tasks, report, collector, progress, done_before, total, started, limit
    )
    try:
        for deployment in range(2):
            try:
                fan.feed(staged, check_interrupt, poll_seconds)
                break
            except RestartJob as restart:
                if deployment:
                    raise restart.error from None
                if isinstance(restart.error, DeploymentMismatchError):
                    dispatcher.redeploy_over(restart.error)  # refuses a ping-pong
                else:
                    dispatcher.forget_staged()  # the app is gone: deployed again
                staged = _staged(dispatcher, job, progress, check_interrupt)
    finally:
        report.wall_seconds = time.monotonic() - started
    fan.show()
    return report


def _reservation() -> Reservation:
    return reservation(caption=True)


def _staged(
    dispatcher: Dispatcher,
    job: FanOutJob,
    progress: ProgressCallback,
    check_interrupt: Callable[[], None],
) -> StageResult:
    """Deploy if needed, stage once; the stager's code fingerprint must be this machine's."""
    for attempt in range(2):
        ensure_ready(dispatcher.transport, progress, check_interrupt)
        staged, _ = dispatcher._stage(job.model, progress, check_interrupt)
        expected = dispatcher.transport.expected_fingerprint()
        if not (staged.code_fingerprint and expected and staged.code_fingerprint != expected):
            return staged
        mismatch = DeploymentMismatchError(expected, staged.code_fingerprint)
        if attempt:
            raise mismatch
        dispatcher.redeploy_over(mismatch)
    raise AssertionError("unreachable")  # pragma: no cover
