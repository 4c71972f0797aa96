"""run_batch: one admission and load for many requests, batched where the backend can."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from comfy_llm_core import Modality, ProgressStage
from comfy_llm_inputs import PreparedInputs
from comfy_llm_residency.backend import (
    BackendResult,
    BackendTimings,
    BatchBackend,
    BatchItem,
    GenerationSettings,
)

SETTINGS = GenerationSettings(max_new_tokens=16, temperature=0.0)


def _items(fake: Any, count: int, settings: GenerationSettings = SETTINGS) -> list[BatchItem]:
    return [BatchItem(fake.make_inputs(), settings) for _ in range(count)]


def _number(prompt: str) -> int:
    return int(prompt.split("#")[1].split()[0])


class Batching:
    """A fake batch engine: answers item i with the scripted tokens then i+1 ``a``s.

    Tokens of all items interleave, as continuous batching delivers them.
    """

    def __init__(self, fake: Any, accept: bool = True) -> None:
        self.fake = fake
        self.accept = accept
        self.batches: list[int] = []
        self.singles = 0
        self.prompts: list[str] = []
        self.vocabulary = fake.VOCABULARY
        self.modalities = frozenset(Modality)

    def _ids(self, index: int) -> list[int]:
        return [self.fake.A] * (index + 1) + [self.fake.IM_END]

    def _result(self, ids: list[int], together: int = 1) -> BackendResult:
        text = " a" * (len(ids) - 1)
        timings = BackendTimings(0.0, 5)
        return BackendResult(tuple(ids), text, None, timings, batch_size=together)

    def can_batch(self, items: Sequence[BatchItem]) -> bool:
        return self.accept

    def generate_batch(self, items: Sequence[BatchItem], sink: Any) -> list[BackendResult]:
        self.batches.append(len(items))
        self.prompts.extend(item.inputs.prompt for item in items)
        scripts = [self._ids(_number(item.inputs.prompt)) for item in items]
        longest = max(len(s) for s in scripts)
        for step in range(longest):
            for index, ids in enumerate(scripts):
                if step < len(ids):
                    sink.token(index, ids[step], " a" * step)
        return [self._result(ids, len(items)) for ids in scripts]

    def generate(self, inputs: Any, settings: Any, sink: Any) -> BackendResult:
        self.singles += 1
        self.prompts.append(inputs.prompt)
        ids = self._ids(_number(inputs.prompt))
        for step, token in enumerate(ids):
            sink.token(token, " a" * step)
        return self._result(ids)

    def unload(self) -> None:
        pass

    def runtime_metadata(self) -> dict[str, object]:
        return {"device": "fake0"}


def _numbered(count: int, settings: GenerationSettings = SETTINGS) -> list[BatchItem]:
    return [BatchItem(PreparedInputs.text(f"item #{i}"), settings) for i in range(count)]


def _profile(fake: Any) -> Any:
    return fake.make_profile(reasoning_parser=None, architecture="Idefics3ForConditionalGeneration")


def test_a_backend_without_batch_methods_is_served_one_item_at_a_time(world, fake) -> None:
    manager = world.manager()
    profile = fake.make_profile()
    path = world.snapshot(profile)
    results = manager.run_batch(profile, path, _items(fake, 3), progress=world.record)
    single = manager.run(profile, path, fake.make_inputs(), SETTINGS)
    backend = world.backend_for(profile)
    assert not isinstance(backend, BatchBackend)
    assert backend.generate_calls == 4
    assert [(r.response, r.reasoning) for r in results] == [("answer", "a b")] * 3
    assert single.response == "answer"
    for index, result in enumerate(results):
        metadata = result.metadata.to_dict()
        assert (metadata["batched"], metadata["batch_size"]) == (False, 1)
        assert (metadata["batch_index"], metadata["batch_items"]) == (index, 3)
        assert metadata["output_tokens"] == single.metadata.to_dict()["output_tokens"]
        json.dumps(metadata)
    # the load counts once: on the first item
    assert [r.metadata.to_dict()["cache_status"] for r in results] == ["cold", "warm", "warm"]
    assert manager.state().requests_served == 4
    done = [e for e in world.events if e.stage is ProgressStage.DONE]
    assert len(done) == 1 and done[0].message == "Done: 3 answers, 18 tokens"
    generate = [e for e in world.events if e.stage is ProgressStage.GENERATE]
    assert [e.value for e in generate] == [float(n) for n in range(1, 19)]
    assert {e.maximum for e in generate} == {48.0}


def test_a_batch_backend_gets_every_item_at_once_and_results_stay_in_order(world, fake) -> None:
    engine = Batching(fake)
    manager = world.manager(backend_factory=lambda *_: engine)
    profile = _profile(fake)
    seen: list[tuple[int, int]] = []
    results = manager.run_batch(
        profile,
        world.snapshot(profile),
        _numbered(3),
        on_token=lambda index, token, text: seen.append((index, token)),
    )
    assert engine.batches == [3] and engine.singles == 0
    assert [r.response for r in results] == ["a", "a a", "a a a"]
    assert [r.metadata.to_dict()["output_tokens"] for r in results] == [2, 3, 4]
    assert all(
        r.metadata.to_dict()["batched"] and r.metadata.to_dict()["batch_size"] == 3 for r in results
    )
    # the caller's callback sees each item's tokens under that item's index
    assert [token for index, token in seen if index == 2] == engine._ids(2)
    assert seen[:3] == [(0, fake.A), (1, fake.A), (2, fake.A)]


def test_a_batch_backend_that_declines_is_looped(world, fake) -> None:
    engine = Batching(fake, accept=False)
    manager = world.manager(backend_factory=lambda *_: engine)
    profile = _profile(fake)
    results = manager.run_batch(profile, world.snapshot(profile), _numbered(2))
    assert engine.batches == [] and engine.singles == 2
    assert [r.response for r in results] == ["a", "a a"]
    assert not results[0].metadata.to_dict()["batched"]


def test_items_failing_their_schema_are_retried_together(world, fake) -> None:
    engine = Batching(fake)
    manager = world.manager(backend_factory=lambda *_: engine)
    profile = _profile(fake)
    schema = json.dumps({"type": "object"})  # "a ..." is never an object
    settings = GenerationSettings(max_new_tokens=8, temperature=0.0, response_schema=schema)
    results = manager.run_batch(profile, world.snapshot(profile), _numbered(3, settings))
    assert engine.batches == [3, 3]  # the first pass, then the retry of all three
    assert all("#" in prompt for prompt in engine.prompts)
    assert all("JSON Schema" in prompt for prompt in engine.prompts[3:])
    assert not any("JSON Schema" in prompt for prompt in engine.prompts[:3])
    for result in results:
        assert result.metadata.to_dict()["schema_valid"] is False
        assert result.metadata.to_dict()["schema_retries"] == 1


class Cancelled(BaseException):
    """Like ComfyUI's InterruptProcessingException."""


def test_cancel_from_the_token_callback_stops_the_batch_and_the_model_stays(world, fake) -> None:
    engine = Batching(fake)
    manager = world.manager(backend_factory=lambda *_: engine)
    profile = _profile(fake)
    path = world.snapshot(profile)

    def cancel(index: int, token: int, text: str) -> None:
        if index == 1:
            raise Cancelled

    with pytest.raises(Cancelled):
        manager.run_batch(profile, path, _numbered(3), on_token=cancel)
    assert manager.state().resident_profiles == (profile.profile_id,)
    assert manager.state().busy is False
    again = manager.run_batch(profile, path, _numbered(2))
    assert [r.metadata.to_dict()["cache_status"] for r in again] == ["warm", "warm"]


def test_an_empty_batch_is_refused(world, fake) -> None:
    manager = world.manager()
    profile = fake.make_profile()
    with pytest.raises(ValueError, match="at least one item"):
        manager.run_batch(profile, world.snapshot(profile), [])
    assert world.backends == []  # refused before any load


def test_a_batch_is_served_as_a_batch_from_admission_to_the_last_token(world, fake):
    from comfy_llm_residency import serving_batch

    seen: list[tuple[str, bool]] = []

    def factory(profile, path, progress):
        seen.append(("load", serving_batch()))
        return world.factory(profile, path, progress)

    manager = world.manager()
    manager._residents.factory = factory
    profile = fake.make_profile()
    path = world.snapshot(profile)
    items = [BatchItem(fake.make_inputs(), SETTINGS) for _ in range(2)]
    manager.run_batch(
        profile, path, items, on_token=lambda *_: seen.append(("token", serving_batch()))
    )
    single: list[bool] = []
    manager.run(
        profile,
        path,
        fake.make_inputs(),
        SETTINGS,
        on_token=lambda *_: single.append(serving_batch()),
    )
    assert seen[0] == ("load", True) and all(flag for _, flag in seen)
    assert single and not any(single)  # a single request is not a batch
    assert not serving_batch()
