"""The dispatcher on the strict stand-in (process containers): stage, prepare, generate, retry."""

from __future__ import annotations

from typing import Any

import pytest
from comfy_llm_core import ProgressEvent
from comfy_llm_inputs import PreparedInputs
from comfy_llm_modal_remote import Dispatcher, RemoteRun
from comfy_llm_profiles import ModelProfile
from comfy_llm_profiles.errors import ModelNotFoundError
from comfy_llm_residency.backend import GenerationSettings
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.modal_strict import GIB, FixedMemoryProbe, StrictTransport

from .conftest import OTHER, SCRIPTED

pytestmark = pytest.mark.slow


def _run(model: str, prepared: list[ModelProfile] | None = None, **changes: Any) -> RemoteRun:
    def prepare(profile: ModelProfile) -> PreparedInputs:
        if prepared is not None:
            prepared.append(profile)
        return PreparedInputs.text("hi")

    values: dict[str, Any] = {
        "model": model,
        "prepare": prepare,
        "settings": GenerationSettings(temperature=0.0, max_new_tokens=16),
        "gpu": "H100",
        "reserve_gb": 0.0,
        "prompt_id": "p1",
    }
    values.update(changes)
    return RemoteRun(**values)


def test_stage_then_generate_with_modal_telemetry(
    model_hub: FakeHub, transport: StrictTransport
) -> None:
    events: list[ProgressEvent] = []
    profiles: list[ModelProfile] = []
    result = Dispatcher(transport).run(_run(SCRIPTED, profiles), progress=events.append)
    assert result.response.endswith("answer")
    # Inputs were prepared with the modal profile the stager resolved.
    assert [p.execution_target.value for p in profiles] == ["modal"]
    stages = [e.stage.value for e in events]
    assert stages.index("download") < stages.index("load") < stages.index("done")
    metadata = result.metadata.to_dict()
    assert metadata["modal_gpu"] == "H100"
    assert metadata["modal_app_name"] == "comfy-llm-test"
    assert metadata["modal_affinity_key"] == "default"
    assert metadata["modal_retry_count"] == 0
    assert metadata["modal_staging_downloaded"] is True
    assert metadata["modal_remote_seconds"] >= metadata["modal_transfer_seconds"] >= 0
    assert {"gpu_total_gib", "gpu_free_before_gib", "gpu_free_after_gib"} <= set(metadata)
    # What the container reserves and bills beside the GPU (review r2 finding 14).
    assert metadata["modal_reserved_cpu"] == 8.0 and metadata["modal_reserved_memory_mb"] == 32768
    assert metadata["modal_idle_window_seconds"] == 600
    assert [(kind, info.get("gpu")) for kind, info, _ in transport.calls] == [
        ("stage", None),
        ("generate", "H100"),
    ]
    dispatcher = Dispatcher(transport)
    again = dispatcher.run(_run(SCRIPTED))
    assert again.metadata.to_dict()["modal_staging_downloaded"] is False
    assert (
        again.metadata.to_dict()["modal_stage_reused"] is False
    )  # a new dispatcher asks the stager
    assert again.metadata.to_dict()["cache_status"] == "warm"
    # The same dispatcher reuses its staging answer: one Modal call per warm request.
    third = dispatcher.run(_run(SCRIPTED))
    assert third.metadata.to_dict()["modal_stage_reused"] is True
    assert [kind for kind, _, _ in transport.calls] == [
        "stage",
        "generate",
        "stage",
        "generate",
        "generate",
    ]


def test_a_remote_error_keeps_its_class_and_message(
    model_hub: FakeHub, transport: StrictTransport
) -> None:
    profiles: list[ModelProfile] = []
    with pytest.raises(ModelNotFoundError, match="tiny/missing") as raised:
        Dispatcher(transport).run(_run("tiny/missing", profiles))
    assert type(raised.value) is ModelNotFoundError and vars(raised.value)
    assert profiles == []  # nothing was prepared, no GPU call was made
    assert [kind for kind, _, _ in transport.calls] == ["stage"]


def test_unsafe_worker_is_retried_once_on_a_fresh_key_with_its_promotion_state(
    model_hub: FakeHub, make_transport: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMFY_MODAL_LLM_MAX_RESIDENT_MODELS", "1")
    monkeypatch.setenv("COMFY_MODAL_LLM_MEMORY_RECOVERY_TIMEOUT_SECONDS", "0.1")

    def probe(key: str) -> FixedMemoryProbe:
        # The first worker leaks (memory never comes back); a fresh one is clean.
        available = 4 * GIB if key == "default" else 40 * GIB
        return FixedMemoryProbe(total_bytes=48 * GIB, available_bytes=available)

    transport = make_transport(probe_for=probe)
    dispatcher = Dispatcher(transport)
    dispatcher.run(_run(SCRIPTED))
    # As if auto promotion had happened there (the vLLM backend's state format).
    promoted = {
        "version": 1,
        "promoted": True,
        "observed_workflow_count": 2,
        "prompt_ids": ["a", "b"],
    }
    transport.container("default").import_promotion_state(promoted)

    result = dispatcher.run(_run(OTHER, reserve_gb=3.0))
    assert result.metadata.to_dict()["modal_retry_count"] == 1
    fresh_key = result.metadata.to_dict()["modal_affinity_key"]
    assert fresh_key.startswith("retry-") and fresh_key != "default"
    assert transport.pool("default").stopped
    assert transport.pool(fresh_key).state()["promotion_state"] == promoted
    # Later runs go to the promoted, warm retry container, not back to "default".
    later = dispatcher.run(_run(OTHER, reserve_gb=3.0))
    assert later.metadata.to_dict()["modal_affinity_key"] == fresh_key
    assert (
        later.metadata.to_dict()["cache_status"] == "warm"
        and later.metadata.to_dict()["modal_retry_count"] == 0
    )
    generate_keys = [
        info["affinity_key"] for kind, info, _ in transport.calls if kind == "generate"
    ]
    assert generate_keys == ["default", "default", fresh_key, fresh_key]


def test_the_retry_happens_once_and_its_own_error_surfaces(
    model_hub: FakeHub, make_transport: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from comfy_llm_residency import InsufficientMemoryError

    monkeypatch.setenv("COMFY_MODAL_LLM_MAX_RESIDENT_MODELS", "1")
    # The fixed probe never gives memory back, so the wait can only time out:
    # no wait at all keeps the outcome free of the box's timing.
    monkeypatch.setenv("COMFY_MODAL_LLM_MEMORY_RECOVERY_TIMEOUT_SECONDS", "0")
    transport = make_transport(
        probe_for=lambda key: FixedMemoryProbe(total_bytes=8 * GIB, available_bytes=4 * GIB)
    )
    dispatcher = Dispatcher(transport)
    dispatcher.run(_run(SCRIPTED))
    # The fresh worker cannot fit the request either (nothing to evict there).
    with pytest.raises(InsufficientMemoryError) as raised:
        dispatcher.run(_run(OTHER, reserve_gb=3.0))
    assert not raised.value.recovery_timed_out and not raised.value.evicted_profiles
    keys = [info["affinity_key"] for kind, info, _ in transport.calls if kind == "generate"]
    assert keys[:2] == ["default", "default"] and len(keys) == 3
    assert keys[2].startswith("retry-") and transport.pool("default").stopped


def test_cancel_from_the_node_cancels_the_remote_call(
    model_hub: FakeHub, transport: StrictTransport
) -> None:
    class Interrupted(BaseException):
        pass

    seen: list[str] = []

    def progress(event: ProgressEvent) -> None:
        seen.append(event.stage.value)
        if event.stage.value == "generate":
            raise Interrupted

    run = _run(SCRIPTED, settings=GenerationSettings(temperature=0.7, seed=3, max_new_tokens=4000))
    with pytest.raises(Interrupted):
        Dispatcher(transport).run(run, progress=progress)
    _, _, call = transport.calls[-1]
    call.join()

    assert call.terminated
    assert transport.container("default").state()["busy"] is False
