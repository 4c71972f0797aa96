"""Memory admission: refusal with numbers, host release, eviction, recovery polling."""

from __future__ import annotations

import pickle

import pytest
from comfy_llm_core import ProgressStage
from comfy_llm_residency import InsufficientMemoryError, ResidencyError
from comfy_llm_residency.backend import GenerationSettings

SETTINGS = GenerationSettings(max_new_tokens=8)


def run(world, manager, profile, fake, **kwargs):
    return manager.run(profile, world.snapshot(profile), fake.make_inputs(), SETTINGS, **kwargs)


def test_too_little_memory_refuses_with_the_numbers(world, fake):
    world.probe.total = 16 * fake.GIB
    world.probe.extra_used = 14 * fake.GIB  # 2 GiB available
    manager = world.manager(recovery_timeout_seconds=0)
    profile = fake.make_profile(estimated_gb=8)

    with pytest.raises(InsufficientMemoryError) as caught:
        run(world, manager, profile, fake, reserve_gb=4)

    error = caught.value
    assert isinstance(error, MemoryError)
    assert isinstance(error, ResidencyError)
    message = str(error)
    assert "needed 8.00 GiB" in message
    assert "4.00 GiB reserve" in message
    assert "12.00 GiB" in message
    assert "only 2.00 GiB of 16.00 GiB" in message
    assert "local_reserve_free_memory_gb" in message
    assert "smaller or quantized model" in message
    assert "close other applications" in message
    assert profile.repository in message
    assert error.needed_bytes == 8 * fake.GIB
    assert error.reserve_bytes == 4 * fake.GIB
    assert error.available_bytes == 2 * fake.GIB
    assert error.total_bytes == 16 * fake.GIB
    assert error.device == "fake0"
    assert world.log.events == [f"free:{12 * fake.GIB}"]  # never loaded
    assert manager.unsafe_for_reuse is False
    assert manager.state().busy is False


def test_local_cuda_refusal_names_the_local_reserve(world, fake):
    # reserve_free_vram_gb keeps the seed's meaning (the Modal GPU's reserve):
    # a local NVIDIA GPU's reserve is local_reserve_free_memory_gb
    world.probe.total = 8 * fake.GIB
    manager = world.manager("local_cuda")
    profile = fake.make_profile(target="local_cuda", estimated_gb=7)

    with pytest.raises(InsufficientMemoryError, match="local_reserve_free_memory_gb"):
        run(world, manager, profile, fake, reserve_gb=2)


def test_modal_keeps_the_seed_reserve_and_two_residents(world, fake, monkeypatch):
    monkeypatch.delenv("COMFY_MODAL_LLM_RESERVE_FREE_GB", raising=False)
    monkeypatch.delenv("COMFY_MODAL_LLM_MAX_RESIDENT_MODELS", raising=False)
    world.probe.total = 80 * fake.GIB
    manager = world.manager("modal")
    a = fake.make_profile("model-a", target="modal", estimated_gb=8)
    b = fake.make_profile("model-b", target="modal", estimated_gb=8)

    result = run(world, manager, a, fake)
    run(world, manager, b, fake)

    assert result.metadata.to_dict()["reserve_bytes"] == 24 * fake.GIB
    assert manager.max_resident == 2
    assert manager.state().resident_profiles == (a.profile_id, b.profile_id)
    monkeypatch.setenv("COMFY_MODAL_LLM_RESERVE_FREE_GB", "75")  # 8 + 75 > 80 total
    c = fake.make_profile("model-c", target="modal", estimated_gb=8)
    with pytest.raises(InsufficientMemoryError, match="reserve_free_vram_gb") as caught:
        run(world, manager, c, fake)
    assert caught.value.reserve_bytes == 75 * fake.GIB


def test_larger_than_total_refuses_without_evicting(world, fake):
    world.probe.total = 16 * fake.GIB
    manager = world.manager(max_resident=1)
    resident = fake.make_profile("model-a")
    run(world, manager, resident, fake)
    huge = fake.make_profile("huge", estimated_gb=20)

    with pytest.raises(InsufficientMemoryError) as caught:
        run(world, manager, huge, fake, reserve_gb=0)

    assert caught.value.evicted_profiles == ()
    assert manager.state().resident_profiles == (resident.profile_id,)
    assert world.clock.sleeps == []
    assert world.freed == []


def test_host_memory_is_freed_before_evicting(world, fake):
    world.probe.total = 16 * fake.GIB
    world.probe.extra_used = 6 * fake.GIB
    manager = world.manager(max_resident=2)
    a, b = (
        fake.make_profile("model-a", estimated_gb=4),
        fake.make_profile("model-b", estimated_gb=4),
    )
    run(world, manager, a, fake, reserve_gb=2)  # 10 available before: fits
    world.log.events.clear()

    result = run(world, manager, b, fake, reserve_gb=4)  # 6 available, 8 needed

    required = 8 * fake.GIB
    assert world.log.events == [
        f"free:{required}",
        f"unload:{a.repository}",
        f"free:{required}",
        f"load:{b.repository}",
    ]
    assert result.metadata.to_dict()["evicted_profiles"] == [a.profile_id]
    assert manager.unsafe_for_reuse is False


def test_host_release_that_suffices_evicts_nothing(world, fake):
    world.probe.total = 16 * fake.GIB
    world.free_frees_gb = 6
    manager = world.manager(max_resident=2)
    a = fake.make_profile("model-a", estimated_gb=4)
    run(world, manager, a, fake, reserve_gb=0)
    world.probe.extra_used = 10 * fake.GIB  # ComfyUI loaded a diffusion model: 2 GiB left

    b = fake.make_profile("model-b", estimated_gb=4)
    result = run(world, manager, b, fake, reserve_gb=2)

    assert world.freed == [6 * fake.GIB]
    assert result.metadata.to_dict()["evicted_profiles"] == []
    assert manager.state().resident_profiles == (a.profile_id, b.profile_id)


def test_recovery_polls_until_memory_comes_back(world, fake):
    world.probe.total = 16 * fake.GIB
    manager = world.manager(max_resident=2, poll_interval_seconds=0.25)
    a = fake.make_profile("model-a", estimated_gb=8)
    run(world, manager, a, fake, reserve_gb=0)
    world.probe.release_at = world.clock.now + 2.0  # the driver frees lazily
    b = fake.make_profile("model-b", estimated_gb=10)

    result = run(world, manager, b, fake, reserve_gb=0, progress=world.record)

    assert world.clock.sleeps and set(world.clock.sleeps) == {0.25}
    assert sum(world.clock.sleeps) == pytest.approx(2.0)
    assert result.metadata.to_dict()["memory_wait_seconds"] == pytest.approx(2.0)
    assert result.metadata.to_dict()["evicted_profiles"] == [a.profile_id]
    assert manager.unsafe_for_reuse is False
    waits = [
        e for e in world.events if e.stage == ProgressStage.ADMISSION and "Waiting" in e.message
    ]
    assert len(waits) == len(world.clock.sleeps)


def test_recovery_timeout_after_eviction_marks_unsafe(world, fake):
    world.probe.total = 16 * fake.GIB
    manager = world.manager(max_resident=2, recovery_timeout_seconds=15, poll_interval_seconds=0.25)
    a = fake.make_profile("model-a", estimated_gb=8)
    run(world, manager, a, fake, reserve_gb=0)
    world.probe.leak = True  # unloaded memory never comes back
    b = fake.make_profile("model-b", estimated_gb=10)

    with pytest.raises(InsufficientMemoryError) as caught:
        run(world, manager, b, fake, reserve_gb=0)

    assert caught.value.recovery_timed_out is True
    assert caught.value.evicted_profiles == (a.profile_id,)
    assert caught.value.waited_seconds == pytest.approx(15.0)
    assert sum(world.clock.sleeps) == pytest.approx(15.0)
    assert max(world.clock.sleeps) <= 0.25
    assert "waiting 15.0 s" in str(caught.value)
    assert manager.unsafe_for_reuse is True
    state = manager.state()
    assert state.unsafe_for_reuse is True
    assert state.resident_profiles == ()
    assert state.last_evicted_profiles == (a.profile_id,)


def test_nothing_to_evict_refuses_at_once(world, fake):
    world.probe.total = 16 * fake.GIB
    world.probe.extra_used = 12 * fake.GIB
    manager = world.manager(recovery_timeout_seconds=15)

    with pytest.raises(InsufficientMemoryError) as caught:
        run(world, manager, fake.make_profile(estimated_gb=6), fake, reserve_gb=0)

    assert world.freed == [6 * fake.GIB]  # ComfyUI was still asked to free memory
    assert world.clock.sleeps == []  # nothing was evicted, so nothing to wait for
    assert caught.value.waited_seconds == 0.0
    assert caught.value.recovery_timed_out is False
    assert "waiting" not in str(caught.value)
    assert manager.unsafe_for_reuse is False


def test_no_wait_when_nothing_was_released(world, fake):
    world.probe.total = 16 * fake.GIB
    world.probe.extra_used = 12 * fake.GIB
    manager = world.manager(free_host_memory=None)

    with pytest.raises(InsufficientMemoryError):
        run(world, manager, fake.make_profile(estimated_gb=6), fake, reserve_gb=0)

    assert world.clock.sleeps == []


def test_cancel_while_waiting_for_memory(world, fake):
    world.probe.total = 16 * fake.GIB
    manager = world.manager(max_resident=2)
    run(world, manager, fake.make_profile("model-a", estimated_gb=8), fake, reserve_gb=0)
    world.probe.leak = True  # the evicted model's memory never comes back

    def progress(event):
        if event.stage == ProgressStage.ADMISSION and "Waiting" in event.message:
            raise fake.InterruptProcessingException()

    with pytest.raises(fake.InterruptProcessingException):
        run(
            world,
            manager,
            fake.make_profile("model-b", estimated_gb=10),
            fake,
            reserve_gb=0,
            progress=progress,
        )
    assert manager.state().busy is False


def test_reserve_defaults_from_environment(world, fake, monkeypatch):
    monkeypatch.setenv("COMFY_MODAL_LOCAL_LLM_RESERVE_FREE_GB", "1.5")
    result = run(world, world.manager(), fake.make_profile(), fake)
    assert result.metadata.to_dict()["reserve_bytes"] == int(1.5 * fake.GIB)


def test_invalid_reserve_is_refused(world, fake):
    from comfy_llm_core import InvalidSettingError

    with pytest.raises(InvalidSettingError, match="local_reserve_free_memory_gb"):
        run(world, world.manager(), fake.make_profile(), fake, reserve_gb=-1)


def test_insufficient_memory_error_pickles(world, fake):
    world.probe.total = 4 * fake.GIB
    with pytest.raises(InsufficientMemoryError) as caught:
        run(world, world.manager(), fake.make_profile(estimated_gb=8), fake)

    copy = pickle.loads(pickle.dumps(caught.value))
    assert type(copy) is InsufficientMemoryError
    assert str(copy) == str(caught.value)
    assert copy.needed_bytes == 8 * fake.GIB
    assert copy.total_bytes == 4 * fake.GIB
