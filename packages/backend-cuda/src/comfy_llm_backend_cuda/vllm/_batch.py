"""vLLM batches: every item goes to the resident ``AsyncLLM`` at once (continuous batching).

Order of one batch: each item's images are downscaled to the caption cap
(``caption_image_pixels``: a batch is captions), it is rendered and gets its
own ``SamplingParams`` (its seed included) from the backend's helpers -> one
pump coroutine per item on the backend's loop thread, all feeding one queue
-> the caller's thread takes the steps in the order the engine produced them
and hands each step to ``sink.step(index, token ids, that item's text)`` -> an
exception there (Cancel), or an engine error for one item, cancels every
submission (requests still queued for vLLM's preprocessing thread never
start) and aborts every registered request, waits for their streams to end,
then propagates; the engine then serves the next request.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import queue
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from comfy_llm_reasoning import prompt_opens_reasoning
from comfy_llm_residency.backend import BackendResult, BackendTimings, BatchItem, BatchTokenSink

from .._stream import IncrementalDecoder, NativeStreamDecoder, stream_decoder
from ..errors import BackendUnloadedError, EngineDiedError
from ._drain import EngineGone, dead_reason, hand_over, stop_streams, take_drain
from ._reasoning import native_reasoning
from ._requests import (
    CAPTION_STREAM_INTERVAL,
    EnginePrompt,
    engine_prompt,
    next_request_id,
    raise_translated,
    sampling_params,
)

if TYPE_CHECKING:
    from comfy_llm_inputs import PreparedInputs
    from comfy_llm_profiles import ModelProfile
    from comfy_llm_residency.backend import GenerationSettings

    from ._engine import LoopThread
    from ._stats import EngineLoad


class BatchEngine(Protocol):
    """What a batch uses of the vLLM backend (which imports this module, not the reverse)."""

    profile: ModelProfile
    _engine: Any
    _loop: LoopThread | None
    _tokenizer: Any
    dead_reason: str | None
    last_batch_abort: tuple[tuple[str, str | None], ...]
    load_stats: EngineLoad

    def image_pixels(self, *, caption: bool) -> int: ...

    def _render(
        self, inputs: PreparedInputs, settings: GenerationSettings, *, max_pixels: int
    ) -> tuple[str, list[Any]]: ...

    def _decode(self, ids: Any) -> str: ...

    def _died(self, reason: str) -> EngineDiedError: ...


__all__ = ["BatchEngine", "generate_batch"]

logger = logging.getLogger(__name__)

_WAIT_SECONDS = 60.0


@dataclasses.dataclass(slots=True)
class _Stream:
    """One item's request and what its stream produced so far."""

    request_id: str
    rendered: str
    request: EnginePrompt
    decoder: IncrementalDecoder | NativeStreamDecoder
    times: list[float] = dataclasses.field(default_factory=list)
    finish: str | None = None
    prompt_tokens: int | None = None


def generate_batch(
    backend: BatchEngine, items: Sequence[BatchItem], sink: BatchTokenSink
) -> list[BackendResult]:
    """Generate every item together; see the module docstring.

    Raises:
        BackendUnloadedError: The backend was unloaded.
        PromptTooLongError: vLLM refused one item's prompt as longer than the context.
        Exception: Whatever ``sink`` raised, after every request was aborted.
    """
    engine, loop = backend._engine, backend._loop
    if engine is None or loop is None:
        raise BackendUnloadedError(backend.profile.profile_id)
    if backend.dead_reason is not None:
        raise EngineDiedError(backend.profile.profile_id, backend.dead_reason)
    started = time.perf_counter()
    backend.load_stats.reset()
    streams = _streams(backend, items)
    steps: queue.SimpleQueue[tuple[int, str, Any]] = queue.SimpleQueue()
    tasks: list[asyncio.Task[Any]] = []

    async def pump(index: int, stream: _Stream, params: Any) -> None:
        task = asyncio.current_task()
        if task is not None:
            tasks.append(task)
        try:
            request = stream.request
            outputs = engine.generate(
                request.prompt,
                params,
                stream.request_id,
                tokenization_kwargs=request.tokenization,
            )
            async for output in outputs:
                steps.put((index, "step", output))
        except BaseException as error:
            steps.put((index, "error", error))
            raise
        steps.put((index, "end", None))

    running = [
        loop.submit(
            pump(
                index,
                stream,
                sampling_params(item.settings, stream_interval=CAPTION_STREAM_INTERVAL),
            )
        )
        for index, (stream, item) in enumerate(zip(streams, items, strict=True))
    ]
    failure: BaseException | None = None
    remaining = len(streams)
    try:
        while remaining and failure is None:
            drained: dict[int, list[int]] = {}
            for index, kind, output in take_drain(steps, engine=engine, wait=sink.wait):
                if kind == "end":
                    remaining -= 1
                elif kind == "error":
                    failure = output
                else:
                    drained.setdefault(index, []).extend(_take(streams[index], output))
            for index, ids in drained.items():
                hand_over(
                    ids,
                    streams[index].decoder,
                    streams[index].times,
                    functools.partial(sink.step, index),
                )
    except EngineGone as gone:
        raise backend._died(gone.reason) from None
    except BaseException:
        _abort_all(backend, streams, running, tasks, steps)
        raise
    if failure is not None:
        reason = dead_reason(engine, failure)
        if reason is not None:
            raise backend._died(reason) from failure
        _abort_all(backend, streams, running, tasks, steps)
        raise_translated(failure)
    for future in running:
        future.result(_WAIT_SECONDS)
    return [
        _result(backend, stream, item, started, len(streams))
        for stream, item in zip(streams, items, strict=True)
    ]


def _streams(backend: BatchEngine, items: Sequence[BatchItem]) -> list[_Stream]:
    """Each item rendered (images at the caption cap) under one request number."""
    number = next_request_id()
    cap = backend.image_pixels(caption=True)
    streams: list[_Stream] = []
    for index, item in enumerate(items):
        rendered, images = backend._render(item.inputs, item.settings, max_pixels=cap)
        request = engine_prompt(rendered, images, backend._tokenizer)
        decoder = stream_decoder(backend._tokenizer, backend._decode)
        streams.append(_Stream(f"{number}-{index}", rendered, request, decoder))
    return streams


def _take(stream: _Stream, output: Any) -> list[int]:
    """One output's new ids (and its prompt length and finish reason, once known)."""
    if output.prompt_token_ids is not None:
        stream.prompt_tokens = len(output.prompt_token_ids)
    completion = output.outputs[0]
    if completion.finish_reason is not None:
        stream.finish = str(completion.finish_reason)
    return [int(token_id) for token_id in completion.token_ids]


def _abort_all(
    backend: BatchEngine,
    streams: list[_Stream],
    running: list[Any],
    tasks: list[asyncio.Task[Any]],
    steps: queue.SimpleQueue[tuple[int, str, Any]],
) -> None:
    """Cancel and abort every request of the batch, wait until their streams end.

    ``last_batch_abort`` notes how each ended: vLLM's finish reason where its
    stream reported one (a request that finished first keeps ``stop`` or
    ``length``), else ``abort`` (cut short, queued ones included).
    """
    assert backend._loop is not None
    ids = [stream.request_id for stream in streams]
    try:
        stop_streams(
            backend._loop,
            backend._engine,
            ids,
            futures=running,
            tasks=tasks,
            timeout=_WAIT_SECONDS,
        )
    except Exception:  # the caller's exception matters more than a failed abort
        logger.warning("Aborting vLLM batch %s failed", ids, exc_info=True)
    finishes = {stream.request_id: stream.finish for stream in streams}
    while not steps.empty():
        index, kind, output = steps.get_nowait()
        if kind == "step" and output.outputs and output.outputs[0].finish_reason is not None:
            finishes[streams[index].request_id] = str(output.outputs[0].finish_reason)
    backend.last_batch_abort = tuple((rid, finish or "abort") for rid, finish in finishes.items())


def _result(
    backend: BatchEngine, stream: _Stream, item: BatchItem, started: float, size: int
) -> BackendResult:
    settings = item.settings
    ids = tuple(stream.decoder.ids)
    text = backend._decode(ids)
    reasoning = None
    if settings.enable_reasoning and backend.profile.reasoning_parser == "qwen3":
        reasoning, text = native_reasoning(backend._tokenizer, text)
    times = stream.times
    return BackendResult(
        token_ids=ids,
        text=text,
        native_reasoning=reasoning,
        timings=BackendTimings(
            generation_seconds=(times[-1] if times else time.perf_counter()) - started,
            prompt_tokens=stream.prompt_tokens,
        ),
        prompt_opened_reasoning=prompt_opens_reasoning(stream.rendered),
        finish_reason=stream.finish or "stop",
        constrained=settings.schema is not None,
        batch_size=size,
    )
