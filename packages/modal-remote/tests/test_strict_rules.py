"""The stand-in's stricter rules (review r2 findings 18-26) and what the product does under them.

Each rule of the strict stand-in cites the modal 1.6.4 client (in its module);
each product test here failed on the code before this round, where it relied on
the kinder stand-in or on the raw client error.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import ProgressEvent
from comfy_llm_modal_remote import (
    Dispatcher,
    ModalUnavailableError,
    RemoteCallCancelledError,
    StageLeases,
    StageRequest,
    stage_model,
)
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld._modal_container import StrictVolume
from comfy_llm_testworld.modal_strict import StrictDict, StrictTransport

from .conftest import SCRIPTED
from .test_dispatch import _run

pytestmark = pytest.mark.slow


# -- Volumes: any process of the container, and its working directory (finding 18) --------
def _child(code: str, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    child = subprocess.Popen(
        [sys.executable, "-c", f"{code}\nprint('ready', flush=True)\nimport time; time.sleep(120)"],
        cwd=cwd,
        stdout=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
    return child


def _end(child: subprocess.Popen[bytes]) -> None:
    child.kill()
    child.wait()
    if child.stdout is not None:
        child.stdout.close()


def test_a_reload_is_refused_while_a_child_process_maps_a_file_or_sits_in_the_volume(
    tmp_path: Path,
) -> None:
    volume = StrictVolume(tmp_path / "store", tmp_path / "view")
    (volume.view / "weights.bin").write_bytes(b"\0" * 4096)
    weights = str(volume.view / "weights.bin")
    mapper = _child(
        f"import mmap; f = open({weights!r}, 'rb')\n"
        "m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ); f.close()"
    )
    try:
        with pytest.raises(RuntimeError, match=rf"in process {mapper.pid}"):
            volume.reload()
    finally:
        _end(mapper)
    volume.reload()  # nothing holds it now
    sitter = _child("pass", cwd=volume.view)
    try:
        with pytest.raises(RuntimeError, match="cwd of process"):
            volume.commit()
    finally:
        _end(sitter)


# -- Pools: every option of the variant (finding 19) ----------------------------------
def test_another_gpu_or_the_caption_variant_on_one_key_is_another_container(
    model_hub: FakeHub, transport: StrictTransport
) -> None:
    from comfy_llm_inputs import PreparedInputs
    from comfy_llm_modal_remote import StageResult
    from comfy_llm_modal_remote.wire._wire import EngineRequest, unwrap
    from comfy_llm_residency.backend import GenerationSettings

    staged = StageResult.from_wire(
        unwrap(transport.start_stage(StageRequest("s", SCRIPTED).to_wire()).outcome())
    )

    def generate(gpu: str) -> Any:
        request = EngineRequest(
            request_id=f"r-{gpu}",
            profile=staged.profile,
            snapshot=staged.snapshot,
            inputs=PreparedInputs.text("hi").to_wire(),
            settings=GenerationSettings(max_new_tokens=2).to_dict(),
            reserve_gb=0.0,
        )
        call = transport.start_generate(request.to_wire(), gpu=gpu, affinity_key="default")
        call.join()
        return call

    first, second, again = generate("L4"), generate("H100"), generate("L4")
    assert first.container is not second.container  # another variant: its own pool
    assert again.container is first.container  # the same variant: warm
    assert len({c.pid for c in (first.container, second.container)}) == 2


# -- Queue puts fail like the client's (findings 8, 21) ---------------------------------
def test_a_progress_put_that_fails_is_counted_and_the_request_goes_on(
    model_hub: FakeHub, transport: StrictTransport
) -> None:
    dispatcher = Dispatcher(transport)
    dispatcher.run(_run(SCRIPTED))  # staged and warm
    transport.queue.fail_puts(2, "ConnectionError")  # what put_many re-raises after retries
    result = dispatcher.run(_run(SCRIPTED))
    assert result.response.endswith("answer")
    assert result.metadata.to_dict()["modal_progress_events_dropped"] >= 1
    assert transport.queue.failed_puts == 2


# -- Dict RPCs fail like the client's (finding 23) --------------------------------------
def test_a_transient_dict_failure_does_not_fail_the_stage(
    model_hub: FakeHub, tmp_path: Path
) -> None:
    store = StrictDict.from_name("leases", root=tmp_path, create_if_missing=True)
    store.fail_next(2, "ConnectionError")
    volume = StrictVolume(tmp_path / "store", tmp_path / "view")
    staged = stage_model(
        StageRequest("r", SCRIPTED),
        storage_root=volume.view,
        volume=volume,
        leases=StageLeases(store, 60, 0.05),
        progress=lambda event: None,
    )
    assert staged.downloaded


# -- The lease's race (a): a holder that staged and released between reload and claim -----
class _StagesFirst:
    """B's lease store: just before B's first claim, installation A stages it all."""

    def __init__(self, store: StrictDict, first: Any) -> None:
        self.store, self.first, self.done = store, first, False

    def get(self, key: str, default: Any = None) -> Any:
        return self.store.get(key, default)

    def pop(self, key: str, default: Any = None) -> Any:
        return self.store.pop(key, default)

    def put(self, key: str, value: Any, *, skip_if_exists: bool = False) -> bool:
        if skip_if_exists and not self.done:
            self.done = True
            self.first()
        return self.store.put(key, value, skip_if_exists=skip_if_exists)


def test_a_snapshot_staged_between_the_first_reload_and_the_claim_is_not_downloaded_twice(
    model_hub: FakeHub, tmp_path: Path
) -> None:
    store = StrictDict.from_name("leases", root=tmp_path, create_if_missing=True)
    first = StrictVolume(tmp_path / "store", tmp_path / "first")
    second = StrictVolume(tmp_path / "store", tmp_path / "second")

    def first_installation_stages() -> None:
        stage_model(
            StageRequest("a", SCRIPTED),
            storage_root=first.view,
            volume=first,
            leases=StageLeases(store, 60, 5),
            progress=lambda event: None,
        )

    staged = stage_model(
        StageRequest("b", SCRIPTED),
        storage_root=second.view,
        volume=second,
        leases=StageLeases(_StagesFirst(store, first_installation_stages), 60, 5),
        progress=lambda event: None,
    )
    assert not staged.downloaded  # it reloaded after its claim and found it complete
    weights = [f for f in model_hub.file_requests() if f.endswith(".safetensors")]
    assert len(weights) == len(set(weights))  # every weight file fetched once


# -- Deploys fail; the app goes away; calls end cancelled (findings 5, 9, 22, 26) ----------
@pytest.mark.parametrize(
    ("raised", "missing", "fix"),
    [
        ("AuthError", "token", "modal token new"),
        ("ConnectionError", "network", "network connection"),
    ],
)
def test_a_refused_token_or_no_network_is_one_line_naming_the_fix(
    model_hub: FakeHub, transport: StrictTransport, raised: str, missing: str, fix: str
) -> None:
    import modal.exception

    transport.fail_deploys(getattr(modal.exception, raised)("UNAUTHENTICATED: token revoked"))
    with pytest.raises(ModalUnavailableError) as error:
        Dispatcher(transport).run(_run(SCRIPTED))
    assert error.value.missing == missing and fix in str(error.value)
    assert "\n" not in str(error.value)
    assert not [kind for kind, _, _ in transport.calls]  # nothing was spawned


def test_an_app_stopped_outside_comfyui_is_deployed_again_once(
    model_hub: FakeHub, transport: StrictTransport
) -> None:
    dispatcher = Dispatcher(transport)
    dispatcher.run(_run(SCRIPTED))
    transport.stop_outside()  # the Modal dashboard: this machine still thinks it is deployed
    result = dispatcher.run(_run(SCRIPTED))
    assert result.response.endswith("answer")
    assert transport.deploys == 2


def test_a_call_cancelled_outside_comfyui_is_one_line_not_an_empty_remote_error(
    model_hub: FakeHub, make_transport: Any, tmp_path: Path
) -> None:
    from comfy_llm_testworld import long_prefill

    transport = make_transport(
        backend_factory=long_prefill.FACTORY, engine_env={long_prefill.MARKER_ENV: "1"}
    )
    cancelled: list[bool] = []

    def dashboard(event: ProgressEvent) -> None:
        for kind, _, call in transport.calls:
            if kind == "generate" and call.started.is_set() and not cancelled:
                cancelled.append(True)
                call.cancel()

    with pytest.raises(RemoteCallCancelledError, match="stopped outside ComfyUI"):
        Dispatcher(transport).run(_run(SCRIPTED), progress=dashboard)


def test_a_cold_container_is_said_while_it_starts(model_hub: FakeHub, make_transport: Any) -> None:
    transport = make_transport(cold_start_seconds=1.0)
    events: list[ProgressEvent] = []
    Dispatcher(transport).run(_run(SCRIPTED, gpu="L40S"), progress=events.append)
    messages = [e.message for e in events]
    waiting = next(i for i, m in enumerate(messages) if m.startswith("Waiting for a L40S"))
    first_load = next(i for i, e in enumerate(events) if e.stage.value == "load" and i != waiting)
    assert waiting < first_load  # said before the container's own first event


# -- GPU types: fallback lists, a type the workspace cannot get (findings 13, 27) ----------
def test_a_gpu_fallback_list_moves_on_when_no_container_of_the_first_type_comes(
    model_hub: FakeHub, make_transport: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMFY_MODAL_GPU_WAIT_SECONDS", "10")
    transport = make_transport(unobtainable_gpus=("H100",))
    events: list[ProgressEvent] = []
    result = Dispatcher(transport).run(_run(SCRIPTED, gpu="H100,L40S"), progress=events.append)
    assert result.response.endswith("answer") and result.metadata.to_dict()["modal_gpu"] == "L40S"
    assert any("No H100 container on Modal within 10 s: trying L40S" in e.message for e in events)
    first = next(call for kind, info, call in transport.calls if info.get("gpu") == "H100")
    assert first.terminated  # the waiting H100 input was cancelled, not left queued


def test_a_gpu_type_the_workspace_cannot_get_is_one_line_naming_the_fix(
    model_hub: FakeHub, make_transport: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from comfy_llm_modal_remote import GPUUnavailableError

    monkeypatch.setenv("COMFY_MODAL_GPU_WAIT_SECONDS", "10")
    transport = make_transport(unobtainable_gpus=("B200",))
    with pytest.raises(GPUUnavailableError, match="fallback list") as raised:
        Dispatcher(transport).run(_run(SCRIPTED, gpu="B200"))
    assert "\n" not in str(raised.value)


def test_a_gpu_typo_is_refused_before_anything_is_staged(transport: StrictTransport) -> None:
    from comfy_llm_core import InvalidSettingError

    with pytest.raises(InvalidSettingError, match="H100,A100-80GB"):
        Dispatcher(transport).run(_run(SCRIPTED, gpu="H1000"))
    assert transport.calls == []
