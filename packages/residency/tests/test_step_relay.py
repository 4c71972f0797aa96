"""Step-wise engines: one event per drain, Cancel before the first token, dead engines."""

from __future__ import annotations

import pytest
from comfy_llm_core import ProgressStage
from comfy_llm_residency.backend import GenerationSettings
from comfy_llm_testworld.sinks import RecordingSink

SETTINGS = GenerationSettings(max_new_tokens=64)


class Cancelled(Exception):
    """Stands in for ComfyUI's interrupt."""


def _generate_events(world):
    return [e for e in world.events if e.stage is ProgressStage.GENERATE]


def _run(world, fake, **callbacks):
    """One request through a fresh manager, its progress recorded by the world."""
    profile = fake.make_profile()
    return world.manager().run(
        profile,
        world.snapshot(profile),
        fake.make_inputs(),
        SETTINGS,
        progress=world.record,
        **callbacks,
    )


def test_a_drain_is_one_event_at_most_twenty_per_second(world, fake, monkeypatch):
    def generate(self, inputs, settings, sink):
        for _ in range(10):  # ten drains of three tokens, 20 ms apart
            sink.step([1, 2, 3], "abc")
            world.clock.sleep(0.02)
        return original(self, inputs, settings, RecordingSink())

    original = fake.FakeBackend.generate
    monkeypatch.setattr(fake.FakeBackend, "generate", generate)
    seen: list[int] = []
    _run(world, fake, on_token=lambda token_id, text: seen.append(token_id))
    events = _generate_events(world)
    # 200 ms of drains: the first token's event, then none closer than 50 ms to the last
    assert [e.value for e in events] == [3.0, 12.0, 21.0, 30.0]
    assert len(seen) == 30  # the caller's callback still sees every token


def test_a_fast_token_wise_engine_sends_at_most_twenty_events_a_second(world, fake):
    world.token_seconds = 0.02  # 50 tokens/s, one token per sink.token call
    seen: list[int] = []

    def on_token(token_id, text):
        seen.append(token_id)
        if len(seen) == 5:
            raise Cancelled  # the caller's callback runs per token: Cancel between tokens

    with pytest.raises(Cancelled):
        _run(world, fake, on_token=on_token)
    # tokens at 20, 40, 60, 80, 100 ms: the first token's event, then the one 60 ms later
    assert [e.value for e in _generate_events(world)] == [1.0, 4.0]
    assert seen == list(fake.SCRIPTED[:5])  # every token, and none after the Cancel


def test_a_fast_engines_decode_rate_counts_every_token(world, fake):
    world.token_seconds = 0.02
    result = _run(world, fake)
    metadata = result.metadata.to_dict()
    assert metadata["output_tokens"] == len(fake.SCRIPTED)
    assert metadata["tokens_per_second"] == pytest.approx(50.0)  # 5 tokens after the first
    assert len(_generate_events(world)) < len(fake.SCRIPTED)


def test_waiting_for_the_first_token_lets_the_host_cancel(world, fake, monkeypatch):
    polls: list[int] = []

    def generate(self, inputs, settings, sink):
        while True:  # a prefill that never ends unless the host cancels
            polls.append(1)
            sink.wait()
            world.clock.sleep(0.1)

    monkeypatch.setattr(fake.FakeBackend, "generate", generate)

    def progress(event):
        if event.stage is ProgressStage.GENERATE and len(polls) == 3:
            raise Cancelled
        world.record(event)

    manager = world.manager()
    profile = fake.make_profile()
    with pytest.raises(Cancelled):
        manager.run(
            profile, world.snapshot(profile), fake.make_inputs(), SETTINGS, progress=progress
        )
    assert [e.message for e in _generate_events(world)] == ["Reading the prompt"] * 2
    assert _generate_events(world)[0].indeterminate
    assert profile.profile_id in manager.state().resident_profiles  # the model stays


def test_a_backend_that_died_is_evicted_and_the_next_run_loads_a_fresh_one(
    world, fake, monkeypatch
):
    monkeypatch.setattr(fake.FakeBackend, "loaded", True, raising=False)
    manager = world.manager()
    profile = fake.make_profile()
    world.generate_error = RuntimeError("engine core died")

    def die(self, inputs, settings, sink):
        self.loaded = False
        raise world.generate_error

    original = fake.FakeBackend.generate
    monkeypatch.setattr(fake.FakeBackend, "generate", die)
    with pytest.raises(RuntimeError, match="engine core died"):
        manager.run(profile, world.snapshot(profile), fake.make_inputs(), SETTINGS)
    assert profile.profile_id not in manager.state().resident_profiles
    world.generate_error = None
    monkeypatch.setattr(fake.FakeBackend, "generate", original)
    manager.run(profile, world.snapshot(profile), fake.make_inputs(), SETTINGS)
    assert world.log.events.count(f"load:{profile.repository}") == 2
    assert world.log.events.count(f"unload:{profile.repository}") == 1


@pytest.mark.parametrize("opened", [True, False])
def test_the_backends_report_of_an_opened_think_block_rides_every_generate_event(
    world, fake, monkeypatch, opened
):
    def generate(self, inputs, settings, sink):
        sink.prompt_opened(opened)  # as every backend does, before its first token
        return original(self, inputs, settings, sink)

    original = fake.FakeBackend.generate
    monkeypatch.setattr(fake.FakeBackend, "generate", generate)
    _run(world, fake)
    tokens = [e for e in _generate_events(world) if e.text is not None]
    assert tokens and all(e.prompt_opened_reasoning is opened for e in tokens)


def test_without_a_report_generate_events_say_unknown(world, fake):
    _run(world, fake)
    tokens = [e for e in _generate_events(world) if e.text is not None]
    assert tokens and all(e.prompt_opened_reasoning is None for e in tokens)


def _timed(world, fake, monkeypatch, *, first_after: float, gap: float, stepwise: bool):
    """A backend whose five tokens come ``first_after`` s after the call, ``gap`` s apart."""

    def generate(self, inputs, settings, sink):
        world.clock.sleep(first_after)
        for number in range(5):
            if number:
                world.clock.sleep(gap)
            if stepwise:
                sink.step([number], "a" * number)
            else:
                sink.token(number, "a" * number)
        return original(self, inputs, settings, RecordingSink())

    original = fake.FakeBackend.generate
    monkeypatch.setattr(fake.FakeBackend, "generate", generate)


@pytest.mark.parametrize("stepwise", [False, True])
def test_time_to_first_token_and_decode_rate_are_measured_in_the_sink(
    world, fake, monkeypatch, stepwise
):
    _timed(world, fake, monkeypatch, first_after=0.5, gap=0.1, stepwise=stepwise)
    manager = world.manager()
    profile = fake.make_profile()
    result = manager.run(profile, world.snapshot(profile), fake.make_inputs(), SETTINGS)
    assert result.metadata.to_dict()["time_to_first_token_seconds"] == 0.5
    assert (
        result.metadata.to_dict()["tokens_per_second"] == 10.0
    )  # four tokens after the first in 0.4 s


def test_a_schema_retry_reports_the_timing_of_the_generation_that_answered(
    world, fake, monkeypatch
):
    from comfy_llm_residency.backend import BackendResult, BackendTimings

    answers = iter(['{"n": "x"}', '{"n": 1}'])
    delays = iter([2.0, 0.25])

    def generate(self, inputs, settings, sink):
        world.clock.sleep(next(delays))
        text = next(answers)
        sink.token(1, text)
        world.clock.sleep(0.5)
        sink.token(2, text)
        timings = BackendTimings(generation_seconds=0.75, prompt_tokens=3)
        return BackendResult((1, 2), text, None, timings, constrained=True)

    monkeypatch.setattr(fake.FakeBackend, "generate", generate)
    monkeypatch.setattr(fake.FakeBackend, "vocabulary", None)  # the answer is the text
    manager = world.manager()
    profile = fake.make_profile()
    schema = '{"type": "object", "properties": {"n": {"type": "integer"}}}'
    settings = GenerationSettings(max_new_tokens=8, enable_reasoning=False, response_schema=schema)
    result = manager.run(profile, world.snapshot(profile), fake.make_inputs(), settings)
    assert (
        result.metadata.to_dict()["schema_retries"] == 1
        and result.metadata.to_dict()["schema_valid"] is True
    )
    assert result.metadata.to_dict()["time_to_first_token_seconds"] == 0.25  # the retry's, not 2.0
    assert result.metadata.to_dict()["tokens_per_second"] == 2.0


def test_a_kind_of_input_the_engine_does_not_take_is_refused_before_generating(
    world, fake, monkeypatch
):
    from comfy_llm_core import Modality
    from comfy_llm_residency import UnsupportedInputError

    monkeypatch.setattr(fake.FakeBackend, "modalities", frozenset({Modality.TEXT}))
    manager = world.manager()
    profile = fake.make_profile()
    with pytest.raises(UnsupportedInputError) as refused:
        manager.run(profile, world.snapshot(profile), fake.make_inputs(images=2), SETTINGS)
    assert refused.value.modality == "image"
    assert "does not take image input" in str(refused.value)
    assert "disconnect the IMAGE input" in str(refused.value)
    assert world.intervals == []  # nothing was generated
    assert profile.profile_id in manager.state().resident_profiles  # the model stays
    # text alone is served, and a batch is refused the same way
    manager.run(profile, world.snapshot(profile), fake.make_inputs(images=0), SETTINGS)
    from comfy_llm_residency.backend import BatchItem

    with pytest.raises(UnsupportedInputError, match="image"):
        manager.run_batch(
            profile, world.snapshot(profile), [BatchItem(fake.make_inputs(), SETTINGS)]
        )
