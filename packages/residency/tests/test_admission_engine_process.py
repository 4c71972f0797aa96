"""Admission for an engine in another process (vLLM), and the reading the factory sees."""

from __future__ import annotations

import dataclasses

import pytest
from comfy_llm_residency import InsufficientMemoryError, MemorySnapshot, admitted_memory
from comfy_llm_residency.backend import GenerationSettings

SETTINGS = GenerationSettings(max_new_tokens=8)


def _with_cache(probe, cached: int):
    """Give the fake probe this process's cached-but-unused memory, as CudaMemoryProbe sees it.

    ``snapshot()`` counts the cache as room (a load in this process can reuse
    it); ``snapshot_for_other_process()`` reads the driver's free memory only.
    """
    plain = probe.snapshot

    def snapshot() -> MemorySnapshot:
        reading = plain()
        return MemorySnapshot(reading.available_bytes + cached, reading.total_bytes, reading.device)

    probe.snapshot = snapshot
    probe.snapshot_for_other_process = plain
    return probe


def _vllm(profile):
    return dataclasses.replace(profile, backend="vllm", profile_id="")


def test_an_engine_process_is_not_admitted_into_this_process_cache(world, fake):
    # 24 GiB card, 16 GiB used (4 of them this process's reusable cache): 8 free to the driver.
    world.probe.total = 24 * fake.GIB
    world.probe.extra_used = 16 * fake.GIB
    _with_cache(world.probe, 4 * fake.GIB)
    manager = world.manager("local_cuda", recovery_timeout_seconds=0)
    in_process = fake.make_profile("in-process", target="local_cuda", estimated_gb=9)
    manager.run(in_process, world.snapshot(in_process), fake.make_inputs(), SETTINGS, reserve_gb=1)
    assert world.freed == []  # 8 free + 4 reusable: fits in this process
    manager.unload_all()

    engine = _vllm(fake.make_profile("engine", target="local_cuda", estimated_gb=9))
    with pytest.raises(InsufficientMemoryError) as caught:
        manager.run(engine, world.snapshot(engine), fake.make_inputs(), SETTINGS, reserve_gb=1)
    assert world.freed == [10 * fake.GIB]  # the host was asked: the cache is no room for it
    assert caught.value.available_bytes == 8 * fake.GIB


def test_the_factory_sees_the_reading_that_admitted_it(world, fake):
    world.probe.total = 24 * fake.GIB
    world.probe.extra_used = 8 * fake.GIB
    _with_cache(world.probe, 2 * fake.GIB)
    seen: list[MemorySnapshot | None] = []
    factory = world.factory

    def recording(profile, path, progress):
        seen.append(admitted_memory())
        return factory(profile, path, progress)

    manager = world.manager("local_cuda", backend_factory=recording)
    engine = _vllm(fake.make_profile("engine", target="local_cuda", estimated_gb=9))
    manager.run(engine, world.snapshot(engine), fake.make_inputs(), SETTINGS, reserve_gb=1)
    assert seen == [MemorySnapshot(16 * fake.GIB, 24 * fake.GIB, "fake0")]
    assert admitted_memory() is None  # only while the factory runs
