"""Out of CUDA memory while generating: a batch runs in halves, else one clear error.

The GPU check on an H200 (December 2026) saw a caption batch of 32 images of
1024² beside another process raise torch's raw ``OutOfMemoryError``. CUDA
cannot run here, so the model's own forward is wrapped with CUDA's rule: the
caching allocator raises ``torch.OutOfMemoryError`` from inside the forward
whose tensors do not fit (``CUDACachingAllocator.cpp``), here the prefill of
more than ``rows`` prompts, or a decode step. Everything else is the real
Transformers backend on a tiny checkpoint.
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
import torch
from comfy_llm_backend_cuda.errors import GenerationOutOfMemoryError
from comfy_llm_inputs import ImagePart, PreparedInputs
from comfy_llm_residency.backend import BatchItem, GenerationSettings
from comfy_llm_testworld.sinks import RecordingBatchSink, RecordingSink
from PIL import Image

pytestmark = pytest.mark.slow

GREEDY = GenerationSettings(max_new_tokens=6, temperature=0.0, enable_reasoning=False)
ALLOCATOR_MESSAGE = (
    "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
    "139.80 GiB of which 1.43 GiB is free."
)


def _items(count: int) -> list[BatchItem]:
    pixels = np.random.default_rng(3).integers(0, 255, (count, 32, 32, 3), np.uint8)
    return [
        BatchItem(PreparedInputs.text("Caption it.", ImagePart(Image.fromarray(p))), GREEDY)
        for p in pixels
    ]


@contextmanager
def _cuda_memory(
    model: Any, *, prefill_rows: int, decode_steps: int | None = None
) -> Iterator[list[int]]:
    """The model's forward as CUDA runs it with little memory left; yields each prefill's rows.

    A prefill (the forward over whole prompts) of more than ``prefill_rows`` prompts
    runs out; with ``decode_steps``, so does the decode step after that many.
    """
    original = model.forward
    calls: list[int] = []
    steps = 0

    @functools.wraps(original)  # generate checks its kwargs against forward's signature
    def forward(*args: Any, **kwargs: Any) -> Any:
        nonlocal steps
        rows, length = (int(n) for n in kwargs["input_ids"].shape)
        if length > 1:  # the prefill (the images' features came from generate's encoder)
            calls.append(rows)
            steps = 0
            if rows > prefill_rows:
                raise torch.OutOfMemoryError(ALLOCATOR_MESSAGE)
        else:
            steps += 1
            if decode_steps is not None and steps > decode_steps:
                raise torch.OutOfMemoryError(ALLOCATOR_MESSAGE)
        return original(*args, **kwargs)

    model.forward = forward
    try:
        yield calls
    finally:
        del model.forward


def _singles(backend: Any, items: list[BatchItem]) -> list[tuple[int, ...]]:
    return [backend.generate(i.inputs, i.settings, RecordingSink()).token_ids for i in items]


def test_a_batch_that_runs_out_before_its_first_token_runs_in_halves(qwen) -> None:
    backend = qwen.backend
    items = _items(5)
    singles = _singles(backend, items)
    sink = RecordingBatchSink()
    with _cuda_memory(backend._model, prefill_rows=2) as prefills:
        results = backend.generate_batch(items, sink)
    assert [r.token_ids for r in results] == singles  # every answer as its single run
    assert [tuple(sink.tokens(index)) for index in range(5)] == singles  # streamed once each
    assert prefills == [5, 3, 2, 1, 2]  # 5 ran out, then 3 of (3, 2), then each fit
    assert [r.batch_size for r in results] == [2, 2, 1, 2, 2]


def test_later_groups_start_at_the_size_that_fit(qwen) -> None:
    backend = qwen.backend
    pixels = np.random.default_rng(5).integers(0, 255, (4, 48, 64, 3), np.uint8)
    other = [
        BatchItem(PreparedInputs.text("Caption it.", ImagePart(Image.fromarray(p))), GREEDY)
        for p in pixels
    ]
    items = _items(4) + other  # two shapes: two groups
    with _cuda_memory(backend._model, prefill_rows=2) as prefills:
        results = backend.generate_batch(items, RecordingBatchSink())
    assert [r.batch_size for r in results] == [2] * 8
    assert prefills == [4, 2, 2, 2, 2]  # the second group never tried 4 again


def test_one_prompt_that_does_not_fit_is_one_clear_error(qwen) -> None:
    backend = qwen.backend
    with (
        _cuda_memory(backend._model, prefill_rows=0),
        pytest.raises(GenerationOutOfMemoryError) as caught,
    ):
        backend.generate_batch(_items(2), RecordingBatchSink())
    error = caught.value
    assert (error.rows, error.after_tokens) == (1, False)
    assert error.profile_id in str(error) and "Free it" in str(error)
    assert "ComfyUI" in str(error) and "smaller" in str(error)
    assert isinstance(error, MemoryError) and error.action == "retry"
    assert pickle.loads(pickle.dumps(error)).__dict__ == error.__dict__
    assert backend.generate(*_pair(), RecordingSink()).token_ids  # the model still serves


def _pair() -> tuple[PreparedInputs, GenerationSettings]:
    item = _items(1)[0]
    return item.inputs, item.settings


def test_running_out_after_tokens_streamed_is_not_rerun(qwen) -> None:
    """A re-run would stream each row's text again: the node's live view would repeat."""
    backend = qwen.backend
    sink = RecordingBatchSink()
    with (
        _cuda_memory(backend._model, prefill_rows=8, decode_steps=2) as prefills,
        pytest.raises(GenerationOutOfMemoryError) as caught,
    ):
        backend.generate_batch(_items(3), sink)
    assert (caught.value.rows, caught.value.after_tokens) == (3, True)
    assert prefills == [3]  # one generate, no re-run
    assert all(1 <= len(sink.tokens(index)) <= 3 for index in range(3))


def test_a_single_request_out_of_memory_is_the_same_clear_error(qwen) -> None:
    backend = qwen.backend
    with (
        _cuda_memory(backend._model, prefill_rows=0),
        pytest.raises(GenerationOutOfMemoryError) as caught,
    ):
        backend.generate(*_pair(), RecordingSink())
    assert (caught.value.rows, caught.value.after_tokens) == (1, False)
    assert not isinstance(caught.value.__cause__, torch.OutOfMemoryError)  # its tensors freed
