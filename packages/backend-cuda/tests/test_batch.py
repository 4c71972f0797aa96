"""Transformers batches: greedy prompts of one shape in one generate, equal to single runs."""

from __future__ import annotations

import numpy as np
import pytest
from comfy_llm_inputs import ImagePart, PreparedInputs
from comfy_llm_residency.backend import BatchBackend, BatchItem, GenerationSettings
from comfy_llm_testworld.sinks import RecordingBatchSink, RecordingSink
from PIL import Image

pytestmark = pytest.mark.slow

GREEDY = GenerationSettings(max_new_tokens=10, temperature=0.0, enable_reasoning=False)


def _images(count: int, size: tuple[int, int] = (32, 32), seed: int = 4) -> list[Image.Image]:
    pixels = np.random.default_rng(seed).integers(0, 255, (count, size[1], size[0], 3), np.uint8)
    return [Image.fromarray(frame) for frame in pixels]


def _items(images: list[Image.Image], settings: GenerationSettings = GREEDY) -> list[BatchItem]:
    return [BatchItem(PreparedInputs.text("Caption it.", ImagePart(i)), settings) for i in images]


def _singles(backend, items: list[BatchItem]) -> list[tuple[int, ...]]:
    return [backend.generate(i.inputs, i.settings, RecordingSink()).token_ids for i in items]


@pytest.mark.parametrize("name", ["qwen", "smolvlm", "scripted"])
def test_a_greedy_batch_equals_single_runs_token_for_token(name: str, request) -> None:
    backend = request.getfixturevalue(name).backend
    assert isinstance(backend, BatchBackend)
    items = _items(_images(4))
    assert backend.can_batch(items)
    sink = RecordingBatchSink()
    results = backend.generate_batch(items, sink)
    singles = _singles(backend, items)
    assert [r.token_ids for r in results] == singles
    if name != "scripted":  # random weights: each image its own answer, so order shows
        assert len(set(singles)) > 1
    assert [tuple(sink.tokens(index)) for index in range(4)] == singles
    assert [r.batch_size for r in results] == [4, 4, 4, 4]
    assert all(r.timings.prompt_tokens == results[0].timings.prompt_tokens for r in results)


def test_images_of_two_sizes_are_generated_as_two_groups(qwen) -> None:
    backend = qwen.backend
    items = _items(_images(2, (32, 32)) + _images(3, (64, 48), seed=9))
    results = backend.generate_batch(items, RecordingBatchSink())
    assert [r.token_ids for r in results] == _singles(backend, items)
    assert [r.batch_size for r in results] == [2, 2, 3, 3, 3]


def test_sampled_or_schema_requests_are_not_batched(qwen) -> None:
    backend = qwen.backend
    images = _images(2)
    sampled = GenerationSettings(max_new_tokens=4, temperature=0.8, seed=1)
    schema = GenerationSettings(
        max_new_tokens=4, temperature=0.0, response_schema='{"type": "object"}'
    )
    assert not backend.can_batch(_items(images, sampled))
    assert not backend.can_batch(_items(images, schema))
    assert not backend.can_batch([*_items(images[:1]), *_items(images[1:], sampled)])


class Stop(Exception):
    pass


def test_on_token_raising_stops_the_batch_and_propagates(scripted) -> None:
    stop = RecordingBatchSink(stop_after=3, error=Stop())
    with pytest.raises(Stop):
        scripted.backend.generate_batch(_items(_images(2)), stop)
    # row by row, step by step; nothing after the raise
    assert [index for index, _, _ in stop.calls] == [0, 1, 0]
