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

import queue
import time
from collections.abc import Callable
from typing import Any, Final, TypeVar

__all__ = ["POLL_SECONDS", "EngineGone", "dead_reason", "hand_over", "take_drain"]

T = TypeVar("T")
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
