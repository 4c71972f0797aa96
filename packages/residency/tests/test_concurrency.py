"""Interruption and serialization: the lock is always released, requests never overlap."""

from __future__ import annotations

import threading
import time

import pytest
from comfy_llm_core import ProgressStage
from comfy_llm_residency import ResidentModelManager
from comfy_llm_residency.backend import GenerationSettings

SETTINGS = GenerationSettings(max_new_tokens=16)


def run_in_thread(target, timeout=10.0):
    outcome = {}

    def body():
        try:
            outcome["result"] = target()
        except BaseException as error:
            outcome["error"] = error

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "the manager's lock was not released"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def test_interruption_from_token_callback_keeps_model_and_frees_lock(world, fake):
    manager = world.manager()
    profile = fake.make_profile()
    path = world.snapshot(profile)
    seen = []

    def interrupt_after_three(token_id, text):
        seen.append(token_id)
        if len(seen) == 3:
            raise fake.InterruptProcessingException()

    with pytest.raises(fake.InterruptProcessingException):
        manager.run(profile, path, fake.make_inputs(), SETTINGS, on_token=interrupt_after_three)

    assert len(seen) == 3
    state = manager.state()
    assert state.resident_profiles == (profile.profile_id,)
    assert state.busy is False
    assert world.backend_for(profile).unload_calls == 0

    result = run_in_thread(lambda: manager.run(profile, path, fake.make_inputs(), SETTINGS))
    assert result.metadata.to_dict()["cache_status"] == "warm"
    assert result.response == "answer"
    assert world.log.events == [f"load:{profile.repository}"]


def test_interruption_from_progress_callback(world, fake):
    manager = world.manager()
    profile = fake.make_profile()
    path = world.snapshot(profile)

    def interrupt(event):
        if event.stage == ProgressStage.GENERATE and event.value == 2:
            raise fake.InterruptProcessingException()

    with pytest.raises(fake.InterruptProcessingException):
        manager.run(profile, path, fake.make_inputs(), SETTINGS, progress=interrupt)

    assert manager.state().resident_profiles == (profile.profile_id,)
    run_in_thread(lambda: manager.run(profile, path, fake.make_inputs(), SETTINGS))


def test_interruption_during_load_progress_keeps_loaded_model(world, fake):
    manager = world.manager()
    profile = fake.make_profile()
    path = world.snapshot(profile)

    def interrupt(event):
        if event.stage == ProgressStage.LOAD and event.message.startswith("Loaded"):
            raise fake.InterruptProcessingException()

    with pytest.raises(fake.InterruptProcessingException):
        manager.run(profile, path, fake.make_inputs(), SETTINGS, progress=interrupt)

    assert manager.state().resident_profiles == (profile.profile_id,)
    result = run_in_thread(lambda: manager.run(profile, path, fake.make_inputs(), SETTINGS))
    assert result.metadata.to_dict()["cache_status"] == "warm"


def test_interruption_with_keep_loaded_false_unloads(world, fake):
    manager = world.manager()
    profile = fake.make_profile()

    def interrupt(token_id, text):
        raise fake.InterruptProcessingException()

    with pytest.raises(fake.InterruptProcessingException):
        manager.run(
            profile,
            world.snapshot(profile),
            fake.make_inputs(),
            SETTINGS,
            on_token=interrupt,
            keep_loaded=False,
        )

    assert manager.state().resident_profiles == ()
    assert world.backend_for(profile).unload_calls == 1


def test_two_threads_are_serialized(world, fake):
    world.token_delay = 0.01
    manager = ResidentModelManager(
        "local_cpu",
        backend_factory=world.factory,
        memory_probe=world.probe,
        max_resident=2,
    )
    profiles = [fake.make_profile("model-a"), fake.make_profile("model-b")]
    paths = [world.snapshot(p) for p in profiles]
    barrier = threading.Barrier(2)
    results: dict[int, object] = {}
    errors: list[BaseException] = []

    def worker(index):
        try:
            barrier.wait(5)
            results[index] = manager.run(
                profiles[index], paths[index], fake.make_inputs(), SETTINGS
            )
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(2)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    assert len(results) == 2
    assert all(r.response == "answer" for r in results.values())
    first, second = sorted(world.intervals)
    assert first[1] <= second[0], f"generations overlapped: {first} {second}"
    assert manager.state().resident_profiles in {
        (profiles[0].profile_id, profiles[1].profile_id),
        (profiles[1].profile_id, profiles[0].profile_id),
    }


def test_state_does_not_wait_for_a_running_request(world, fake):
    world.token_delay = 0.02
    manager = world.manager()
    profile = fake.make_profile()
    path = world.snapshot(profile)
    started = threading.Event()
    release = threading.Event()

    def on_token(token_id, text):
        started.set()
        release.wait(5)

    thread = threading.Thread(
        target=manager.run,
        args=(profile, path, fake.make_inputs(), SETTINGS),
        kwargs={"on_token": on_token},
        daemon=True,
    )
    thread.start()
    assert started.wait(5)
    state = manager.state()
    assert state.busy is True
    assert state.resident_profiles == (profile.profile_id,)
    release.set()
    thread.join(5)
    assert not thread.is_alive()
    assert manager.state().busy is False
