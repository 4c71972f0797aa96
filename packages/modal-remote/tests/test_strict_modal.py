"""What breaks only on Modal, on the strict stand-in: cancel by signal, Volume views,
queue limits, overlapping stagers, redeploys. Each test failed on the code before its fix."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_inputs import PreparedInputs
from comfy_llm_modal_remote import Dispatcher, EngineRequest, RemoteRun, StageRequest, StageResult
from comfy_llm_modal_remote.wire._wire import unwrap
from comfy_llm_profiles import ModelProfile
from comfy_llm_residency.backend import GenerationSettings
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.modal_strict import StrictTransport

from .conftest import OTHER, SCRIPTED

pytestmark = pytest.mark.slow


def _stage(transport: StrictTransport, reference: str = SCRIPTED) -> StageResult:
    call = transport.start_stage(
        StageRequest("s-" + reference.replace("/", "-"), reference).to_wire()
    )
    return StageResult.from_wire(unwrap(call.outcome()))


def _request(staged: StageResult, request_id: str, max_new_tokens: int = 16) -> dict[str, Any]:
    return EngineRequest(
        request_id=request_id,
        profile=staged.profile,
        snapshot=staged.snapshot,
        inputs=PreparedInputs.text("What is this?").to_wire(),
        settings=GenerationSettings(
            temperature=0.7, seed=1, max_new_tokens=max_new_tokens
        ).to_dict(),
        reserve_gb=0.0,
    ).to_wire()


def _wait_for(call: Any, stage: str, seconds: float = 180) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + seconds
    while not any(e["stage"] == stage for e in seen):
        assert time.monotonic() < deadline and not call.done(), [e["stage"] for e in seen]
        seen.extend(call.events(0.02))
    return seen


def _run(model: str, **changes: Any) -> RemoteRun:
    values: dict[str, Any] = {
        "model": model,
        "prepare": lambda profile: PreparedInputs.text("hi"),
        "settings": GenerationSettings(temperature=0.0, max_new_tokens=8),
        "gpu": "L4",
        "reserve_gb": 0.0,
    }
    values.update(changes)
    return RemoteRun(**values)


def test_a_cancel_during_a_cold_load_leaves_the_model_owned_and_the_next_request_warm(
    model_hub: FakeHub, transport: StrictTransport
) -> None:
    """SIGUSR1 lands while the engine loads (a fresh process imports and builds the model)."""
    from modal.exception import RemoteError

    staged = _stage(transport)
    call = transport.start_generate(_request(staged, "cold"), gpu="L4", affinity_key="default")
    _wait_for(call, "load")
    call.cancel()
    with pytest.raises(RemoteError, match=r"^$"):  # cancelled: TERMINATED
        call.outcome()
    assert call.terminated
    state = transport.container("default").state()
    # The load finished and the manager owns it: no engine without an owner.
    assert state["resident_profiles"] == [staged.profile["profile_id"]] and state["busy"] is False
    again = transport.start_generate(_request(staged, "next"), gpu="L4", affinity_key="default")
    assert unwrap(again.outcome())["metadata"]["cache_status"] == "warm"


def test_a_cancel_during_prefill_frees_the_worker_and_the_next_request_is_warm(
    model_hub: FakeHub, make_transport: Any
) -> None:
    """SIGUSR1 lands after admission and load, before the first token."""
    from comfy_llm_testworld import long_prefill
    from modal.exception import RemoteError

    transport = make_transport(
        backend_factory=long_prefill.FACTORY, engine_env={long_prefill.MARKER_ENV: "1"}
    )
    staged = _stage(transport)
    call = transport.start_generate(_request(staged, "prefill"), gpu="L4", affinity_key="default")
    marker = transport.container("default").volume_view.parent / "in-prefill"  # its HOME
    deadline = time.monotonic() + 180
    while not marker.exists():
        assert time.monotonic() < deadline and not call.done()
        time.sleep(0.02)
    events = call.events(0.0)
    assert not [e for e in events if e["stage"] == "generate" and e.get("value")]  # no token yet
    call.cancel()
    with pytest.raises(RemoteError, match=r"^$"):  # cancelled: TERMINATED
        call.outcome()
    assert call.terminated
    state = transport.container("default").state()
    assert state["resident_profiles"] == [staged.profile["profile_id"]] and state["busy"] is False
    again = transport.start_generate(_request(staged, "next"), gpu="L4", affinity_key="default")
    answer = unwrap(again.outcome())
    assert answer["metadata"]["cache_status"] == "warm" and answer["response"]
    assert transport.container("default").pid == state["pid"]


def test_a_cancel_during_staging_stops_it_and_the_next_stage_completes(
    model_hub: FakeHub, transport: StrictTransport
) -> None:
    from modal.exception import RemoteError

    call = transport.start_stage(StageRequest("s1", SCRIPTED).to_wire())
    _wait_for(call, "download")
    call.cancel()
    with pytest.raises(RemoteError, match=r"^$"):  # cancelled: TERMINATED
        call.outcome()
    assert call.terminated
    started = time.monotonic()
    staged = _stage(transport)
    assert staged.snapshot and time.monotonic() - started < 60


def test_a_full_progress_partition_never_blocks_the_gpu(
    model_hub: FakeHub, transport: StrictTransport
) -> None:
    """Nobody drains the partition (ComfyUI went away): the request still finishes."""
    staged = _stage(transport)
    transport.queue.max_items = 3
    call = transport.start_generate(
        _request(staged, "undrained", max_new_tokens=64), gpu="L4", affinity_key="default"
    )
    call.join(300)
    assert call.done(), "a put blocked on the full partition"
    metadata = unwrap(call.outcome())["metadata"]
    assert metadata["modal_progress_events_dropped"] > 0
    assert transport.queue.partition_size("undrained")[0] == 3


def test_partitions_expire_after_their_ttl(model_hub: FakeHub, transport: StrictTransport) -> None:
    staged = _stage(transport)
    transport.queue.ttl_cap_seconds = 0.5
    call = transport.start_generate(_request(staged, "ttl"), gpu="L4", affinity_key="default")
    call.join(300)
    time.sleep(1.0)
    assert transport.queue.partition_size("ttl") == (0, 0)


def test_a_reload_refused_for_open_files_retires_and_the_retry_serves(
    model_hub: FakeHub, transport: StrictTransport
) -> None:
    """Volume.reload() fails while files under the mount are open (volume.py:917)."""
    dispatcher = Dispatcher(transport)
    first = dispatcher.run(_run(SCRIPTED))
    assert first.metadata.to_dict()["modal_affinity_key"] == "default"
    staged = _stage(transport)
    transport.container("default").hold_open(f"{staged.snapshot}/config.json")
    # A model the warm container has never seen: its view needs a reload.
    result = dispatcher.run(_run(OTHER))
    assert result.metadata.to_dict()["modal_retry_count"] == 1
    assert result.metadata.to_dict()["modal_affinity_key"].startswith("retry-")
    assert transport.pool("default").stopped


def test_two_overlapping_stages_download_one_snapshot_once(
    model_hub: FakeHub, transport: StrictTransport
) -> None:
    """The stager's one container (max_containers=1) serializes them."""
    results: list[StageResult] = []
    threads = [threading.Thread(target=lambda: results.append(_stage(transport))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert len(results) == 2 and results[0].snapshot == results[1].snapshot
    assert sorted(r.downloaded for r in results) == [False, True]
    weights = [f for f in model_hub.file_requests() if f.endswith(".safetensors")]
    assert len(weights) == len(set(weights))


def test_a_redeploy_while_comfyui_runs_recreates_and_other_code_is_redeployed(
    model_hub: FakeHub, transport: StrictTransport
) -> None:
    dispatcher = Dispatcher(transport)
    dispatcher.run(_run(SCRIPTED))
    old = transport.container("default")
    transport.redeploy(strategy="recreate")
    old.process.wait(30)  # recreate: no old-version container takes another input
    result = dispatcher.run(_run(SCRIPTED))
    assert result.metadata.to_dict()["cache_status"] == "cold"
    assert transport.container("default").pid != old.pid
    # Another machine deploys other code under the same app name: the stager
    # echoes that fingerprint, so this dispatcher deploys its own again.
    deploys = transport.deploys
    transport.deploy_elsewhere("0" * 64)
    again = dispatcher.run(_run(SCRIPTED))
    assert transport.deploys == deploys + 1
    assert again.response


def test_a_rolling_deploy_lets_the_running_input_finish(
    model_hub: FakeHub, transport: StrictTransport
) -> None:
    staged = _stage(transport)
    call = transport.start_generate(
        _request(staged, "long", max_new_tokens=200), gpu="L4", affinity_key="default"
    )
    _wait_for(call, "generate")
    transport.redeploy(strategy="rolling")
    assert unwrap(call.outcome())["response"] is not None
    assert transport.container("default").pid != call.container.pid  # type: ignore[union-attr]


def test_a_container_sees_only_the_image_environment(
    model_hub: FakeHub, transport: StrictTransport, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOMETHING_ONLY_HERE", "1")
    monkeypatch.setenv("COMFY_MODAL_LLM_MAX_RESIDENT_MODELS", "1")
    transport.ensure_ready(lambda event: None)
    first = transport.container("default").state()
    env = first["env"]
    assert "SOMETHING_ONLY_HERE" not in env and "HF_ENDPOINT" not in env
    assert env["COMFY_MODAL_LLM_MAX_RESIDENT_MODELS"] == "1"
    assert env["COMFY_MODAL_LLM_CODE_FINGERPRINT"] == transport.expected_fingerprint()
    # Forked from one preloaded zygote, each container is still its own process
    # with its own disk: its own pid, HOME and compile-cache mount, nothing else.
    second = transport.container("other").state()
    assert second["pid"] != first["pid"]
    assert second["env"]["HOME"] != env["HOME"]
    own = {"HOME", "COMFY_MODAL_LLM_COMPILE_CACHE_ROOT"}
    assert {k: v for k, v in second["env"].items() if k not in own} == {
        k: v for k, v in env.items() if k not in own
    }


def test_a_failed_compile_cache_commit_is_reported(tmp_path: Path) -> None:
    from comfy_llm_modal_remote import EngineService
    from comfy_llm_testworld._modal_container import StrictVolume

    cache = StrictVolume(tmp_path / "store", tmp_path / "view")
    (cache.view / "triton").mkdir()
    launcher = cache.view / "triton" / "launcher.so"
    launcher.write_bytes(b"\0")
    service = EngineService(
        storage_root=tmp_path / "weights", volume=cache, container=_NoControl(), compile_cache=cache
    )
    with launcher.open("rb"):  # Triton dlopens its launcher from the cache
        service.commit_compile_cache()
    assert service.last_compile_cache_commit is not None
    assert service.last_compile_cache_commit.startswith("failed: RuntimeError")
    service.commit_compile_cache()
    assert service.last_compile_cache_commit == "ok"


class _NoControl:
    def stop_fetching_inputs(self) -> None:
        return None


def test_profile_round_trip_for_typing() -> None:
    assert ModelProfile  # imported for the request helpers' types


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie waits for init to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in {"Z", "X"}


@pytest.mark.parametrize("how", ["kill", "scaledown"])
def test_a_container_that_ends_takes_the_processes_it_started_with_it(
    transport: StrictTransport, how: str
) -> None:
    # A Modal container ends whole. vLLM's EngineCore is such a child: left
    # running, each one held ~2 GiB of the test box after its container died.
    container = transport.container("default")
    child = int(container.command("start_child"))
    assert _running(child)
    getattr(transport, how)("default")
    deadline = time.monotonic() + 60
    while _running(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(child)
