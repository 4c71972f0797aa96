"""The process-global manager per target."""

from __future__ import annotations

import pickle

from comfy_llm_core import InvalidSettingError
from comfy_llm_residency import TargetMismatchError, get_manager, reset_managers
from comfy_llm_residency.backend import GenerationSettings


def test_one_manager_per_target(world, fake):
    first = get_manager("local_cpu", backend_factory=world.factory, memory_probe=world.probe)
    again = get_manager("local_cpu", backend_factory=lambda *a: None)
    other = get_manager("local_cuda", backend_factory=world.factory, memory_probe=world.probe)

    assert first is again
    assert other is not first
    assert other.target == "local_cuda"


def test_reset_managers_unloads_and_forgets(world, fake):
    manager = get_manager("local_cpu", backend_factory=world.factory, memory_probe=world.probe)
    profile = fake.make_profile()
    manager.run(profile, world.snapshot(profile), fake.make_inputs(), GenerationSettings())

    reset_managers()

    assert world.backend_for(profile).unload_calls == 1
    fresh = get_manager("local_cpu", backend_factory=world.factory, memory_probe=world.probe)
    assert fresh is not manager


def test_errors_pickle_with_attributes():
    mismatch = TargetMismatchError("hf-x", "modal", "local_cpu")
    copy = pickle.loads(pickle.dumps(mismatch))
    assert str(copy) == str(mismatch)
    assert copy.manager_target == "local_cpu"
    config = pickle.loads(pickle.dumps(InvalidSettingError("X", "bad", "a number")))
    assert config.name == "X"
