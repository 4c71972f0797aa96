"""A backend that asks to be rebuilt (vLLM's promotion) is unloaded and loaded again."""

from __future__ import annotations

from comfy_llm_core import ProgressStage
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
