"""Fakes for the manager's tests: a scripted backend, memory probe and clock.

The manager is under test here, not a backend: the fake backend emits a
scripted token sequence through the real token-callback contract, and the
fake probe's readings follow what the fake backends hold (a load takes the
profile's estimate, an unload gives it back) plus whatever a test scripts.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import ExecutionTarget, Modality, ProgressEvent
from comfy_llm_inputs import ImagePart, PreparedInputs
from comfy_llm_profiles import ModelProfile
from comfy_llm_profiles._profile import ProfileLimits
from comfy_llm_reasoning import TokenVocabulary
from comfy_llm_residency import MemorySnapshot, ResidentModelManager, reset_managers
from comfy_llm_residency._generation import STEP_EVENT_SECONDS
from comfy_llm_residency.backend import BackendResult, BackendTimings, GenerationSettings
from comfy_llm_staging import MARKER_FILENAME
from PIL import Image

GIB = 1024**3

# A tiny vocabulary: <think> a b </think> answer <|im_end|>
THINK_OPEN, A, B, THINK_CLOSE, ANSWER, IM_END = 100, 1, 2, 101, 3, 200
PIECES = {
    THINK_OPEN: "<think>",
    A: " a",
    B: " b",
    THINK_CLOSE: "</think>",
    ANSWER: " answer",
    IM_END: "<|im_end|>",
}
SCRIPTED = (THINK_OPEN, A, B, THINK_CLOSE, ANSWER, IM_END)


def _decode(ids: Sequence[int]) -> str:
    return "".join(PIECES[i] for i in ids if i != IM_END)


VOCABULARY = TokenVocabulary(
    token_to_id={text: token_id for token_id, text in PIECES.items()},
    decode=_decode,
    special_ids=frozenset({IM_END}),
)


class InterruptProcessingException(Exception):
    """Stands in for ComfyUI's interrupt exception (an Exception subclass)."""


def make_profile(
    name: str = "model-a",
    *,
    target: str = "local_cpu",
    estimated_gb: float = 2.0,
    reasoning_parser: str | None = "qwen3",
    architecture: str = "Qwen3_5ForConditionalGeneration",
) -> ModelProfile:
    """A valid profile of a made-up repository."""
    return ModelProfile(
        repository=f"test-owner/{name}",
        revision=hashlib.sha1(name.encode()).hexdigest(),
        execution_target=ExecutionTarget(target),
        backend="mlx_vlm" if target == "local_apple" else "transformers",
        architecture=architecture,
        model_type="qwen3_5",
        dtype="bfloat16",
        quantization_method="none",
        modalities=("text", "image", "video", "file"),
        limits=ProfileLimits.of(
            context_tokens=4096,
            max_images=4,
            max_video_frames=16,
            max_file_bytes=1 << 20,
            max_total_file_bytes=4 << 20,
            max_file_characters=100_000,
            max_pdf_pages=10,
            allow_mixed_image_video=False,
        ),
        reasoning_parser=reasoning_parser,
        estimated_memory_bytes=int(estimated_gb * GIB),
        weight_bytes=int(estimated_gb * GIB * 0.8),
        registry_version="test-1",
    )


def make_snapshot(root: Path, profile: ModelProfile) -> Path:
    """A completed snapshot directory with the marker staging writes (schema 1).

    ``write_marker`` is private to staging, so the documented marker format
    is written here; ``require_completed_snapshot`` (the real one) checks it.
    """
    directory = root / profile.repository.replace("/", "--") / profile.revision
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "config.json"
    config.write_text('{"model_type": "qwen3_5"}', encoding="utf-8")
    data = config.read_bytes()
    marker = {
        "schema": 1,
        "repository": profile.repository,
        "revision": profile.revision,
        "profile_id": profile.profile_id,
        "files": {"config.json": {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}},
        "completed_at": "2026-11-29T12:00:00+00:00",
    }
    (directory / MARKER_FILENAME).write_text(json.dumps(marker), encoding="utf-8")
    return directory


def make_inputs(*, images: int = 1, files: tuple[str, ...] = ()) -> PreparedInputs:
    """Real prepared inputs: a prompt and ``images`` tiny RGB images."""
    return PreparedInputs.text(
        "Describe the picture.",
        *(ImagePart(Image.new("RGB", (4, 4), (255, 0, 0))) for _ in range(images)),
        file_names=files,
    )


class FakeClock:
    """A monotonic clock that only moves when slept on."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class FakeProbe:
    """Memory that fake backends take on load and give back on unload.

    ``extra_used`` is memory other programs hold; a test may replace
    ``release_after`` with a clock time after which unloaded memory shows up
    (to model a driver that frees lazily), or set ``leak`` so it never does.
    """

    def __init__(self, total_gb: float = 32.0, used_by_others_gb: float = 0.0) -> None:
        self.total = int(total_gb * GIB)
        self.extra_used = int(used_by_others_gb * GIB)
        self.held: dict[str, int] = {}
        self.pending_release = 0
        self.release_at: float | None = None
        self.clock: Callable[[], float] | None = None
        self.leak = False
        self.clear_cache_calls = 0
        self.readings = 0
        self.device = "fake0"

    def take(self, key: str, amount: int) -> None:
        self.held[key] = amount

    def give_back(self, key: str) -> None:
        amount = self.held.pop(key, 0)
        if self.leak or self.release_at is not None:
            self.pending_release += amount

    def snapshot(self) -> MemorySnapshot:
        self.readings += 1
        if (
            self.pending_release
            and not self.leak
            and self.release_at is not None
            and self.clock is not None
            and self.clock() >= self.release_at
        ):
            self.pending_release = 0
        used = self.extra_used + sum(self.held.values()) + self.pending_release
        return MemorySnapshot(max(0, self.total - used), self.total, self.device)

    def clear_cache(self) -> None:
        self.clear_cache_calls += 1


@dataclass
class Log:
    """A shared, ordered log of what happened (loads, unloads, frees)."""

    events: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, event: str) -> None:
        with self.lock:
            self.events.append(event)


class FakeBackend:
    """Emits a scripted token sequence to the token sink."""

    def __init__(self, world: World, profile: ModelProfile, path: Path) -> None:
        self.world = world
        self.profile = profile
        self.path = path
        self.unload_calls = 0
        self.generate_calls = 0

    modalities = frozenset(Modality)

    @property
    def vocabulary(self) -> TokenVocabulary | None:
        return VOCABULARY

    def generate(self, inputs: Any, settings: GenerationSettings, sink: Any) -> BackendResult:
        world = self.world
        self.generate_calls += 1
        entered = time.monotonic()
        if world.generate_error is not None:
            raise world.generate_error
        ids: list[int] = []
        for token_id in world.script[: settings.max_new_tokens]:
            ids.append(token_id)
            if world.token_delay:
                time.sleep(world.token_delay)
            world.clock.now += world.token_seconds  # time passes; not a sleep
            sink.token(token_id, _decode(ids))
        world.intervals.append((entered, time.monotonic()))
        finish = "length" if len(world.script) > settings.max_new_tokens else "stop"
        return BackendResult(
            token_ids=tuple(ids),
            text="".join(PIECES[i] for i in ids),
            native_reasoning=None,
            timings=BackendTimings(generation_seconds=0.0, prompt_tokens=12),
            finish_reason=finish,
        )

    def unload(self) -> None:
        self.unload_calls += 1
        self.world.log.add(f"unload:{self.profile.repository}")
        if self.world.unload_error is not None:
            raise self.world.unload_error
        self.world.probe.give_back(self.profile.profile_id)

    def runtime_metadata(self) -> dict[str, object]:
        return {
            "device": "fake0",
            "engine": "fake-engine",
            "engine_version": "0.0.1",
            "hf_token": "hf_abcdefghijklmnopqrstuvwxyz",
            "api_key": "sk-should-never-appear",
            "dtype": "bfloat16",
        }


class World:
    """Everything a manager test needs, wired together."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.clock = FakeClock()
        self.probe = FakeProbe()
        self.probe.clock = self.clock
        self.log = Log()
        self.backends: list[FakeBackend] = []
        self.script: tuple[int, ...] = SCRIPTED
        self.token_delay = 0.0
        # fake-clock time per token: by default a model slow enough (10 tokens/s) for a
        # GENERATE event per token (the relay sends at most one per STEP_EVENT_SECONDS)
        self.token_seconds = 2 * STEP_EVENT_SECONDS
        self.generate_error: BaseException | None = None
        self.unload_error: BaseException | None = None
        self.load_error: BaseException | None = None
        self.intervals: list[tuple[float, float]] = []
        self.freed: list[int] = []
        self.free_frees_gb = 0.0
        self.events: list[ProgressEvent] = []

    def factory(self, profile: ModelProfile, path: Path, progress: Any) -> FakeBackend:
        self.log.add(f"load:{profile.repository}")
        if self.load_error is not None:
            raise self.load_error
        self.probe.take(profile.profile_id, profile.estimated_memory_bytes)
        backend = FakeBackend(self, profile, path)
        self.backends.append(backend)
        return backend

    def free_host_memory(self, num_bytes: int) -> None:
        self.freed.append(num_bytes)
        self.log.add(f"free:{num_bytes}")
        if self.free_frees_gb:
            self.probe.extra_used = max(0, self.probe.extra_used - int(self.free_frees_gb * GIB))

    def record(self, event: ProgressEvent) -> None:
        self.events.append(event)

    def manager(self, target: str = "local_cpu", **kwargs: Any) -> ResidentModelManager:
        options: dict[str, Any] = {
            "backend_factory": self.factory,
            "memory_probe": self.probe,
            "free_host_memory": self.free_host_memory,
            "clock": self.clock,
            "sleep": self.clock.sleep,
            "recovery_timeout_seconds": 15.0,
        }
        options.update(kwargs)
        return ResidentModelManager(target, **options)

    def snapshot(self, profile: ModelProfile) -> Path:
        return make_snapshot(self.tmp_path / "snapshots", profile)

    def backend_for(self, profile: ModelProfile) -> FakeBackend:
        matches = [b for b in self.backends if b.profile.profile_id == profile.profile_id]
        assert len(matches) == 1, f"expected one backend for {profile.repository}: {matches}"
        return matches[0]


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    for name in (
        "COMFY_MODAL_LOCAL_LLM_MAX_RESIDENT_MODELS",
        "COMFY_MODAL_LLM_MAX_RESIDENT_MODELS",
        "COMFY_MODAL_LOCAL_LLM_RESERVE_FREE_GB",
        "COMFY_MODAL_LLM_MEMORY_RECOVERY_TIMEOUT_SECONDS",
    ):
        monkeypatch.delenv(name, raising=False)
    return World(tmp_path)


@pytest.fixture(autouse=True)
def _reset_global_managers() -> Any:
    yield
    reset_managers()


class Fake:
    """Namespace handed to tests through the ``fake`` fixture."""

    GIB = GIB
    THINK_OPEN = THINK_OPEN
    THINK_CLOSE = THINK_CLOSE
    A = A
    B = B
    ANSWER = ANSWER
    IM_END = IM_END
    SCRIPTED = SCRIPTED
    VOCABULARY = VOCABULARY
    InterruptProcessingException = InterruptProcessingException
    make_inputs = staticmethod(make_inputs)
    FakeProbe = FakeProbe
    FakeBackend = FakeBackend
    FakeClock = FakeClock
    make_profile = staticmethod(make_profile)
    make_snapshot = staticmethod(make_snapshot)


@pytest.fixture
def fake() -> type[Fake]:
    return Fake
