"""The typed run metadata: the manager's sections, one flat form, read back unchanged."""

from __future__ import annotations

import dataclasses
import json

import pytest
from comfy_llm_residency import EmptyAnswer, HostFacts, RunMetadata, StagingFacts
from comfy_llm_residency._run_metadata import MANAGER_KEYS
from comfy_llm_residency.backend import GenerationSettings


def _run(world, fake, settings=None):
    manager = world.manager()
    profile = fake.make_profile()
    settings = settings or GenerationSettings(max_new_tokens=32)
    return manager.run(
        profile, world.snapshot(profile), fake.make_inputs(), settings, prompt_id="p-1"
    )


def test_the_manager_writes_exactly_its_keys_then_the_engines(world, fake):
    metadata = _run(world, fake).metadata
    flat = metadata.to_dict()
    details = dict(metadata.engine.details)
    assert set(flat) == MANAGER_KEYS | set(details)
    assert list(flat)[-len(details) :] == list(details)  # the engine's, after the manager's
    assert details == {"engine": "fake-engine", "engine_version": "0.0.1", "dtype": "bfloat16"}
    assert flat["device"] == "fake0"  # the engine's device wins over the memory probe's


def test_the_flat_form_reads_back_to_the_same_record_in_the_same_order(world, fake):
    schema = '{"type": "object", "required": ["n"]}'
    settings = GenerationSettings(max_new_tokens=32, response_schema=schema)
    metadata = _run(world, fake, settings).metadata.replace(
        staging=StagingFacts(True, False, "hub", "/models/x", False),
        host=HostFacts(("sdxl",), EmptyAnswer("budget", 32, 32, "raise max_new_tokens.")),
    )
    flat = metadata.to_dict()
    again = RunMetadata.from_dict(json.loads(json.dumps(flat)))
    assert again == metadata
    assert list(again.to_dict()) == list(flat)
    assert flat["schema_valid"] is False and "schema_problem" in flat
    assert flat["empty_answer"] == {
        "reason": "budget",
        "output_tokens": 32,
        "max_new_tokens": 32,
        "message": "raise max_new_tokens.",
    }


def test_a_schema_without_a_problem_and_a_note_without_words_leave_their_keys_out(world, fake):
    metadata = _run(world, fake).metadata
    assert metadata.schema is None and "schema_valid" not in metadata.to_dict()
    noted = metadata.replace(host=HostFacts((), EmptyAnswer("no_text", 0, 32)))
    assert noted.to_dict()["empty_answer"] == {
        "reason": "no_text",
        "output_tokens": 0,
        "max_new_tokens": 32,
    }
    assert noted.to_dict()["comfyui_managed_models"] == []


def test_a_flat_form_without_a_manager_key_is_refused(world, fake):
    flat = _run(world, fake).metadata.to_dict()
    del flat["cache_status"]
    with pytest.raises(ValueError, match="cache_status"):
        RunMetadata.from_dict(flat)


def test_sections_are_frozen(world, fake):
    metadata = _run(world, fake).metadata
    with pytest.raises(dataclasses.FrozenInstanceError):
        metadata.generation.output_tokens = 1  # type: ignore[misc]
