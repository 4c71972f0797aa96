"""The chunk worker keeps its engine fed: the next sub-batch is prepared while one runs.

The chunk body is driven directly, on this thread, with a stand-in for the
container's service whose manager answers at once; a decode is seen where
PIL opens the image's bytes, whichever module decodes it. Fed serially (the
whole chunk prepared before the engine starts, or each sub-batch after the
one before returns), the engine would wait on the CPU (issue 27, F5).
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from comfy_llm_core import ExecutionTarget, item_seed
from comfy_llm_modal_remote import ChunkImage, WorkerUnsafeError
from comfy_llm_modal_remote.wire._chunk_wire import ChunkRequest, ChunkResult
from comfy_llm_modal_remote.worker._chunk_worker import caption_chunk
from comfy_llm_modal_remote.worker._engine import EngineService
from comfy_llm_profiles import ModelProfile, engine_batch_size, resolve_profile
from comfy_llm_residency.backend import GenerationSettings
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.checkpoints import build_checkpoint_files
from PIL import Image

from .conftest import OTHER

FEEDER = "chunk-feed"


class _Metadata:
    def to_dict(self) -> dict[str, Any]:
        return {"cache_status": "warm"}


class _Answer:
    """What ``run_batch`` gives back per item: the caption names the item's seed."""

    def __init__(self, seed: int | None) -> None:
        self.response, self.reasoning, self.metadata = f"seed {seed}", "", _Metadata()


class _Manager:
    """Answers at once; ``hold(call, items)`` runs first, on the engine's turn."""

    unsafe_for_reuse = False

    def __init__(self, hold: Callable[[int, Sequence[Any]], None]) -> None:
        self.hold = hold
        self.calls: list[int] = []

    def run_batch(self, profile: Any, path: Any, items: Sequence[Any], **_: Any) -> list[_Answer]:
        self.hold(len(self.calls), items)
        self.calls.append(len(items))
        return [_Answer(item.settings.seed) for item in items]


class _Service:
    """The container's service as the chunk body uses it."""

    unsafe = False
    event_interval = 0.0

    def __init__(self, manager: _Manager) -> None:
        self.manager = manager

    def visible_snapshot(self, profile: ModelProfile, relative: str) -> Path:
        return Path(relative)

    def retire(self, reason: str) -> WorkerUnsafeError:
        raise AssertionError(f"retired: {reason}")

    def commit_compile_cache(self) -> None:
        raise AssertionError("no cold load here")


class _Channel:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def put_many(self, items: Sequence[dict[str, Any]]) -> None:
        self.events.extend(items)


class _Decodes:
    """Which image PIL opened on which thread, and a hook run inside each decode."""

    def __init__(self, images: Sequence[ChunkImage]) -> None:
        self.names = {image.data: image.name for image in images}
        self.threads: dict[str, str] = {}
        self.decoded: dict[str, threading.Event] = {
            image.name: threading.Event() for image in images
        }
        self.during: Callable[[str], None] = lambda name: None

    def wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def opened(source: Any, *args: Any, **kwargs: Any) -> Any:
            name = self.names.get(source.getvalue()) if isinstance(source, io.BytesIO) else None
            if name is not None:
                self.threads[name] = threading.current_thread().name
                self.during(name)
                self.decoded[name].set()
            return original(source, *args, **kwargs)

        return opened


def _images(count: int) -> list[ChunkImage]:
    made = []
    for index in range(count):
        buffer = io.BytesIO()
        Image.new("RGB", (16, 12), (index % 256, index // 256, 90)).save(buffer, format="PNG")
        made.append(ChunkImage(index, f"img{index:03d}.png", buffer.getvalue(), 16, 12))
    return made


def _request(profile: ModelProfile, images: Sequence[ChunkImage], batch_size: int) -> ChunkRequest:
    return ChunkRequest(
        request_id="r",
        chunk_id=7,
        attempt=0,
        profile=profile.to_dict(),
        snapshot="snapshot",
        prompt="Caption it.",
        system_prompt=None,
        settings=GenerationSettings(temperature=0.0, seed=11, max_new_tokens=4).to_dict(),
        images=tuple(images),
        batch_size=batch_size,
    )


def _run(manager: _Manager, request: ChunkRequest, channel: _Channel | None = None) -> ChunkResult:
    return caption_chunk(cast(EngineService, _Service(manager)), request, channel or _Channel())


def _feeders() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith(FEEDER)]


def _profile(hub: FakeHub, reference: str, tmp_path: Path) -> ModelProfile:
    return resolve_profile(
        reference, ExecutionTarget.MODAL, storage_root=tmp_path, endpoint=hub.endpoint
    ).profile


@pytest.fixture
def decodes(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[[Sequence[ChunkImage]], _Decodes]]:
    def watch(images: Sequence[ChunkImage]) -> _Decodes:
        made = _Decodes(images)
        monkeypatch.setattr(Image, "open", made.wrap(Image.open))
        return made

    yield watch
    assert not _feeders()  # nothing leaks


def test_the_next_sub_batch_is_prepared_while_the_engine_runs_the_one_before(
    model_hub: FakeHub, tmp_path: Path, decodes: Callable[[Sequence[ChunkImage]], _Decodes]
) -> None:
    """Each engine call holds until the next sub-batch is decoded: fed serially it runs out."""
    images = _images(6)
    seen = decodes(images)
    at_first_call: dict[str, str] = {}
    overlapped: list[bool] = []

    def hold(call: int, items: Sequence[Any]) -> None:
        if call == 0:
            at_first_call.update(seen.threads)
        if call < 2:  # sub-batches of 2: the next one's last image
            overlapped.append(seen.decoded[images[2 * call + 3].name].wait(timeout=20))

    profile = _profile(model_hub, OTHER, tmp_path)  # SmolVLM: Transformers, batch_size a time
    channel = _Channel()
    result = _run(_Manager(hold), _request(profile, images, 2), channel)
    assert overlapped == [True, True]  # the engine never waited for the CPU
    me = threading.current_thread().name
    # the engine started after the first sub-batch only, prepared here (its progress shows)
    assert {name: at_first_call[name] for name in ("img000.png", "img001.png")} == {
        "img000.png": me,
        "img001.png": me,
    }
    assert all(at_first_call.get(image.name, FEEDER).startswith(FEEDER) for image in images[2:])
    assert all(seen.threads[image.name].startswith(FEEDER) for image in images[2:])
    # one answer per image, in the request's order, each with its own seed
    assert [caption.index for caption in result.captions] == list(range(6))
    assert [caption.response for caption in result.captions] == [
        f"seed {item_seed(11, image.name)}" for image in images
    ]
    counts = [e["value"] for e in channel.events if e.get("unit") == "images"]
    assert counts == [2.0, 4.0, 6.0]  # one images event per sub-batch


def test_a_continuous_batching_engine_takes_sub_batches_of_twice_its_width(
    hf_env: FakeHub, tmp_path: Path, decodes: Callable[[Sequence[ChunkImage]], _Decodes]
) -> None:
    hf_env.add_repo("tiny/qwen35", build_checkpoint_files("qwen3_5"))
    profile = _profile(hf_env, "tiny/qwen35", tmp_path)
    assert profile.backend == "vllm"
    size = engine_batch_size(profile, 1)
    assert size == 2 * dict(profile.backend_options)["max_num_seqs"]
    images = _images(size + 3)
    decodes(images)
    manager = _Manager(lambda call, items: None)
    result = _run(manager, _request(profile, images, 1))
    assert manager.calls == [size, 3]  # not the whole chunk at once, not batch_size
    assert len(result.captions) == size + 3 and all(c.error is None for c in result.captions)


def test_an_unchosen_chunk_holds_two_of_a_continuous_engines_sub_batches(
    hf_env: FakeHub, tmp_path: Path
) -> None:
    """So the round trip is amortised and the worker's feeder has a sub-batch to prepare."""
    from comfy_llm_modal_remote.client._fanout_job import (
        DEFAULT_CHUNK_IMAGES,
        FanOutJob,
        chunk_images,
    )

    hf_env.add_repo(OTHER, build_checkpoint_files("smolvlm"))
    hf_env.add_repo("tiny/qwen35", build_checkpoint_files("qwen3_5"))
    vllm = _profile(hf_env, "tiny/qwen35", tmp_path)
    transformers = _profile(hf_env, OTHER, tmp_path)
    settings = GenerationSettings(temperature=0.0)

    def job(**changes: Any) -> FanOutJob:
        return FanOutJob("m", "p", None, settings, "H100", **changes)

    width = dict(vllm.backend_options)["max_num_seqs"]
    assert chunk_images(job(), vllm) == max(DEFAULT_CHUNK_IMAGES, 4 * width)
    assert chunk_images(job(batch_size=1000), vllm) == 2000  # two sub-batches of batch_size
    assert chunk_images(job(batch_size=4096), vllm) == 4096  # the bound stays
    assert chunk_images(job(), transformers) == DEFAULT_CHUNK_IMAGES
    assert chunk_images(job(chunk_images=10), vllm) == 10  # a choice is kept


@pytest.mark.parametrize("stopped_by", ["cancel", "error"])
def test_a_chunk_stopped_while_the_feeder_prepares_stops_it_and_leaves_no_thread(
    model_hub: FakeHub,
    tmp_path: Path,
    decodes: Callable[[Sequence[ChunkImage]], _Decodes],
    stopped_by: str,
) -> None:
    """Modal's InputCancellation (a BaseException) or an engine error, unchanged."""
    from modal.exception import InputCancellation

    images = _images(6)
    seen = decodes(images)
    feeding = threading.Event()

    def slow(name: str) -> None:
        if name == "img002.png":  # the feeder is in the middle of the next sub-batch
            feeding.set()
            threading.Event().wait(1.0)  # the chunk is stopped meanwhile

    seen.during = slow
    raised = InputCancellation("cancelled") if stopped_by == "cancel" else RuntimeError("engine")

    def hold(call: int, items: Sequence[Any]) -> None:
        assert feeding.wait(timeout=20)
        raise raised

    profile = _profile(model_hub, OTHER, tmp_path)
    with pytest.raises(type(raised)) as caught:
        _run(_Manager(hold), _request(profile, images, 2))
    assert caught.value is raised
    assert not _feeders()  # joined before the chunk body raised
    # the feeder finished the image it was on and prepared nothing more
    assert sorted(seen.threads) == ["img000.png", "img001.png", "img002.png"]
