"""Captioning across N workers through the stand-in: chunks, retry, Cancel, cost record."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import ProgressEvent
from comfy_llm_modal_remote import (
    ChunkResult,
    Dispatcher,
    FanOutImage,
    FanOutJob,
    caption_fan_out,
    encode_image_file,
)
from comfy_llm_residency.backend import GenerationSettings
from comfy_llm_testworld import FakeHub, gated_gpu
from comfy_llm_testworld.modal_strict import StrictTransport
from PIL import Image

from .conftest import SCRIPTED

pytestmark = pytest.mark.slow


class Recorder:
    """The collector: what a caption writer would receive, in arrival order."""

    def __init__(self) -> None:
        self.results: list[ChunkResult] = []
        self.failures: list[tuple[list[int], str]] = []
        self.lock = threading.Lock()

    def captions(self, result: ChunkResult) -> None:
        with self.lock:
            self.results.append(result)

    def failed(self, indices: Sequence[int], message: str) -> None:
        self.failures.append((list(indices), message))

    def captioned(self) -> list[int]:
        return sorted(c.index for r in self.results for c in r.captions if c.error is None)


def _images(folder: Path, count: int, size: int = 48) -> list[FanOutImage]:
    folder.mkdir(parents=True, exist_ok=True)
    images = []
    for index in range(count):
        path = folder / f"img{index:03d}.jpg"
        Image.new("RGB", (size, size), (index * 7 % 255, 90, 160)).save(path, quality=90)
        images.append(
            FanOutImage(index, path.name, lambda p=path, i=index: encode_image_file(p, index=i))
        )
    return images


def _job(**changes: Any) -> FanOutJob:
    values: dict[str, Any] = {
        "model": SCRIPTED,
        "prompt": "Describe this image.",
        "system_prompt": None,
        "settings": GenerationSettings(temperature=0.0, max_new_tokens=4),
        "gpu": "H100",
        "workers": 2,
        "chunk_images": 3,
        "batch_size": 3,
        "reserve_gb": 0.0,
    }
    values.update(changes)
    return FanOutJob(**values)


def test_every_image_is_captioned_once_across_two_workers_with_the_cost_on_record(
    model_hub: FakeHub, transport: StrictTransport, tmp_path: Path
) -> None:
    images = _images(tmp_path / "data", 7)
    recorder = Recorder()
    events: list[ProgressEvent] = []
    report = caption_fan_out(
        Dispatcher(transport), _job(), images, recorder, progress=events.append
    )
    assert recorder.captioned() == list(range(7))
    assert all(c.response for r in recorder.results for c in r.captions)
    chunk_calls = [info for kind, info, _ in transport.calls if kind == "chunk"]
    assert len(chunk_calls) == 3  # 3 + 3 + 1 images
    assert {info["affinity_key"] for info in chunk_calls} == {"caption-h100-0", "caption-h100-1"}
    assert {info["gpu"] for info in chunk_calls} == {"H100"}
    # One staging before any GPU call.
    assert next(kind for kind, _, _ in transport.calls) == "stage"
    record = report.to_dict()
    assert record["modal_app_name"] == "comfy-llm-test" and record["modal_gpu"] == "H100"
    assert record["modal_chunks"] == 3 and record["modal_chunks_retried"] == 0
    assert record["modal_gpu_seconds"] >= record["modal_worker_seconds"] > 0
    assert record["modal_images_per_gpu_second"] > 0
    assert record["modal_failed_chunks"] == []
    assert record["modal_idle_tail_gpu_seconds_max"] == 2 * 60  # two workers, a minute each
    assert record["modal_idle_window_seconds"] == 60 and record["modal_reserved_cpu"] == 8.0
    # A small JPEG that fits is sent as its own bytes.
    sizes = [p.stat().st_size for p in sorted((tmp_path / "data").iterdir())]
    assert record["modal_bytes_sent"] == sum(sizes)
    # One bar: images done out of the total, ending full, with each worker's state.
    bars = [e for e in events if e.unit == "images"]
    assert bars[-1].value == bars[-1].maximum == 7
    assert [e.value for e in bars] == sorted(e.value for e in bars)
    assert "w1:" in bars[-1].message and "w2:" in bars[-1].message


def test_a_worker_killed_mid_chunk_has_its_chunk_redone_once_on_another_container(
    model_hub: FakeHub, transport: StrictTransport, tmp_path: Path
) -> None:
    images = _images(tmp_path / "data", 6)
    recorder = Recorder()
    killed: list[str] = []

    def kill_first_busy_worker(event: ProgressEvent) -> None:
        if killed:
            return
        for kind, info, call in transport.calls:  # mid-chunk: its input is running
            if kind == "chunk" and call.started.is_set() and not call.done():
                killed.append(info["affinity_key"])
                transport.kill(info["affinity_key"])
                return

    job = _job(settings=GenerationSettings(temperature=0.0, max_new_tokens=64))
    report = caption_fan_out(
        Dispatcher(transport), job, images, recorder, progress=kill_first_busy_worker
    )
    assert killed
    assert recorder.captioned() == list(range(6))  # nothing lost
    returned = [c.index for r in recorder.results for c in r.captions]
    assert sorted(returned) == list(range(6))  # nothing written twice
    assert report.chunks_retried == 1 and report.failed_chunks == []
    chunk_calls = [
        (info["affinity_key"], info["request"]) for k, info, _ in transport.calls if k == "chunk"
    ]
    retried = [req for _, req in chunk_calls if req["attempt"] == 1]
    assert len(retried) == 1
    retry_key = next(key for key, req in chunk_calls if req["attempt"] == 1)
    assert retry_key != killed[0]  # another container


def test_a_chunk_that_fails_twice_is_named_and_the_rest_continue(
    model_hub: FakeHub, transport: StrictTransport, tmp_path: Path
) -> None:
    images = _images(tmp_path / "data", 6)
    recorder = Recorder()

    def kill_chunk_zero(event: ProgressEvent) -> None:
        for kind, info, call in transport.calls:
            chunk_zero = kind == "chunk" and info["request"]["chunk_id"] == 0
            if chunk_zero and call.started.is_set() and not call.done():
                transport.kill(info["affinity_key"])

    job = _job(settings=GenerationSettings(temperature=0.0, max_new_tokens=64))
    report = caption_fan_out(Dispatcher(transport), job, images, recorder, progress=kill_chunk_zero)
    assert recorder.captioned() == [3, 4, 5]
    assert recorder.failures and recorder.failures[0][0] == [0, 1, 2]
    assert report.chunks_retried == 1
    [failed] = report.failed_chunks
    assert failed["chunk"] == 0 and failed["images"] == ["img000.jpg", "img001.jpg", "img002.jpg"]
    assert "RemoteError" in failed["error"]
    assert report.to_dict()["modal_failed_chunks"][0]["chunk"] == 0


def test_cancel_cancels_every_call_in_flight_and_keeps_what_returned(
    model_hub: FakeHub, make_transport: Any, tmp_path: Path
) -> None:

    class Interrupted(BaseException):
        pass

    # Only the first chunk runs; the other worker's holds until the gate opens, so it
    # is still in flight when Cancel comes (equal chunks could both finish first).
    # The worker holds a cancel that lands right after its cold load until the
    # engine's next event (the shield of review finding 6): the held call's
    # "no token yet" is that event, and the call ends with the cancellation.
    gate = tmp_path / "gate"
    transport = make_transport(backend_factory=gated_gpu.FACTORY, engine_env=gated_gpu.env(gate))
    images = _images(tmp_path / "data", 12)
    recorder = Recorder()

    def interrupt() -> None:
        if recorder.results:
            raise Interrupted

    job = _job(settings=GenerationSettings(temperature=0.0, max_new_tokens=64), chunk_images=2)
    try:
        with pytest.raises(Interrupted):
            caption_fan_out(Dispatcher(transport), job, images, recorder, check_interrupt=interrupt)
    finally:
        gated_gpu.open_gate(gate)
    calls = [call for kind, _, call in transport.calls if kind == "chunk"]
    for call in calls:
        call.join()
    assert len(calls) == 2  # one per worker; no new chunk was sent after Cancel
    cancelled = [call for call in calls if call.terminated]
    assert len(cancelled) == 1  # the other worker's call was cancelled, not left running
    assert len(recorder.results) == 1


def test_a_fitting_jpeg_goes_as_its_own_bytes_a_larger_image_is_reduced(tmp_path: Path) -> None:
    from comfy_llm_inputs import ImageInputError
    from comfy_llm_modal_remote import WIRE_IMAGE_SIDE

    small = tmp_path / "small.jpg"
    Image.new("RGB", (640, 480), (1, 2, 3)).save(small, quality=85)
    sent = encode_image_file(small, index=0)
    assert sent.original and sent.data == small.read_bytes()

    large = tmp_path / "large.png"
    Image.new("RGB", (4000, 2000), (9, 9, 9)).save(large)
    reduced = encode_image_file(large, index=1)
    assert not reduced.original
    assert (reduced.width, reduced.height) == (WIRE_IMAGE_SIDE, WIRE_IMAGE_SIDE // 2)
    assert reduced.data[:3] == b"\xff\xd8\xff"  # JPEG, never the PNG original

    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"\xff\xd8\xff not really")
    with pytest.raises(ImageInputError, match=r"broken\.jpg"):
        encode_image_file(broken, index=2)


def test_an_image_the_worker_cannot_decode_is_that_images_error_the_chunk_goes_on(
    model_hub: FakeHub, transport: StrictTransport, tmp_path: Path
) -> None:
    from comfy_llm_modal_remote import ChunkImage

    images = _images(tmp_path / "data", 3)
    good = images[1].encode()
    # Bytes that claim another size than they hold (damaged on the way): refused there.
    images[1] = FanOutImage(1, "img001.jpg", lambda: ChunkImage(1, "img001.jpg", good.data, 9, 9))
    recorder = Recorder()
    report = caption_fan_out(Dispatcher(transport), _job(), images, recorder)
    assert recorder.captioned() == [0, 2]
    [result] = recorder.results
    assert result.captions[1].error is not None and "img001.jpg" in result.captions[1].error
    assert report.captioned == 2 and report.failed_images == 1 and report.chunks_retried == 0


def test_a_worker_that_retired_itself_hands_its_chunk_and_promotion_to_another(
    model_hub: FakeHub, transport: StrictTransport, tmp_path: Path
) -> None:
    images = _images(tmp_path / "data", 6)
    promoted = {"version": 1, "promoted": True, "observed_workflow_count": 2, "prompt_ids": []}
    retired = transport.container("caption-h100-0")
    retired.import_promotion_state(promoted)
    retired.mark_unsafe()  # as after a failed memory recovery (WorkerUnsafeError next time)
    recorder = Recorder()
    report = caption_fan_out(Dispatcher(transport), _job(), images, recorder)
    assert recorder.captioned() == list(range(6))
    assert report.chunks_retried == 1 and report.failed_chunks == []
    chunk_calls = [info for kind, info, _ in transport.calls if kind == "chunk"]
    [retry] = [info for info in chunk_calls if info["request"]["attempt"] == 1]
    assert retry["affinity_key"] != "caption-h100-0"
    assert retry["request"]["promotion_state"] == promoted
    # The retired container is never handed another chunk.
    later = chunk_calls[chunk_calls.index(retry) :]
    assert all(info["affinity_key"] != "caption-h100-0" for info in later)


def test_the_timed_gpu_service_times_reach_engine_containers_only_when_carried(
    model_hub: FakeHub, make_transport: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from comfy_llm_testworld import timed_gpu

    # Set here, they stay here: a container sees the image's environment only.
    monkeypatch.setenv(timed_gpu.BATCH_SECONDS_ENV, "9.0")
    plain = make_transport().container("caption-h100-0").state()["env"]
    assert timed_gpu.BATCH_SECONDS_ENV not in plain
    carried = make_transport(backend_factory=timed_gpu.FACTORY, engine_env=timed_gpu.env(0.25, 0.5))
    env = carried.container("caption-h100-0").state()["env"]
    assert env[timed_gpu.BATCH_SECONDS_ENV] == "0.25"
    assert env[timed_gpu.IMAGE_TOKEN_SECONDS_ENV] == "0.5"
    with pytest.raises(ValueError, match="batch_seconds"):
        timed_gpu.env(-1.0, 0.1)


class _AnswerOnItsWay:
    """A chunk call whose answer is on its way when Cancel comes.

    ``ModalTransport``'s call is ``done()`` only once its ``FunctionCall.get``
    returned, a network round trip after the container answered; here that
    moment is held until the call is cancelled, so the container has answered
    but the dispatcher's last ``done()`` still said no. Everything else is the
    strict stand-in's call.
    """

    def __init__(self, call: Any) -> None:
        self.call = call
        self.cancelled = False

    def events(self, timeout: float) -> list[dict[str, Any]]:
        return list(self.call.events(timeout))

    def done(self) -> bool:
        return self.cancelled and bool(self.call.done())

    def outcome(self) -> dict[str, Any]:
        return dict(self.call.outcome())

    def cancel(self) -> None:
        self.cancelled = True
        self.call.cancel()


class _LateTransport:
    """The strict stand-in, with chunk ``late``'s answer arriving late."""

    def __init__(self, inner: StrictTransport, late: int) -> None:
        self.inner, self.late = inner, late
        self.held: list[_AnswerOnItsWay] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def start_chunk(self, request: dict[str, Any], *, gpu: str, affinity_key: str) -> Any:
        call = self.inner.start_chunk(request, gpu=gpu, affinity_key=affinity_key)
        if request["chunk_id"] != self.late:
            return call
        self.held.append(_AnswerOnItsWay(call))
        return self.held[-1]


def test_cancel_writes_a_chunk_whose_answer_came_after_the_last_done_check(
    model_hub: FakeHub, transport: StrictTransport, tmp_path: Path
) -> None:
    class Interrupted(BaseException):
        pass

    images = _images(tmp_path / "data", 4)
    recorder = Recorder()
    late = _LateTransport(transport, late=1)

    def interrupt() -> None:
        # Cancel once chunk 0 is written and chunk 1's container has answered.
        if recorder.results:
            late.held[0].call.join()
            raise Interrupted

    job = _job(chunk_images=2)
    with pytest.raises(Interrupted):
        caption_fan_out(
            Dispatcher(late),  # type: ignore[arg-type]
            job,
            images,
            recorder,
            check_interrupt=interrupt,
        )
    assert late.held and late.held[0].cancelled
    assert late.held[0].call.raised is None  # it had answered: nothing to cancel
    assert recorder.captioned() == [0, 1, 2, 3]  # paid for and written, not lost
    assert sorted(r.chunk_id for r in recorder.results) == [0, 1]


def test_a_cancel_during_a_chunks_cold_load_leaves_the_model_owned_and_the_next_chunk_warm(
    model_hub: FakeHub, transport: StrictTransport, tmp_path: Path
) -> None:
    """Cancel in the first seconds of a fan-out lands in every worker's cold load."""
    from comfy_llm_modal_remote import StageRequest, StageResult
    from comfy_llm_modal_remote.wire._chunk_wire import ChunkRequest
    from comfy_llm_modal_remote.wire._wire import unwrap
    from modal.exception import RemoteError

    stage = transport.start_stage(StageRequest("s-chunk", SCRIPTED).to_wire())
    staged = StageResult.from_wire(unwrap(stage.outcome()))
    images = tuple(image.encode() for image in _images(tmp_path / "data", 2))

    def chunk(number: int) -> dict[str, Any]:
        return ChunkRequest(
            request_id=f"chunk-{number}",
            chunk_id=number,
            attempt=0,
            profile=staged.profile,
            snapshot=staged.snapshot,
            prompt="Describe this image.",
            system_prompt=None,
            settings=GenerationSettings(temperature=0.0, max_new_tokens=4).to_dict(),
            images=images,
            batch_size=2,
            reserve_gb=0.0,
            promotion_state=None,
        ).to_wire()

    call = transport.start_chunk(chunk(0), gpu="H100", affinity_key="caption-h100-0")
    seen: list[str] = []
    while "load" not in seen:
        assert not call.done(), seen
        seen.extend(event["stage"] for event in call.events(0.02))
    call.cancel()
    with pytest.raises(RemoteError, match=r"^$"):  # cancelled: TERMINATED
        call.outcome()
    assert call.terminated
    state = transport.container("caption-h100-0").state()
    # The load finished and the manager owns it: no engine without an owner.
    assert state["resident_profiles"] == [staged.profile["profile_id"]] and state["busy"] is False
    again = transport.start_chunk(chunk(1), gpu="H100", affinity_key="caption-h100-0")
    result = ChunkResult.from_wire(unwrap(again.outcome()))
    assert [c.metadata["cache_status"] for c in result.captions] == ["warm", "warm"]
