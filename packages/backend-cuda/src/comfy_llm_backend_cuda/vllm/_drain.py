"""The caller's side of a vLLM stream: wait with short polls, then take everything at once.

The engine runs ahead in its own process; the loop thread's pump puts each
``RequestOutput`` on a queue. The caller blocks for the first item in polls
of :data:`POLL_SECONDS`; between polls it checks that the engine is still
alive (``AsyncLLM.errored``, v1/engine/async_llm.py:1308) and calls the
relay's ``wait()`` (the host's Cancel check), so a long prefill or a hung
engine can be cancelled. Once an item is there it takes every item queued
since its last wake-up (one drain), which the caller hands on as one step.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

__all__ = [
    "POLL_SECONDS",
    "EngineGone",
    "dead_reason",
    "end_request",
    "hand_over",
    "stop_streams",
    "take_drain",
]

T = TypeVar("T")
logger = logging.getLogger(__name__)
#: Longest the caller blocks without checking Cancel and the engine's health.
POLL_SECONDS: Final = 0.1


class EngineGone(Exception):
    """The engine core died while the caller waited (internal: becomes EngineDiedError)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def dead_reason(engine: Any, error: BaseException | None = None) -> str | None:
    """Why the engine is dead, or None while it lives.

    Args:
        engine: The ``AsyncLLM``.
        error: An error a request ended with (vLLM's ``EngineDeadError`` says so).
    """
    if error is not None:
        from vllm.v1.engine.exceptions import EngineDeadError

        if isinstance(error, EngineDeadError):
            cause = error.__cause__ or error.__context__
            return f"{type(error).__name__}" + (f" ({cause!r})" if cause is not None else "")
    if bool(getattr(engine, "errored", False)):
        return "the engine core process exited (AsyncLLM.errored)"
    return None


def take_drain(
    steps: queue.SimpleQueue[T],
    *,
    engine: Any,
    wait: Callable[[], None] | None,
) -> list[T]:
    """Every item queued since the last call, blocking (in polls) until there is one.

    Raises:
        EngineGone: The engine died while nothing came.
        BaseException: Whatever ``wait`` raised (Cancel).
    """
    while True:
        try:
            first = steps.get(timeout=POLL_SECONDS)
            break
        except queue.Empty:
            reason = dead_reason(engine)
            if reason is not None:
                raise EngineGone(reason) from None
            if wait is not None:
                wait()
    drained = [first]
    while True:
        try:
            drained.append(steps.get_nowait())
        except queue.Empty:
            return drained


def hand_over(
    ids: list[int],
    decoder: Any,
    times: list[float],
    step: Callable[[list[int], str], None],
) -> None:
    """Hand one drain's ids to the token sink as one step, with the text after the last.

    Args:
        ids: The drain's token ids, in order.
        decoder: The request's incremental decoder (``push(id) -> text so far``).
        times: The request's token times (one entry per id is appended).
        step: The sink's ``step(ids, text)``.
    """
    text = ""
    for token_id in ids:
        text = decoder.push(token_id)
    now = time.perf_counter()
    times.extend(now for _ in ids)
    step(ids, text)


def stop_streams(
    loop: Any,
    engine: Any,
    request_ids: Sequence[str],
    *,
    futures: Sequence[concurrent.futures.Future[Any]],
    tasks: Sequence[asyncio.Task[Any]],
    timeout: float,
) -> None:
    """End every stream of a request or batch, queued ones included, and wait until they have.

    ``AsyncLLM.generate`` preprocesses a raw prompt (one thread for every
    multimodal request, vllm/renderers/base.py 146-166) before it registers
    the request (v1/engine/async_llm.py 491, 572), so ``abort(request_id)``
    finds nothing to abort for a request still queued there
    (v1/engine/output_processor.py 580-582). Cancelling the submission
    futures cancels each pump's ``generate``: a queued preprocessing job never
    runs, and a registered request is aborted by its internal id
    (async_llm.py 779-784). The registered ids are aborted as well.

    Args:
        loop: The backend's :class:`LoopThread`.
        engine: The ``AsyncLLM``.
        request_ids: The requests' external ids.
        futures: ``run_coroutine_threadsafe`` futures of the pumps.
        tasks: The pumps' own tasks (each pump records ``asyncio.current_task()``).
        timeout: Longest wait for the streams to end.
    """
    for future in futures:
        future.cancel()

    async def settle() -> None:
        await engine.abort(list(request_ids))
        pending = [task for task in tasks if not task.done()]
        if pending:
            await asyncio.wait(pending, timeout=timeout)

    loop.call(settle(), timeout)


def end_request(
    loop: Any,
    engine: Any,
    request_id: str,
    *,
    running: concurrent.futures.Future[Any],
    tasks: Sequence[asyncio.Task[Any]],
    steps: queue.SimpleQueue[tuple[str, Any]],
    timeout: float,
) -> tuple[str, str]:
    """Stop one request (:func:`stop_streams`) and say how it ended.

    Returns:
        ``(request id, finish)``: vLLM's finish reason where its stream
        reported one (a request that had just finished keeps ``stop`` or
        ``length``), else ``abort``.
    """
    finish: str | None = None
    try:
        stop_streams(loop, engine, [request_id], futures=[running], tasks=tasks, timeout=timeout)
    except Exception:  # the caller's exception matters more than a failed abort
        logger.warning("Aborting vLLM request %s failed", request_id, exc_info=True)
    while not steps.empty():
        kind, item = steps.get_nowait()
        if kind == "step" and item.outputs and item.outputs[0].finish_reason is not None:
            finish = str(item.outputs[0].finish_reason)
    return request_id, finish or "abort"
