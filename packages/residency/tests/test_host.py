"""Host eviction: the host (ComfyUI) sees every resident and may ask for it back."""

from __future__ import annotations

import threading

from comfy_llm_residency import HostListener, ResidentInfo
from comfy_llm_residency.backend import GenerationSettings

SETTINGS = GenerationSettings(max_new_tokens=16)


class Listener:
    def __init__(self) -> None:
        self.loaded: list[ResidentInfo] = []
        self.unloaded: list[tuple[str, bool]] = []

    def resident_loaded(self, info: ResidentInfo) -> None:
        self.loaded.append(info)

    def resident_unloaded(self, profile_id: str, *, by_host: bool) -> None:
        self.unloaded.append((profile_id, by_host))


class MeteredProbe:
    """The fake probe plus a per-process allocation meter that sees half the load."""

    def __init__(self, probe) -> None:
        self._probe = probe

    def snapshot(self):
        return self._probe.snapshot()

    def clear_cache(self) -> None:
        self._probe.clear_cache()

    def allocated_bytes(self) -> int:
        return 100 + sum(self._probe.held.values()) // 2


def test_listener_sees_loads_and_the_managers_own_unloads(world, fake):
    listener = Listener()
    assert isinstance(listener, HostListener)
    manager = world.manager(max_resident=1, host_listener=listener)
    first, second = fake.make_profile("a"), fake.make_profile("b")
    manager.run(first, world.snapshot(first), fake.make_inputs(), SETTINGS)
    manager.run(second, world.snapshot(second), fake.make_inputs(), SETTINGS)
    assert [info.profile_id for info in listener.loaded] == [first.profile_id, second.profile_id]
    assert listener.loaded[0].repository == first.repository
    assert listener.loaded[0].backend == "transformers"
    assert listener.loaded[0].device == "fake0"
    assert listener.unloaded == [(first.profile_id, False)]
    manager.unload_all()
    assert listener.unloaded[-1] == (second.profile_id, False)


def test_reported_size_is_the_process_allocation_delta_not_the_estimate(world, fake):
    probe = MeteredProbe(world.probe)
    listener = Listener()
    manager = world.manager(memory_probe=probe, host_listener=listener)
    profile = fake.make_profile(estimated_gb=2.0)
    result = manager.run(profile, world.snapshot(profile), fake.make_inputs(), SETTINGS)
    # The meter sees half of what the device loses: the meter wins.
    assert listener.loaded[0].resident_bytes == fake.GIB
    assert result.metadata.to_dict()["measured_allocation_bytes"] == fake.GIB


def test_host_eviction_unloads_an_idle_model_and_the_reload_says_so(world, fake):
    listener = Listener()
    manager = world.manager(host_listener=listener)
    profile = fake.make_profile()
    path = world.snapshot(profile)
    first = manager.run(profile, path, fake.make_inputs(), SETTINGS)
    assert first.metadata.to_dict()["evicted_by_host"] is False
    assert first.metadata.to_dict()["host_eviction_reason"] is None

    assert manager.evict_for_host(profile.profile_id, "the host unloaded all models") is True
    state = manager.state()
    assert state.resident_profiles == ()
    assert state.host_evicted_profiles == (profile.profile_id,)
    assert state.busy is False
    assert listener.unloaded == [(profile.profile_id, True)]
    assert world.backend_for(profile).unload_calls == 1
    assert world.probe.clear_cache_calls >= 1

    again = manager.run(profile, path, fake.make_inputs(), SETTINGS)
    assert again.metadata.to_dict()["cache_status"] == "cold"
    assert again.metadata.to_dict()["evicted_by_host"] is True
    assert again.metadata.to_dict()["host_eviction_reason"] == "the host unloaded all models"
    assert manager.state().host_evicted_profiles == ()
    warm = manager.run(profile, path, fake.make_inputs(), SETTINGS)
    assert warm.metadata.to_dict()["cache_status"] == "warm"
    assert warm.metadata.to_dict()["evicted_by_host"] is False
    # Evicting what is not resident is a no-op the host may drop its entry for.
    assert manager.evict_for_host("hf-not-resident", "x") is True


def test_host_eviction_is_declined_mid_generation(world, fake):
    manager = world.manager(host_listener=Listener())
    profile = fake.make_profile()
    path = world.snapshot(profile)
    answers: list[bool] = []
    generating = threading.Event()
    asked = threading.Event()

    def on_token(token_id: int, text: str) -> None:
        if not generating.is_set():
            generating.set()
            assert asked.wait(10)

    def host() -> None:
        assert generating.wait(10)
        answers.append(manager.evict_for_host(profile.profile_id, "room for a diffusion model"))
        asked.set()

    thread = threading.Thread(target=host)
    thread.start()
    result = manager.run(profile, path, fake.make_inputs(), SETTINGS, on_token=on_token)
    thread.join(10)
    assert answers == [False]
    assert result.response == "answer"
    assert manager.state().resident_profiles == (profile.profile_id,)
    assert world.backend_for(profile).unload_calls == 0
    # Asked from inside the manager's own request (its admission asking the host
    # to free memory): declined too, never a deadlock.
    inside: list[bool] = []
    manager.run(
        profile,
        path,
        fake.make_inputs(),
        SETTINGS,
        on_token=lambda *_: inside.append(manager.evict_for_host(profile.profile_id, "x")),
    )
    assert inside and not any(inside)
    # Once idle, the same request succeeds.
    assert manager.evict_for_host(profile.profile_id, "room for a diffusion model") is True
