"""The fan-out as safe as one request (review r2 findings 2, 7, 9, 12, 17), strict stand-in."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import ProgressEvent
from comfy_llm_modal_remote import (
    DeploymentConflictError,
    Dispatcher,
    RemoteCallCancelledError,
    caption_fan_out,
)
from comfy_llm_residency.backend import GenerationSettings
from comfy_llm_testworld import FakeHub, timed_gpu
from comfy_llm_testworld.modal_strict import StrictTransport

from .test_fanout import Recorder, _images, _job

pytestmark = pytest.mark.slow

FOREIGN = "f" * 64


def _noisy_images(folder: Path, count: int) -> list[Any]:
    """JPEGs that do not compress away: a chunk of two is far over the 8 KiB inline limit."""
    from comfy_llm_modal_remote import FanOutImage, encode_image_file
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    images = []
    for index in range(count):
        path = folder / f"noise{index:03d}.jpg"
        Image.effect_noise((256, 256), 80 + index).convert("RGB").save(path, quality=90)
        images.append(
            FanOutImage(index, path.name, lambda p=path, i=index: encode_image_file(p, index=i))
        )
    return images


def _fingerprint_of(call: Any) -> str:
    """The code of the deployment whose container ran the call (it may be gone by now)."""
    return str(call._transport.fingerprints[call.container.deployment])


def test_chunks_never_run_on_another_machines_code_the_fan_out_redeploys_once(
    model_hub: FakeHub, transport: StrictTransport, tmp_path: Path
) -> None:
    transport.ensure_ready(lambda event: None)
    transport.deploy_elsewhere(FOREIGN)  # a shared app name: the other machine deployed last
    recorder = Recorder()
    report = caption_fan_out(Dispatcher(transport), _job(), _images(tmp_path / "d", 4), recorder)
    assert recorder.captioned() == [0, 1, 2, 3]
    assert transport.deploys == 2  # this machine's code again, once
    calls = [(info, call) for kind, info, call in transport.calls if kind == "chunk"]
    mine = transport.expected_fingerprint()
    assert {info["request"]["code_fingerprint"] for info, _ in calls} == {mine}
    assert {_fingerprint_of(call) for _, call in calls} == {mine}
    assert report.chunks_retried == 0


def test_a_worker_refuses_a_chunk_from_other_code_and_the_job_redeploys_mid_run(
    model_hub: FakeHub, transport: StrictTransport, tmp_path: Path
) -> None:
    """Another machine deploys while the job runs (recreate kills its containers)."""
    recorder = Recorder()
    deployed: list[bool] = []

    def other_machine_deploys(event: ProgressEvent) -> None:
        if recorder.results and not deployed:
            deployed.append(True)
            transport.deploy_elsewhere(FOREIGN)

    job = _job(chunk_images=2, workers=1)
    caption_fan_out(
        Dispatcher(transport),
        job,
        _images(tmp_path / "d", 6),
        recorder,
        progress=other_machine_deploys,
    )
    assert deployed and recorder.captioned() == list(range(6))
    mine = transport.expected_fingerprint()
    chunk_calls = [call for kind, _, call in transport.calls if kind == "chunk"]
    answered = [c for c in chunk_calls if c.answer is not None and c.answer.get("ok")]
    assert {_fingerprint_of(c) for c in answered} == {mine}
    assert transport.deploys == 2


def test_the_same_foreign_code_back_after_a_redeploy_is_a_conflict_not_a_ping_pong(
    model_hub: FakeHub, transport: StrictTransport, tmp_path: Path
) -> None:
    dispatcher = Dispatcher(transport)
    transport.ensure_ready(lambda event: None)
    transport.deploy_elsewhere(FOREIGN)
    caption_fan_out(dispatcher, _job(), _images(tmp_path / "a", 2), Recorder())  # redeploys
    transport.deploy_elsewhere(FOREIGN)  # the other machine redeployed over this one
    with pytest.raises(DeploymentConflictError, match="COMFY_MODAL_APP_NAME") as raised:
        caption_fan_out(dispatcher, _job(), _images(tmp_path / "b", 2), Recorder())
    assert raised.value.deployed == FOREIGN
    assert transport.deploys == 2  # no third deploy stopping the other machine's containers


class _UploadGate:
    """The strict stand-in whose spawns hold in their upload until the gate opens."""

    def __init__(self, inner: StrictTransport) -> None:
        self.inner = inner
        self.gate = threading.Event()
        self.uploading = 0
        self.spawned: list[Any] = []
        self.lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def start_chunk(self, request: dict[str, Any], *, gpu: str, affinity_key: str) -> Any:
        with self.lock:
            self.uploading += 1
        self.gate.wait(120)  # the blob upload: tens of MB for a real chunk
        call = self.inner.start_chunk(request, gpu=gpu, affinity_key=affinity_key)
        with self.lock:
            self.uploading -= 1
            self.spawned.append(call)
        return call


def test_cancel_is_seen_while_eight_uploads_are_in_flight_and_each_late_call_is_cancelled(
    model_hub: FakeHub, transport: StrictTransport, tmp_path: Path
) -> None:
    class Interrupted(BaseException):
        pass

    gated = _UploadGate(transport)
    seen_uploading: list[int] = []

    def interrupt() -> None:
        if gated.uploading == 8:  # every worker is uploading its chunk
            seen_uploading.append(gated.uploading)
            raise Interrupted

    job = _job(workers=8, chunk_images=1)
    with pytest.raises(Interrupted):
        caption_fan_out(
            Dispatcher(gated),  # type: ignore[arg-type]
            job,
            _images(tmp_path / "d", 8),
            Recorder(),
            check_interrupt=interrupt,
        )
    assert seen_uploading == [8]  # the loop polled Cancel while all eight uploads ran
    assert gated.uploading == 8  # and returned before any of them finished
    gated.gate.set()
    for _ in range(600):
        if len(gated.spawned) == 8 and all(c.done() for c in gated.spawned):
            break
        threading.Event().wait(0.1)
    # A call whose spawn returned after Cancel is cancelled as soon as it exists.
    assert len(gated.spawned) == 8
    assert all(call.terminated or call._cancel_requested for call in gated.spawned)
    assert not [c for c in gated.spawned if c.answer is not None]


def test_gpu_seconds_are_the_workers_busy_time_not_uploads_or_the_loop(
    model_hub: FakeHub, make_transport: Any, tmp_path: Path
) -> None:
    transport = make_transport(
        backend_factory=timed_gpu.FACTORY,
        engine_env=timed_gpu.env(0.3, 0.0),
        upload_bytes_per_second=200_000.0,  # each chunk's upload holds its spawn ~0.5 s
    )
    images = _noisy_images(tmp_path / "d", 8)
    report = caption_fan_out(
        Dispatcher(transport), _job(workers=4, chunk_images=2), images, Recorder()
    )
    calls = [call for kind, _, call in transport.calls if kind == "chunk"]
    busy = sum(call.busy_seconds for call in calls)
    assert report.captioned == 8 and all(size > 8 * 1024 for size in transport.uploads[1:])
    assert report.gpu_seconds == pytest.approx(busy, rel=0.05)
    assert report.call_seconds >= report.gpu_seconds
    record = report.to_dict()
    assert record["modal_gpu_seconds"] == round(report.gpu_seconds, 3)


def test_a_call_cancelled_outside_comfyui_stops_the_job_with_one_line_and_is_not_retried(
    model_hub: FakeHub, make_transport: Any, tmp_path: Path
) -> None:
    from comfy_llm_testworld import gated_gpu

    gate = tmp_path / "gate"
    transport = make_transport(backend_factory=gated_gpu.FACTORY, engine_env=gated_gpu.env(gate))
    recorder = Recorder()

    def dashboard_cancels(event: ProgressEvent) -> None:  # the second chunk holds in the gate
        for kind, info, call in transport.calls:
            second = kind == "chunk" and info["request"]["chunk_id"] == 1
            if second and call.started.is_set() and not call._cancel_requested:
                call.cancel()

    job = _job(chunk_images=2, settings=GenerationSettings(temperature=0.0, max_new_tokens=8))
    try:
        with pytest.raises(RemoteCallCancelledError, match="outside ComfyUI"):
            caption_fan_out(
                Dispatcher(transport),
                job,
                _images(tmp_path / "d", 4),
                recorder,
                progress=dashboard_cancels,
            )
    finally:
        gated_gpu.open_gate(gate)
    chunk_calls = [info for kind, info, _ in transport.calls if kind == "chunk"]
    assert [info["request"]["attempt"] for info in chunk_calls] == [0, 0]  # never retried


def test_modal_workers_above_the_gpu_limit_are_said_before_any_spawn_and_capped(
    model_hub: FakeHub, transport: StrictTransport, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMFY_MODAL_GPU_LIMIT", "1")
    spawned_before: list[int] = []

    def watch(event: ProgressEvent) -> None:
        if "GPU limit" in event.message:
            spawned_before.append(len(transport.calls))

    report = caption_fan_out(
        Dispatcher(transport),
        _job(workers=2),
        _images(tmp_path / "d", 6),
        Recorder(),
        progress=watch,
    )
    assert spawned_before == [0]  # not even the stager yet
    record = report.to_dict()
    assert record["modal_workers"] == 2 and record["modal_workers_used"] == 1
    assert record["modal_gpu_limit"] == 1
    keys = {info["affinity_key"] for kind, info, _ in transport.calls if kind == "chunk"}
    assert keys == {"caption-h100-0"}


def test_caption_keys_are_one_container_each_with_every_option_spelled_out() -> None:
    """``with_options`` of the real client accepts them (modal/cls.py:736-754)."""
    from comfy_llm_modal_remote.client._transport import engine_options
    from comfy_llm_modal_remote.worker import _app

    caption = engine_options("H100!", caption=True)
    assert caption["max_containers"] == 1 and caption["scaledown_window"] == 60
    assert caption["cpu"] == 8.0 and caption["memory"] == 32 * 1024
    assert "max_containers" not in engine_options("L40S")
    _app.RemoteEngine.with_options(**caption)(affinity="caption-h100-0")
