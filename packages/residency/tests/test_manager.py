"""The manager's request path: warm hits, LRU, keep_loaded, targets, snapshots, reasoning."""

from __future__ import annotations

import json

import pytest
from comfy_llm_core import ProgressStage
from comfy_llm_residency import (
    InferenceResult,
    ReentrantCallError,
    ResidencyError,
    TargetMismatchError,
)
from comfy_llm_residency.backend import GenerationSettings
from comfy_llm_staging import MARKER_FILENAME, IncompleteSnapshotError

SETTINGS = GenerationSettings(max_new_tokens=32, temperature=0.0)


def run(world, manager, profile, fake, **kwargs):
    return manager.run(profile, world.snapshot(profile), fake.make_inputs(), SETTINGS, **kwargs)


def test_second_request_is_a_warm_hit_without_reload(world, fake):
    manager = world.manager()
    profile = fake.make_profile()

    first = run(world, manager, profile, fake)
    second = run(world, manager, profile, fake)

    assert world.log.events == [f"load:{profile.repository}"]
    assert first.metadata.to_dict()["cache_status"] == "cold"
    assert second.metadata.to_dict()["cache_status"] == "warm"
    assert second.metadata.to_dict()["load_seconds"] == 0.0
    assert world.backend_for(profile).generate_calls == 2
    assert manager.state().resident_profiles == (profile.profile_id,)
    assert manager.state().last_cache_status == "warm"
    assert manager.state().requests_served == 2


def test_result_and_metadata(world, fake):
    manager = world.manager()
    profile = fake.make_profile()

    result = run(world, manager, profile, fake, prompt_id="prompt-1")

    assert isinstance(result, InferenceResult)
    assert result.response == "answer"
    assert result.reasoning == "a b"
    meta = result.metadata.to_dict()
    json.dumps(meta, allow_nan=False)
    assert meta["execution_target"] == "local_cpu"
    assert meta["device"] == "fake0"
    assert meta["backend"] == "transformers"
    assert meta["profile_id"] == profile.profile_id
    assert meta["repository"] == profile.repository
    assert meta["revision"] == profile.revision
    assert meta["reasoning_enabled"] is True
    assert meta["reasoning_parser"] == "qwen3"
    assert meta["reasoning_truncated"] is False
    assert meta["output_tokens"] == 6
    assert meta["reasoning_tokens"] == 2
    assert meta["finish_reason"] == "stop"
    assert meta["prompt_tokens"] == 12
    assert meta["image_count"] == 1
    assert meta["video_frame_count"] == 0
    assert meta["file_count"] == 0
    assert meta["resident_profiles"] == [profile.profile_id]
    assert meta["unsafe_for_reuse"] is False
    assert meta["prompt_id"] == "prompt-1"
    assert meta["engine_version"] == "0.0.1"
    assert meta["reserve_bytes"] == 4 * fake.GIB
    assert meta["measured_allocation_bytes"] == profile.estimated_memory_bytes
    assert meta["total_memory_bytes"] == 32 * fake.GIB
    assert meta["available_memory_bytes"] == 30 * fake.GIB
    assert meta["available_memory_gb"] == 30.0
    for key in ("time_to_first_token_seconds", "tokens_per_second", "generation_seconds"):
        assert key in meta
    assert meta["generation_settings"]["max_new_tokens"] == 32


def test_metadata_never_carries_secrets(world, fake):
    result = run(world, world.manager(), fake.make_profile(), fake)

    text = json.dumps(result.metadata.to_dict())
    assert "hf_token" not in result.metadata.to_dict()
    assert "api_key" not in result.metadata.to_dict()
    assert "hf_abcdefghijklmnopqrstuvwxyz" not in text
    assert "sk-should-never-appear" not in text


def test_limit_of_one_evicts_the_older_profile(world, fake):
    manager = world.manager(max_resident=1)
    older, newer = fake.make_profile("model-a"), fake.make_profile("model-b")

    run(world, manager, older, fake)
    result = run(world, manager, newer, fake)

    assert world.backend_for(older).unload_calls == 1
    assert world.backend_for(newer).unload_calls == 0
    assert manager.state().resident_profiles == (newer.profile_id,)
    assert result.metadata.to_dict()["evicted_profiles"] == [older.profile_id]
    assert result.metadata.to_dict()["resident_profiles"] == [newer.profile_id]
    assert world.probe.clear_cache_calls >= 1
    assert world.log.events == [
        f"load:{older.repository}",
        f"unload:{older.repository}",
        f"load:{newer.repository}",
    ]


def test_lru_order_evicts_the_least_recently_used(world, fake):
    manager = world.manager(max_resident=2)
    a, b, c = (fake.make_profile(n) for n in ("model-a", "model-b", "model-c"))

    run(world, manager, a, fake)
    run(world, manager, b, fake)
    run(world, manager, a, fake)  # warm: a becomes most recent
    assert manager.state().resident_profiles == (b.profile_id, a.profile_id)
    run(world, manager, c, fake)

    assert manager.state().resident_profiles == (a.profile_id, c.profile_id)
    assert world.backend_for(b).unload_calls == 1
    assert world.backend_for(a).unload_calls == 0


def test_keep_loaded_false_unloads_after_the_request(world, fake):
    manager = world.manager()
    profile = fake.make_profile()

    result = run(world, manager, profile, fake, keep_loaded=False)

    assert result.response == "answer"
    assert world.backend_for(profile).unload_calls == 1
    assert manager.state().resident_profiles == ()
    assert result.metadata.to_dict()["resident_profiles"] == []
    assert result.metadata.to_dict()["keep_model_loaded"] is False
    again = run(world, manager, profile, fake)
    assert again.metadata.to_dict()["cache_status"] == "cold"


def test_keep_loaded_false_unloads_a_warm_model_too(world, fake):
    manager = world.manager()
    profile = fake.make_profile()
    run(world, manager, profile, fake)

    result = run(world, manager, profile, fake, keep_loaded=False)

    assert result.metadata.to_dict()["cache_status"] == "warm"
    assert world.backend_for(profile).unload_calls == 1
    assert manager.state().resident_profiles == ()


def test_generation_error_keeps_model_unless_keep_loaded_false(world, fake):
    manager = world.manager()
    profile = fake.make_profile()
    world.generate_error = RuntimeError("engine exploded")

    with pytest.raises(RuntimeError, match="engine exploded"):
        run(world, manager, profile, fake)
    assert manager.state().resident_profiles == (profile.profile_id,)

    with pytest.raises(RuntimeError, match="engine exploded"):
        run(world, manager, profile, fake, keep_loaded=False)
    assert manager.state().resident_profiles == ()
    assert world.backend_for(profile).unload_calls == 1
    assert manager.state().busy is False


def test_profile_of_another_target_is_refused(world, fake):
    manager = world.manager("local_cpu")
    remote = fake.make_profile(target="modal")

    with pytest.raises(TargetMismatchError) as caught:
        run(world, manager, remote, fake)

    assert isinstance(caught.value, ValueError)
    message = str(caught.value)
    assert "'modal'" in message and "'local_cpu'" in message
    assert "re-resolve" in message
    assert caught.value.profile_id == remote.profile_id
    assert world.log.events == []


def test_apple_profile_refused_by_cuda_manager(world, fake):
    manager = world.manager("local_cuda")
    with pytest.raises(TargetMismatchError):
        run(world, manager, fake.make_profile(target="local_apple"), fake)


@pytest.mark.parametrize("kind", ["missing", "empty", "no-marker"])
def test_incomplete_snapshot_is_refused(world, fake, tmp_path, kind):
    manager = world.manager(max_resident=1)
    resident = fake.make_profile("model-a")
    run(world, manager, resident, fake)
    profile = fake.make_profile("model-b")
    path = tmp_path / "partial"
    if kind != "missing":
        path.mkdir()
    if kind == "no-marker":
        (path / "config.json").write_text("{}", encoding="utf-8")

    with pytest.raises(IncompleteSnapshotError):
        manager.run(profile, path, fake.make_inputs(), SETTINGS)

    assert world.log.events == [f"load:{resident.repository}"]  # nothing evicted or loaded
    assert manager.state().resident_profiles == (resident.profile_id,)


def test_warm_hit_does_not_reread_the_snapshot(world, fake, tmp_path):
    manager = world.manager()
    profile = fake.make_profile()
    path = world.snapshot(profile)
    manager.run(profile, path, fake.make_inputs(), SETTINGS)
    (path / MARKER_FILENAME).unlink()

    result = manager.run(profile, path, fake.make_inputs(), SETTINGS)

    assert result.metadata.to_dict()["cache_status"] == "warm"


def test_reasoning_disabled_gives_empty_reasoning(world, fake):
    manager = world.manager()
    world.script = (fake.ANSWER, fake.IM_END)
    settings = GenerationSettings(max_new_tokens=32, enable_reasoning=False)
    profile = fake.make_profile()

    result = manager.run(profile, world.snapshot(profile), fake.make_inputs(), settings)

    assert result.response == "answer"
    assert result.reasoning == ""
    assert result.metadata.to_dict()["reasoning_enabled"] is False
    assert result.metadata.to_dict()["reasoning_tokens"] == 0
    assert result.metadata.to_dict()["output_tokens"] == 2


def test_reasoning_truncated_by_length(world, fake):
    manager = world.manager()
    profile = fake.make_profile()
    settings = GenerationSettings(max_new_tokens=3)

    result = manager.run(profile, world.snapshot(profile), fake.make_inputs(), settings)

    assert result.response == ""
    assert result.reasoning == "a b"
    assert result.metadata.to_dict()["reasoning_truncated"] is True
    assert result.metadata.to_dict()["finish_reason"] == "length"
    assert result.metadata.to_dict()["output_tokens"] == 3


def test_progress_events_in_order(world, fake):
    manager = world.manager()
    profile = fake.make_profile()

    run(world, manager, profile, fake, progress=world.record)
    stages = [event.stage for event in world.events]

    assert stages[0] == ProgressStage.ADMISSION
    assert stages.count(ProgressStage.LOAD) == 2
    generate = [event for event in world.events if event.stage == ProgressStage.GENERATE]
    assert [event.value for event in generate] == [1, 2, 3, 4, 5, 6]
    assert {event.maximum for event in generate} == {32}
    assert {event.unit for event in generate} == {"tokens"}
    assert [event.token_id for event in generate] == list(fake.SCRIPTED)
    assert generate[-1].text == "<think> a b</think> answer"
    assert generate[0].time_to_first_token_seconds is not None
    assert stages[-1] == ProgressStage.DONE
    assert world.events[-1].value == 6
    load_done = [event for event in world.events if event.stage == ProgressStage.LOAD][-1]
    assert load_done.elapsed_seconds is not None
    assert all(
        event.indeterminate
        for event in world.events
        if event.stage in (ProgressStage.ADMISSION, ProgressStage.LOAD)
    )

    world.events.clear()
    run(world, manager, profile, fake, progress=world.record)
    warm_stages = [event.stage for event in world.events]
    assert ProgressStage.ADMISSION not in warm_stages
    assert warm_stages[0] == ProgressStage.LOAD


def test_on_token_receives_ids_and_text(world, fake):
    seen = []
    run(
        world,
        world.manager(),
        fake.make_profile(),
        fake,
        on_token=lambda token_id, text: seen.append((token_id, text)),
    )
    assert [token_id for token_id, _ in seen] == list(fake.SCRIPTED)
    assert seen[1] == (fake.A, "<think> a")


def test_load_failure_leaves_nothing_resident(world, fake):
    manager = world.manager()
    profile = fake.make_profile()
    world.load_error = OSError("corrupt safetensors")

    with pytest.raises(OSError, match="corrupt"):
        run(world, manager, profile, fake)

    assert manager.state().resident_profiles == ()
    assert manager.state().busy is False
    assert world.probe.clear_cache_calls == 1
    world.load_error = None
    assert run(world, manager, profile, fake).metadata.to_dict()["cache_status"] == "cold"


def test_unload_failure_marks_unsafe_and_forgets_the_model(world, fake):
    manager = world.manager(max_resident=1)
    a, b = fake.make_profile("model-a"), fake.make_profile("model-b")
    run(world, manager, a, fake)
    world.unload_error = RuntimeError("driver error")

    result = run(world, manager, b, fake)

    assert manager.unsafe_for_reuse is True
    assert result.metadata.to_dict()["unsafe_for_reuse"] is True
    assert manager.state().resident_profiles == (b.profile_id,)


def test_reentrant_call_is_refused(world, fake):
    manager = world.manager()
    profile = fake.make_profile()
    path = world.snapshot(profile)

    def reenter(token_id, text):
        manager.run(profile, path, fake.make_inputs(), SETTINGS)

    with pytest.raises(ReentrantCallError):
        manager.run(profile, path, fake.make_inputs(), SETTINGS, on_token=reenter)
    assert manager.state().busy is False
    assert issubclass(ReentrantCallError, ResidencyError)


def test_unload_all(world, fake):
    manager = world.manager(max_resident=3)
    profiles = [fake.make_profile(n) for n in ("model-a", "model-b")]
    for profile in profiles:
        run(world, manager, profile, fake)

    manager.unload_all()

    assert manager.state().resident_profiles == ()
    assert all(world.backend_for(p).unload_calls == 1 for p in profiles)


def test_state_is_json_ready(world, fake):
    manager = world.manager()
    run(world, manager, fake.make_profile(), fake)
    state = manager.state().to_dict()
    json.dumps(state)
    assert state["target"] == "local_cpu"
    assert state["max_resident"] == 1
    assert state["last_cache_status"] == "cold"
    assert state["last_measured_allocation_bytes"] == 2 * fake.GIB


def test_same_identity_with_another_display_name_is_warm(world, fake):
    import dataclasses

    manager = world.manager()
    profile = fake.make_profile()
    renamed = dataclasses.replace(profile, display_name="Friendly name", requested_revision="main")
    assert renamed.profile_id == profile.profile_id

    run(world, manager, profile, fake)
    result = run(world, manager, renamed, fake)

    assert result.metadata.to_dict()["cache_status"] == "warm"
    assert world.log.events == [f"load:{profile.repository}"]


def test_failing_probe_after_generation_keeps_the_answer(world, fake):
    manager = world.manager()
    profile = fake.make_profile()
    run(world, manager, profile, fake)

    def broken():
        raise RuntimeError("probe gone")

    world.probe.snapshot = broken
    result = run(world, manager, profile, fake)

    assert result.response == "answer"
    assert result.metadata.to_dict()["memory_device"] == "unknown"


def test_input_counts_in_metadata(world, fake):
    manager = world.manager()
    profile = fake.make_profile()
    inputs = fake.make_inputs(images=3, files=("notes.txt", "paper.pdf"))

    result = manager.run(profile, world.snapshot(profile), inputs, SETTINGS)

    assert result.metadata.to_dict()["image_count"] == 3
    assert result.metadata.to_dict()["video_frame_count"] == 0
    assert result.metadata.to_dict()["file_count"] == 2
