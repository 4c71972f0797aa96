"""The RemoteEngine body with the tiny checkpoints through Transformers on the CPU.

Requests, events, answers and errors go through the strict stand-in: each
container is its own process with the image's environment only.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from comfy_llm_inputs import ImagePart, PreparedInputs
from comfy_llm_modal_remote import (
    EngineRequest,
    StageRequest,
    StageResult,
    WorkerUnsafeError,
)
from comfy_llm_modal_remote.wire._wire import unwrap
from comfy_llm_profiles import ModelProfile
from comfy_llm_residency.backend import GenerationSettings
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.modal_strict import GIB, FixedMemoryProbe, StrictTransport
from PIL import Image

from .conftest import OTHER, SCRIPTED

pytestmark = pytest.mark.slow
TIMING_KEYS = {
    "generation_seconds",
    "time_to_first_token_seconds",
    "tokens_per_second",
    "load_seconds",
    "modal_worker_seconds",
    "memory_wait_seconds",
}


def stage(transport: StrictTransport, reference: str = SCRIPTED) -> StageResult:
    call = transport.start_stage(StageRequest("s-" + reference, reference).to_wire())
    call.join()
    return StageResult.from_wire(unwrap(call.outcome()))


def engine_request(staged: StageResult, **changes: Any) -> dict[str, Any]:
    inputs = PreparedInputs.text("What is this?", ImagePart(Image.new("RGB", (24, 16), "red")))
    request = EngineRequest(
        request_id=changes.pop("request_id", "g1"),
        profile=staged.profile,
        snapshot=staged.snapshot,
        inputs=inputs.to_wire(),
        settings=GenerationSettings(temperature=0.0, max_new_tokens=16).to_dict(),
        reserve_gb=changes.pop("reserve_gb", 0.0),
        prompt_id="prompt-1",
        **changes,
    )
    return request.to_wire()


def drain(call: Any) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    while not call.done():
        events.extend(call.events(0.05))
    events.extend(call.events(0.0))
    return events


def test_events_in_order_and_the_same_answer_as_the_manager_in_process(
    model_hub: FakeHub, transport: StrictTransport
) -> None:
    container = transport.container("default")  # warm before the stager commits
    staged = stage(transport)
    assert container.state()["reloads"] == 0
    call = transport.start_generate(engine_request(staged), gpu="L4", affinity_key="default")
    events = drain(call)
    answer = unwrap(call.outcome())
    # The engine saw the freshly staged snapshot only after reloading its Volume view.
    assert container.state()["reloads"] == 1
    stages = [event["stage"] for event in events]
    order = [s for i, s in enumerate(stages) if i == 0 or stages[i - 1] != s]
    assert order == ["admission", "load", "generate", "done"]
    generated = [e for e in events if e["stage"] == "generate"]
    assert [e["value"] for e in generated] == sorted(e["value"] for e in generated)
    assert answer["response"].endswith("answer")  # SmolVLM has no reasoning parser
    metadata = answer["metadata"]
    assert metadata["execution_target"] == "modal"
    assert metadata["gpu_total_gib"] == 80.0
    assert metadata["gpu_free_before_gib"] == 80.0

    # The same request served by a manager in this process, without the wire.
    from comfy_llm_core import ExecutionTarget
    from comfy_llm_residency import ResidentModelManager, create_backend

    manager = ResidentModelManager(
        ExecutionTarget.MODAL, backend_factory=create_backend, memory_probe=FixedMemoryProbe()
    )
    direct = manager.run(
        ModelProfile.from_dict(staged.profile),
        transport.store / staged.snapshot,
        PreparedInputs.text("What is this?", ImagePart(Image.new("RGB", (24, 16), "red"))),
        GenerationSettings(temperature=0.0, max_new_tokens=16),
        reserve_gb=0.0,
        prompt_id="prompt-1",
    )
    assert (direct.response, direct.reasoning) == (answer["response"], answer["reasoning"])
    local = {k: v for k, v in direct.metadata.to_dict().items() if k not in TIMING_KEYS}
    remote = {k: v for k, v in metadata.items() if k in local and k not in TIMING_KEYS}
    assert remote == {k: v for k, v in local.items() if k != "requests_served"}


def test_cancel_mid_generation_keeps_the_worker_serving(
    model_hub: FakeHub, transport: StrictTransport
) -> None:
    from modal.exception import RemoteError

    staged = stage(transport)
    settings = GenerationSettings(temperature=0.7, seed=1, max_new_tokens=4000).to_dict()
    slow = engine_request(staged, request_id="long")
    slow["settings"] = settings
    call = transport.start_generate(slow, gpu="L4", affinity_key="default")
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + 120
    while not any(e["stage"] == "generate" for e in seen) and time.monotonic() < deadline:
        seen.extend(call.events(0.05))
    call.cancel()
    with pytest.raises(RemoteError, match=r"^$"):  # cancelled: TERMINATED
        call.outcome()
    assert call.terminated
    state = transport.container("default").state()
    assert len(state["resident_profiles"]) == 1 and state["busy"] is False
    # The next input on the same container runs at once, warm.
    again = transport.start_generate(
        engine_request(staged, request_id="next"), gpu="L4", affinity_key="default"
    )
    answer = unwrap(again.outcome())
    assert answer["metadata"]["cache_status"] == "warm"


def test_exhausted_memory_recovery_retires_the_worker(
    model_hub: FakeHub, make_transport: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMFY_MODAL_LLM_MAX_RESIDENT_MODELS", "1")
    monkeypatch.setenv("COMFY_MODAL_LLM_MEMORY_RECOVERY_TIMEOUT_SECONDS", "0.1")
    transport = make_transport(
        probe_for=lambda key: FixedMemoryProbe(total_bytes=8 * GIB, available_bytes=4 * GIB)
    )
    first, other = stage(transport), stage(transport, OTHER)
    warm = transport.start_generate(engine_request(first), gpu="L4", affinity_key="default")
    unwrap(warm.outcome())
    container = transport.container("default")
    promoted = {
        "version": 1,
        "promoted": True,
        "observed_workflow_count": 2,
        "prompt_ids": ["a", "b"],
    }
    container.import_promotion_state(promoted)
    # A second model evicts the first; the memory does not come back.
    call = transport.start_generate(
        engine_request(other, request_id="big", reserve_gb=3.0), gpu="L4", affinity_key="default"
    )
    with pytest.raises(WorkerUnsafeError) as raised:
        unwrap(call.outcome())
    assert raised.value.promotion_state["promoted"] is True
    assert "did not recover its memory" in str(raised.value)
    # The retired container's process ends after that input; the key starts anew.
    container.process.wait(30)
    assert container.stopped and container.process.returncode == 0
    fresh = transport.container("default")
    assert fresh.pid != container.pid and fresh.state()["resident_profiles"] == []


def test_a_snapshot_missing_from_the_volume_is_a_clear_error(
    model_hub: FakeHub, transport: StrictTransport
) -> None:
    from comfy_llm_modal_remote import SnapshotNotVisibleError

    staged = stage(transport)
    request = engine_request(staged)
    request["snapshot"] = staged.snapshot.replace(staged.profile["revision"], "0" * 40)
    call = transport.start_generate(request, gpu="L4", affinity_key="default")
    with pytest.raises(SnapshotNotVisibleError, match="COMFY_MODAL_VOLUME_NAME"):
        unwrap(call.outcome())
    assert transport.container("default").state()["reloads"] == 1
