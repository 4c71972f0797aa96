"""A backend that asks to be rebuilt (vLLM's promotion) is unloaded and loaded again."""

from __future__ import annotations

import pytest
from comfy_llm_core import ProgressStage
from comfy_llm_residency import InsufficientMemoryError
from comfy_llm_residency.backend import GenerationSettings

SETTINGS = GenerationSettings(max_new_tokens=16, temperature=0.0)


def test_a_rebuild_request_unloads_then_loads_through_admission(world, fake):
    asked: list[tuple[int, str | None]] = []

    def factory(profile, path, progress):
        backend = world.factory(profile, path, progress)

        def observe_workflow(prompt_id):
            asked.append((id(backend), prompt_id))
            # the first engine asks on workflow B; the rebuilt one is in the right mode
            if prompt_id == "B" and len(world.backends) == 1:
                return "Rebuilding in throughput mode (was eager)"
            return None

        backend.observe_workflow = observe_workflow
        return backend

    manager = world.manager("local_cuda")
    manager._residents.factory = factory
    profile = fake.make_profile(target="local_cuda")
    path = world.snapshot(profile)
    first = manager.run(profile, path, fake.make_inputs(), SETTINGS, prompt_id="A")
    assert first.metadata.to_dict()["cache_status"] == "cold"
    world.log.events.clear()

    events = []
    second = manager.run(
        profile, path, fake.make_inputs(), SETTINGS, prompt_id="B", progress=events.append
    )
    assert second.response == "answer"
    assert second.metadata.to_dict()["cache_status"] == "cold"
    assert world.log.events[0] == f"unload:{profile.repository}"
    assert f"load:{profile.repository}" in world.log.events
    engine = [e for e in events if e.stage is ProgressStage.ENGINE]
    assert len(engine) == 1 and engine[0].indeterminate
    assert engine[0].message == "Rebuilding in throughput mode (was eager)"
    stages = [e.stage for e in events]
    assert stages.index(ProgressStage.ENGINE) < stages.index(ProgressStage.ADMISSION)
    old, new = world.backends
    assert old.unload_calls == 1 and new.unload_calls == 0
    # the rebuilt backend saw the prompt id as well, and nothing is rebuilt again
    assert asked[-1] == (id(new), "B")
    third = manager.run(profile, path, fake.make_inputs(), SETTINGS, prompt_id="C")
    assert third.metadata.to_dict()["cache_status"] == "warm"
    assert len(world.backends) == 2


def test_backends_without_the_hook_are_never_rebuilt(world, fake):
    manager = world.manager()
    profile = fake.make_profile()
    path = world.snapshot(profile)
    for prompt_id in ("A", "B", "C"):
        manager.run(profile, path, fake.make_inputs(), SETTINGS, prompt_id=prompt_id)
    assert len(world.backends) == 1


def _rebuilding_manager(world, fake):
    """A manager whose engine asks for a rebuild on workflow B, on a card it fills alone."""

    def factory(profile, path, progress):
        backend = world.factory(profile, path, progress)
        first = len(world.backends) == 1
        backend.observe_workflow = lambda prompt_id: (
            "Rebuilding in throughput mode (was eager)" if first and prompt_id == "B" else None
        )
        return backend

    world.probe.total = 16 * fake.GIB
    manager = world.manager("local_cuda", poll_interval_seconds=0.25)
    manager._residents.factory = factory
    profile = fake.make_profile(target="local_cuda", estimated_gb=10)
    path = world.snapshot(profile)
    manager.run(profile, path, fake.make_inputs(), SETTINGS, prompt_id="A", reserve_gb=0)
    return manager, profile, path


def test_a_rebuild_waits_for_the_old_engines_memory(world, fake):
    manager, profile, path = _rebuilding_manager(world, fake)
    world.probe.release_at = world.clock.now + 2.0  # the old engine process exits lazily

    result = manager.run(profile, path, fake.make_inputs(), SETTINGS, prompt_id="B", reserve_gb=0)

    assert result.metadata.to_dict()["cache_status"] == "cold"
    assert sum(world.clock.sleeps) == pytest.approx(2.0)
    assert result.metadata.to_dict()["memory_wait_seconds"] == pytest.approx(2.0)
    assert manager.unsafe_for_reuse is False


def test_a_rebuild_whose_memory_never_comes_back_flags_the_worker_for_retirement(world, fake):
    # The seed: poll for recovery, then mark the worker unsafe so the Modal dispatcher
    # retries once on a fresh container carrying the promotion.
    manager, profile, path = _rebuilding_manager(world, fake)
    world.probe.leak = True

    with pytest.raises(InsufficientMemoryError) as caught:
        manager.run(profile, path, fake.make_inputs(), SETTINGS, prompt_id="B", reserve_gb=0)

    assert caught.value.recovery_timed_out is True
    assert sum(world.clock.sleeps) == pytest.approx(15.0)
    assert manager.unsafe_for_reuse is True
