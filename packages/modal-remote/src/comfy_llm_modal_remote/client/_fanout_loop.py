"""The fan-out's loop: N worker slots fed from one chunk queue, Cancel polled between sweeps.

:func:`~._fanout.caption_fan_out` stages, builds the report and runs
:class:`FanOutLoop` (once more after a redeploy). The loop never blocks on a
call: each chunk's spawn, upload and follow run on the call's own thread
(``_fanout_worker``); the loop hands out chunks, collects what returned
(the collector writes captions at once), retries a failed chunk once on
another key, and on Cancel cancels every call in flight.
"""

from __future__ import annotations

import collections
import dataclasses
import time
import uuid
from collections.abc import Callable, Sequence

from comfy_llm_core import (
    ComfyLLMError,
    ErrorAction,
    ProgressCallback,
    ProgressEvent,
    ProgressStage,
    render_error,
)

from ..errors import (
    DeploymentMismatchError,
    ModalAppMissingError,
    RemoteCallCancelledError,
    RemoteExecutionError,
    RemoteTimeoutError,
    WorkerUnsafeError,
)
from ..wire._chunk_wire import WIRE_VERSION_ERROR, ChunkRequest, ChunkResult
from ..wire._plain import WireDict
from ..wire._wire import StageResult, unwrap
from ._errors import call_outcome, spawn_checked
from ._fanout_job import (
    ChunkCollector,
    ChunkTransport,
    FanOutJob,
)
from ._fanout_report import FanOutReport
from ._fanout_worker import ChunkCall, ChunkTask
from ._transport import RemoteCall

__all__ = ["CANCEL_SETTLE_SECONDS", "FanOutLoop", "RestartJob"]

CANCEL_SETTLE_SECONDS = 0.8
"""After Cancel, how long in all the calls just cancelled may take to report:
an answer that arrives in that time is written, not paid for and lost, and
Cancel still returns within a second. A cancel reaches a running input as
SIGUSR1 at once, except during a model load, which the worker finishes first
(``worker._serve.CancelShield``); that call is left to end on its own."""


@dataclasses.dataclass
class _Slot:
    number: int
    key: str
    call: ChunkCall | None = None
    status: str = "idle"


class RestartJob(Exception):
    """The app runs other code, or is gone: deploy (once), stage again, go on."""

    def __init__(self, error: DeploymentMismatchError | ModalAppMissingError) -> None:
        super().__init__(str(error))
        self.error = error


class FanOutLoop:
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
        self.staged: StageResult | None = None
        self.expected = ""

    # -- the loop -------------------------------------------------------------
    def feed(
        self, staged: StageResult, check_interrupt: Callable[[], None], poll_seconds: float
    ) -> None:
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

    def _request(self, task: ChunkTask) -> WireDict:
        assert task.encoded is not None and self.staged is not None  # fed by feed()
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
            report.bytes_sent += sum(e.wire_bytes for e in task.encoded)
            report.images_sent += len(task.encoded)
        if call.error is not None:
            if isinstance(call.error, ModalAppMissingError):
                self.tasks.appendleft(task)
                raise RestartJob(call.error)
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
            raise RestartJob(error) from None
        except RemoteExecutionError as error:
            if error.remote_class != WIRE_VERSION_ERROR:
                self._failed(slot, task, error)
                return
            self.tasks.appendleft(task)  # another comfy-llm version answered
            raise RestartJob(DeploymentMismatchError(self.expected, "another version")) from None
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
