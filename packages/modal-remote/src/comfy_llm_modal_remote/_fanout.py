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
import dataclasses
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from comfy_llm_core import (
    ComfyLLMError,
    ErrorAction,
    ProgressCallback,
    ProgressEvent,
    ProgressStage,
    ignore_progress,
    render_error,
)

from ._chunk_wire import WIRE_VERSION_ERROR, ChunkRequest, ChunkResult
from ._client_errors import call_outcome, ensure_ready, spawn_checked
from ._dispatch import Dispatcher
from ._fanout_job import (
    DEFAULT_CHUNK_IMAGES,
    DEFAULT_GPU_LIMIT,
    GPU_LIMIT_ENV,
    MAX_WORKERS,
    ChunkCollector,
    ChunkTransport,
    FanOutImage,
    FanOutJob,
    gpu_limit,
)
from ._fanout_report import CAPTION_SCALEDOWN_SECONDS, FanOutReport
from ._fanout_worker import ChunkCall, ChunkTask
from ._transport import RemoteCall
from ._wire import unwrap
from .errors import (
    DeploymentMismatchError,
    ModalAppMissingError,
    RemoteCallCancelledError,
    RemoteExecutionError,
    RemoteTimeoutError,
    WorkerUnsafeError,
)

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

CANCEL_SETTLE_SECONDS = 0.8
"""After Cancel, how long in all the calls just cancelled may take to report:
an answer that arrives in that time is written, not paid for and lost, and
Cancel still returns within a second. A cancel reaches a running input as
SIGUSR1 at once, except during a model load, which the worker finishes first
(``_engine._CancelShield``); that call is left to end on its own."""


@dataclasses.dataclass
class _Slot:
    number: int
    key: str
    call: ChunkCall | None = None
    status: str = "idle"


class _Restart(Exception):
    """The app runs other code, or is gone: deploy (once), stage again, go on."""

    def __init__(self, error: DeploymentMismatchError | ModalAppMissingError) -> None:
        super().__init__(str(error))
        self.error = error


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
    tasks = collections.deque(
        ChunkTask(number, list(images[at : at + job.chunk_images]))
        for number, at in enumerate(range(0, len(images), job.chunk_images))
    )
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
    report = FanOutReport(
        app_name=transport.app_name,
        gpu=job.gpu,
        workers=job.workers,
        chunk_images=job.chunk_images,
        images=len(images),
        stage_seconds=float(staged.seconds),
        profile=dict(staged.profile),
        gpu_limit=limit,
        reservation=_reservation(),
    )
    report.chunks = len(tasks)
    fan = _FanOut(
        job, transport, tasks, report, collector, progress, done_before, total, started, limit
    )
    try:
        for deployment in range(2):
            try:
                fan.feed(staged, check_interrupt, poll_seconds)
                break
            except _Restart as restart:
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


def _reservation() -> dict[str, Any]:
    from ._dispatch import reservation

    return reservation(caption=True)


def _staged(
    dispatcher: Dispatcher,
    job: FanOutJob,
    progress: ProgressCallback,
    check_interrupt: Callable[[], None],
) -> Any:
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


class _FanOut:
    """The loop's state: chunks to hand out, N worker slots, the bar and the record."""

    def __init__(  # noqa: PLR0917
        self,
        job: FanOutJob,
        transport: ChunkTransport,
        tasks: collections.deque[ChunkTask],
        report: FanOutReport,
        collector: ChunkCollector,
        progress: ProgressCallback,
        done_before: int,
        total: int | None,
        started: float,
        limit: int,
    ) -> None:
        self.job, self.transport, self.tasks, self.report = job, transport, tasks, report
        self.collector, self.progress, self.started = collector, progress, started
        self.done = done_before
        self.bar_total = total if total is not None else done_before + report.images
        prefix = f"caption-{job.gpu.lower().rstrip('!')}"  # "H100!" pins the type, same pool name
        self.slots = [_Slot(i, f"{prefix}-{i}") for i in range(min(job.workers, limit, len(tasks)))]
        report.workers_used = len(self.slots)
        self.staged: Any = None
        self.expected = ""

    # -- the loop -------------------------------------------------------------
    def feed(self, staged: Any, check_interrupt: Callable[[], None], poll_seconds: float) -> None:
        """Hand out chunks and collect answers until none is left (see the module docstring)."""
        self.staged, self.expected = staged, self.transport.expected_fingerprint()
        try:
            while self.tasks or any(slot.call is not None for slot in self.slots):
                check_interrupt()
                changed = self._start_idle()
                for slot in self.slots:
                    call = slot.call
                    if call is None:
                        continue
                    if call.status != slot.status:
                        slot.status, changed = call.status, True
                    if call.done:
                        slot.call = None
                        self._finish(slot, call)
                        changed = True
                if changed:
                    self.show()
                else:
                    time.sleep(poll_seconds)
        except BaseException:
            self._stop()
            raise

    def _start_idle(self) -> bool:
        started = False
        for slot in self.slots:
            if slot.call is not None or not self.tasks:
                continue
            task = next((t for t in self.tasks if t.avoid != slot.key), None)
            if task is None:
                continue
            self.tasks.remove(task)
            slot.call = ChunkCall(slot.key, task, self._spawner(slot.key))
            started = True
        return started

    def _spawner(self, key: str) -> Callable[[ChunkTask], RemoteCall]:
        def spawn(task: ChunkTask) -> RemoteCall:
            request = self._request(task)
            return spawn_checked(  # type: ignore[no-any-return]
                self.transport,
                lambda: self.transport.start_chunk(request, gpu=self.job.gpu, affinity_key=key),
            )

        return spawn

    def _request(self, task: ChunkTask) -> dict[str, Any]:
        assert task.encoded is not None
        job, staged = self.job, self.staged
        return ChunkRequest(
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
            code_fingerprint=self.expected,
        ).to_wire()

    # -- one finished call ------------------------------------------------------
    def _fail_images(self, indices: Sequence[int], message: str) -> None:
        self.collector.failed(indices, message)
        self.report.failed_images += len(indices)
        self.done += len(indices)

    def _finish(self, slot: _Slot, call: ChunkCall) -> None:
        task, report = call.task, self.report
        for index, message in call.unreadable:
            self._fail_images([index], message)
        if call.encoded_here and task.encoded:
            report.bytes_sent += sum(len(e.data) for e in task.encoded)
            report.images_sent += len(task.encoded)
        if call.error is not None:
            if isinstance(call.error, ModalAppMissingError):
                self.tasks.appendleft(task)
                raise _Restart(call.error)
            raise call.error  # the spawn failed (token, network): the job cannot go on
        if call.call is None:
            return  # every image of the chunk was unreadable
        span = _span(call)
        report.call_seconds += span
        try:
            outcome = call_outcome(call.call, f"chunk {task.chunk_id}")
            result = ChunkResult.from_wire(unwrap(outcome))
        except DeploymentMismatchError as error:
            self.tasks.appendleft(task)
            raise _Restart(error) from None
        except RemoteExecutionError as error:
            if error.remote_class != WIRE_VERSION_ERROR:
                self._failed(slot, task, error)
                return
            self.tasks.appendleft(task)  # another comfy-llm version answered
            raise _Restart(DeploymentMismatchError(self.expected, "another version")) from None
        except RemoteTimeoutError as error:  # as long again on another key: not retried
            task.attempt = 1
            self._failed(slot, task, error)
            return
        except Exception as error:
            if isinstance(error, ComfyLLMError) and error.action is ErrorAction.FIX_INPUT:
                raise  # every chunk would meet it: stop the job, say why
            if isinstance(error, RemoteCallCancelledError):
                raise  # cancelled outside ComfyUI: not a chunk to retry
            self._failed(slot, task, error)
            return
        self._collected(slot, task, result, span)

    def _failed(self, slot: _Slot, task: ChunkTask, error: Exception) -> None:
        """A chunk's call failed: once more on another container, or named as failed."""
        message = f"{type(error).__name__}: {render_error(error)}"
        slot.status = f"chunk {task.chunk_id} failed ({type(error).__name__})"
        failed_key = slot.key
        slot.key = f"{failed_key.split('~')[0]}~{uuid.uuid4().hex[:8]}"  # never reuse it
        if task.attempt >= 1:
            self.report.failed_chunks.append(
                {"chunk": task.chunk_id, "images": [i.name for i in task.images], "error": message}
            )
            self._fail_images([image.index for image in task.images], message)
            return
        if isinstance(error, WorkerUnsafeError):
            task.promotion = dict(error.promotion_state)
        task.attempt, task.avoid = 1, failed_key
        self.tasks.appendleft(task)
        self.report.chunks_retried += 1

    def _collected(self, slot: _Slot, task: ChunkTask, result: ChunkResult, span: float) -> None:
        report = self.report
        report.worker_seconds += result.worker_seconds
        report.gpu_seconds += result.worker_seconds
        report.chunk_overhead_seconds.append(max(0.0, span - result.worker_seconds))
        worker = report.per_worker.setdefault(slot.key, {"chunks": 0, "images": 0, "seconds": 0.0})
        worker["seconds"] = round(worker["seconds"] + result.worker_seconds, 3)
        worker["chunks"] += 1
        worker["images"] += len(result.captions)
        slot.status = f"chunk {task.chunk_id} done ({len(result.captions)} images)"
        self.collector.captions(result)
        bad = sum(1 for caption in result.captions if caption.error)
        report.captioned += len(result.captions) - bad
        report.failed_images += bad
        self.done += len(result.captions)

    # -- Cancel (or any error): stop everything, keep what answered ---------------
    def _stop(self) -> None:
        """Cancel every call in flight; write each chunk that answered within the settle time.

        The calls get :data:`CANCEL_SETTLE_SECONDS` in all (their GPU work is
        paid for). A chunk can finish between the loop's last look and its cancel, and over
        the network an answer produced before the cancel is still on its way
        (Modal documents ``cancel`` as stopping a *running* call, so a finished
        one keeps its output); a call Modal ended cancelled is neither written
        nor retried, and its chunk goes back to the queue (a redeploy runs it
        again; after Cancel, the rerun captions what is missing).
        """
        in_flight = [slot for slot in self.slots if slot.call is not None]
        for slot in in_flight:
            assert slot.call is not None
            slot.call.cancel()  # never blocks: the round trip runs on its own thread
        deadline = time.monotonic() + CANCEL_SETTLE_SECONDS
        for slot in in_flight:
            assert slot.call is not None
            if slot.call.spawned_at is not None:  # one still uploading has no answer coming
                slot.call.wait(max(0.0, deadline - time.monotonic()))
        for slot in in_flight:
            call, slot.call = slot.call, None
            assert call is not None
            result = _answered(call)
            if result is None:
                self.tasks.appendleft(call.task)
                continue
            try:
                self._collected(slot, call.task, result, _span(call))
            except BaseException:  # the collector failed: the original error wins
                continue

    def show(self) -> None:
        """The bar: images done out of the total, with each worker's state."""
        states = " | ".join(f"w{s.number + 1}: {s.status}" for s in self.slots)
        self.progress(
            ProgressEvent(
                stage=ProgressStage.GENERATE,
                message=f"Captioned {self.done}/{self.bar_total} images on {len(self.slots)} "
                f"{self.job.gpu} — {states}",
                value=float(self.done),
                maximum=float(self.bar_total),
                unit="images",
                elapsed_seconds=time.monotonic() - self.started,
            )
        )


def _span(call: ChunkCall) -> float:
    if call.spawned_at is None or call.finished_at is None:
        return 0.0
    return max(0.0, call.finished_at - call.spawned_at)


def _answered(call: ChunkCall) -> ChunkResult | None:
    """The chunk's result when its call ended with one (no waiting: it is done or left)."""
    if not call.done or call.call is None or call.error is not None:
        return None
    try:
        return ChunkResult.from_wire(unwrap(call.call.outcome()))
    except BaseException:  # cancelled (RemoteError('') on Modal), failed, lost: not written
        return None
