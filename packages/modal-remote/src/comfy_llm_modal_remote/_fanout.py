"""Caption a dataset on N Modal GPUs: chunk, send, collect — Modal does the rest.

    transport ready, model staged once by the ModelStager   (no GPU yet)
    images cut into chunks of ``chunk_images``
    N workers = N affinity keys ``caption-<gpu>-<i>``: each key is its own
      warm container pool of ``RemoteEngine`` (a parametrized Modal class:
      "each unique combination of arguments will behave like an individual
      Modal Function with its own auto-scaling", modal.com/docs/guide/
      parametrized-functions), so N keys are N GPU containers, each serving
      one chunk at a time
      through ``run_batch`` on its resident engine
    each worker's call is a ``spawn`` of ``RemoteEngine.caption_chunk``
      (a FunctionCall each: Cancel cancels every one of them)
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

Cost on the record: wall time, GPU-seconds (the sum of every call's span
from spawn to answer: what the containers were held for, cold starts and
transfers included; the idle :data:`CAPTION_SCALEDOWN_SECONDS` after the last
chunk, at most, is reported apart), images per GPU-second, chunks retried,
the app and the GPU.
"""

from __future__ import annotations

import collections
import dataclasses
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from comfy_llm_core import ComfyLLMError, ErrorAction, InvalidSettingError, defaults, render_error
from comfy_llm_profiles import ProgressCallback, ProgressEvent, ProgressStage, ignore_progress
from comfy_llm_residency import GenerationSettings

from ._chunk_wire import ChunkImage, ChunkRequest, ChunkResult
from ._dispatch import Dispatcher
from ._fanout_report import CAPTION_SCALEDOWN_SECONDS, FanOutReport
from ._transport import RemoteCall
from ._wire import unwrap
from .errors import WorkerUnsafeError

__all__ = [
    "CAPTION_SCALEDOWN_SECONDS",
    "DEFAULT_CHUNK_IMAGES",
    "MAX_WORKERS",
    "ChunkCollector",
    "ChunkTransport",
    "FanOutImage",
    "FanOutJob",
    "FanOutReport",
    "caption_fan_out",
]

DEFAULT_CHUNK_IMAGES = 96
"""Images per chunk: at 128 output tokens, a 3-8B VLM on one H100 under vLLM
captions a chunk this size in roughly 10-40 s, so the per-chunk round trip
(spawn, upload ~20 MB, answer) stays a few percent of the chunk."""
MAX_WORKERS = defaults.MAX_MODAL_WORKERS
_STATUS_SECONDS = 0.5
CANCEL_SETTLE_SECONDS = 5.0
"""After Cancel, how long in all the calls just cancelled may take to report:
an answer that arrives in that time is written, not paid for and lost. A cancel
reaches a running input as SIGUSR1 at once, except during a model load, which
the worker finishes first (``_engine._CancelShield``); that call is left."""
_SETTLE_POLL_SECONDS = 0.01


class ChunkTransport(Protocol):
    """What the fan-out needs from a transport: one chunk call on one worker key."""

    app_name: str

    def ensure_ready(
        self, progress: ProgressCallback, check_interrupt: Callable[[], None] = lambda: None
    ) -> None:
        """Deploy on first use (Cancel stops the wait)."""
        ...

    def start_chunk(self, request: dict[str, Any], *, gpu: str, affinity_key: str) -> RemoteCall:
        """Spawn ``RemoteEngine(affinity=affinity_key).with_options(gpu=gpu).caption_chunk``."""
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
        chunk_images: Images per chunk (one call).
        batch_size: Images per ``run_batch`` call inside a worker (vLLM takes
            the whole chunk at once).
        reserve_gb: VRAM to keep free on each worker.
    """

    model: str
    prompt: str
    system_prompt: str | None
    settings: GenerationSettings
    gpu: str
    workers: int = 1
    chunk_images: int = DEFAULT_CHUNK_IMAGES
    batch_size: int = 8
    reserve_gb: float | None = None

    def __post_init__(self) -> None:
        """Check the sizes, naming the setting and the range."""
        for name, value, limit in (
            ("modal_workers", self.workers, MAX_WORKERS),
            ("chunk_images", self.chunk_images, 4096),
            ("batch_size", self.batch_size, 4096),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
                raise InvalidSettingError(name, value, f"a whole number from 1 to {limit}")


@dataclasses.dataclass
class _Task:
    chunk_id: int
    images: list[FanOutImage]
    attempt: int = 0
    avoid: str | None = None
    encoded: tuple[ChunkImage, ...] | None = None
    promotion: dict[str, Any] | None = None


@dataclasses.dataclass
class _Slot:
    number: int
    key: str
    call: RemoteCall | None = None
    task: _Task | None = None
    started: float = 0.0
    status: str = "idle"
    polled: float = 0.0


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
            the whole job that any chunk would meet (an invalid setting).
    """
    transport: ChunkTransport = dispatcher.transport  # type: ignore[assignment]
    started = time.monotonic()
    transport.ensure_ready(progress, check_interrupt)
    staged, _ = dispatcher._stage(job.model, progress, check_interrupt)
    report = FanOutReport(
        app_name=transport.app_name,
        gpu=job.gpu,
        workers=job.workers,
        chunk_images=job.chunk_images,
        images=len(images),
        stage_seconds=float(staged.seconds),
        profile=dict(staged.profile),
    )
    tasks = collections.deque(
        _Task(number, list(images[at : at + job.chunk_images]))
        for number, at in enumerate(range(0, len(images), job.chunk_images))
    )
    report.chunks = len(tasks)
    prefix = f"caption-{job.gpu.lower().rstrip('!')}"  # "H100!" pins the type, same pool name
    slots = [_Slot(i, f"{prefix}-{i}") for i in range(min(job.workers, len(tasks)))]
    bar_total = total if total is not None else done_before + len(images)
    done = done_before

    def show() -> None:
        states = " | ".join(f"w{s.number + 1}: {s.status}" for s in slots)
        progress(
            ProgressEvent(
                stage=ProgressStage.GENERATE,
                message=f"Captioned {done}/{bar_total} images on {len(slots)} {job.gpu} — {states}",
                value=float(done),
                maximum=float(bar_total),
                unit="images",
                elapsed_seconds=time.monotonic() - started,
            )
        )

    def fail_images(indices: Sequence[int], message: str) -> None:
        nonlocal done
        collector.failed(indices, message)
        report.failed_images += len(indices)
        done += len(indices)

    try:
        while tasks or any(slot.call is not None for slot in slots):
            check_interrupt()
            changed = False
            for slot in slots:
                if slot.call is None and tasks:
                    changed |= _start(slot, tasks, job, staged, transport, report, fail_images)
            for slot in slots:
                if slot.call is None or slot.task is None:
                    continue
                now = time.monotonic()
                finished = slot.call.done()
                if finished or now - slot.polled >= _STATUS_SECONDS:
                    slot.polled = now
                    for item in slot.call.events(0.0):
                        message = item.get("message")
                        if isinstance(message, str) and message:
                            slot.status = message
                            changed = True
                if not finished:
                    continue
                changed = True
                outcome = _collect(slot, tasks, report, now)
                if isinstance(outcome, ChunkResult):
                    collector.captions(outcome)
                    bad = sum(1 for caption in outcome.captions if caption.error)
                    report.captioned += len(outcome.captions) - bad
                    report.failed_images += bad
                    done += len(outcome.captions)
                elif outcome is not None:
                    task, message = outcome
                    report.failed_chunks.append(
                        {
                            "chunk": task.chunk_id,
                            "images": [i.name for i in task.images],
                            "error": message,
                        }
                    )
                    fail_images([image.index for image in task.images], message)
            if changed:
                show()
            else:
                time.sleep(poll_seconds)
    except BaseException:
        in_flight = [slot for slot in slots if slot.call is not None]
        for slot in in_flight:
            if slot.call is not None and not slot.call.done():
                slot.call.cancel()
        _harvest(in_flight, tasks, report, collector)
        raise
    finally:
        report.wall_seconds = time.monotonic() - started
    show()
    return report


def _start(  # noqa: PLR0917
    slot: _Slot,
    tasks: collections.deque[_Task],
    job: FanOutJob,
    staged: Any,
    transport: ChunkTransport,
    report: FanOutReport,
    fail_images: Callable[[Sequence[int], str], None],
) -> bool:
    """Give ``slot`` the first chunk it may run (a retry never goes back to its key)."""
    task = next((t for t in tasks if t.avoid != slot.key), None)
    if task is None:
        return False
    tasks.remove(task)
    if task.encoded is None:
        encoded: list[ChunkImage] = []
        for image in task.images:
            try:
                encoded.append(image.encode())
            except (OSError, ValueError) as error:  # InputError is a ValueError
                fail_images([image.index], render_error(error))
        task.images = [i for i in task.images if any(e.index == i.index for e in encoded)]
        task.encoded = tuple(encoded)
        report.bytes_sent += sum(len(e.data) for e in encoded)
        report.images_sent += len(encoded)
    if not task.encoded:
        return True
    request = ChunkRequest(
        request_id=uuid.uuid4().hex,
        chunk_id=task.chunk_id,
        attempt=task.attempt,
        profile=staged.profile,
        snapshot=staged.snapshot,
        prompt=job.prompt,
        system_prompt=job.system_prompt,
        settings=job.settings.to_dict(),
        images=task.encoded,
        batch_size=job.batch_size,
        reserve_gb=job.reserve_gb,
        promotion_state=task.promotion,
    )
    slot.task = task
    slot.started = time.monotonic()
    slot.status = f"chunk {task.chunk_id}: sent {len(task.encoded)} images"
    slot.call = transport.start_chunk(request.to_wire(), gpu=job.gpu, affinity_key=slot.key)
    return True


def _collect(
    slot: _Slot, tasks: collections.deque[_Task], report: FanOutReport, now: float
) -> ChunkResult | tuple[_Task, str] | None:
    """A finished call: its result, a retry queued (None), or the chunk that failed twice."""
    call, task = slot.call, slot.task
    assert call is not None and task is not None
    slot.call, slot.task = None, None
    span = now - slot.started
    report.gpu_seconds += span
    worker = report.per_worker.setdefault(slot.key, {"chunks": 0, "images": 0, "seconds": 0.0})
    worker["seconds"] = round(worker["seconds"] + span, 3)
    try:
        result = ChunkResult.from_wire(unwrap(call.outcome()))
    except Exception as error:
        if isinstance(error, ComfyLLMError) and error.action is ErrorAction.FIX_INPUT:
            raise  # every chunk would meet it: stop the job, say why
        message = f"{type(error).__name__}: {render_error(error)}"
        slot.status = f"chunk {task.chunk_id} failed ({type(error).__name__})"
        failed_key = slot.key
        slot.key = f"{failed_key.split('~')[0]}~{uuid.uuid4().hex[:8]}"  # never reuse it
        if task.attempt >= 1:
            return task, message
        if isinstance(error, WorkerUnsafeError):
            task.promotion = dict(error.promotion_state)
        task.attempt, task.avoid = 1, failed_key
        tasks.appendleft(task)
        report.chunks_retried += 1
        return None
    report.worker_seconds += result.worker_seconds
    report.chunk_overhead_seconds.append(max(0.0, span - result.worker_seconds))
    worker["chunks"] += 1
    worker["images"] += len(result.captions)
    slot.status = f"chunk {task.chunk_id} done ({len(result.captions)} images)"
    return result


def _harvest(
    slots: Sequence[_Slot],
    tasks: collections.deque[_Task],
    report: FanOutReport,
    collector: ChunkCollector,
) -> None:
    """On Cancel: write every chunk whose answer is available (its GPU work is paid for).

    Every call in flight was just cancelled (or had returned). A chunk can
    finish between the loop's last ``done()`` and its ``cancel()``, and over
    the network an output produced before the cancel is still on its way
    (``ModalTransport``'s call is done only once its ``FunctionCall.get``
    returned; Modal documents ``cancel`` as stopping a *running* call, so a
    finished one keeps its output — the stand-ins do the same, the real
    service has not been observed doing it): the calls get up to
    :data:`CANCEL_SETTLE_SECONDS` in all to report, and whichever answered is
    written; a cancelled one raised and is dropped (its images stay missing,
    for the rerun).
    """
    deadline = time.monotonic() + CANCEL_SETTLE_SECONDS
    for slot in slots:
        while slot.call is not None and not slot.call.done() and time.monotonic() < deadline:
            time.sleep(_SETTLE_POLL_SECONDS)
        if slot.call is None or not slot.call.done():
            continue  # still running past the wait: its cancel is on its way
        try:
            outcome = _collect(slot, tasks, report, time.monotonic())
            if isinstance(outcome, ChunkResult):
                collector.captions(outcome)
        except BaseException:
            continue
