"""The MLX-VLM backend for real: tiny checkpoints from the fake Hub, MLX on this CPU.

Each checkpoint is published on a fake Hub, resolved for ``local_apple``,
staged (so it carries a completion marker) and loaded once per module.
"""

from __future__ import annotations

import dataclasses
import gc
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_backend_mlx import (
    BackendUnloadedError,
    MlxVlmBackend,
    UnsupportedBackendError,
    create_backend,
)
from comfy_llm_core import ExecutionTarget, ProgressEvent, ProgressStage
from comfy_llm_inputs import ImagePart
from comfy_llm_inputs import PreparedInputs as Inputs
from comfy_llm_inputs import VideoFramePart as Frame
from comfy_llm_profiles import ModelProfile, resolve_profile
from comfy_llm_reasoning import parser_for_profile
from comfy_llm_residency import ResidentModelManager
from comfy_llm_residency.backend import Backend, BackendResult, GenerationSettings
from comfy_llm_staging import IncompleteSnapshotError, stage_snapshot
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.checkpoints import (
    SCRIPTED_ANSWER,
    SCRIPTED_REASONING,
    build_checkpoint_files,
    write_checkpoint,
)
from comfy_llm_testworld.sinks import RecordingBatchSink, RecordingSink
from PIL import Image

pytestmark = pytest.mark.slow


@dataclasses.dataclass
class Loaded:
    profile: ModelProfile
    path: Path
    backend: MlxVlmBackend
    events: list[ProgressEvent]


class World:
    """A fake Hub and a storage root shared by the module."""

    def __init__(self, hub: FakeHub, root: Path) -> None:
        self.hub = hub
        self.root = root
        self._staged: dict[tuple[str, bool], tuple[ModelProfile, Path]] = {}

    def stage(self, kind: str, *, scripted: bool) -> tuple[ModelProfile, Path]:
        if (kind, scripted) not in self._staged:
            self._staged[kind, scripted] = self._publish_and_stage(kind, scripted=scripted)
        return self._staged[kind, scripted]

    def _publish_and_stage(self, kind: str, *, scripted: bool) -> tuple[ModelProfile, Path]:
        repository = f"tiny/{kind}-{'scripted' if scripted else 'random'}"
        self.hub.add_repo(repository, build_checkpoint_files(kind, scripted=scripted))  # type: ignore[arg-type]
        resolved = resolve_profile(
            repository,
            ExecutionTarget.LOCAL_APPLE,
            storage_root=self.root,
            endpoint=self.hub.endpoint,
            cache_dir=self.root / "cache",
        )
        profile = resolved.profile
        staged = stage_snapshot(
            profile.repository,
            profile.revision,
            storage_root=self.root,
            profile_id=profile.profile_id,
            endpoint=self.hub.endpoint,
        )
        return profile, staged.path

    def load(self, kind: str, *, scripted: bool) -> Loaded:
        profile, path = self.stage(kind, scripted=scripted)
        events: list[ProgressEvent] = []
        backend = create_backend(profile, path, events.append)
        return Loaded(profile, path, backend, events)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with FakeHub() as hub:
        yield World(hub, tmp_path_factory.mktemp("mlx_world"))


def _loaded(world: World, kind: str, *, scripted: bool) -> Iterator[Loaded]:
    loaded = world.load(kind, scripted=scripted)
    yield loaded
    loaded.backend.unload()


@pytest.fixture(scope="module")
def qwen_scripted(world: World) -> Iterator[Loaded]:
    yield from _loaded(world, "qwen3_5", scripted=True)


@pytest.fixture(scope="module")
def qwen_random(world: World) -> Iterator[Loaded]:
    yield from _loaded(world, "qwen3_5", scripted=False)


@pytest.fixture(scope="module")
def smolvlm_random(world: World) -> Iterator[Loaded]:
    yield from _loaded(world, "smolvlm", scripted=False)


def _run(
    loaded: Loaded, inputs: Inputs, settings: GenerationSettings
) -> tuple[BackendResult, list[tuple[int, str]]]:
    sink = RecordingSink()
    result = loaded.backend.generate(inputs, settings, sink)
    assert sink.opened is result.prompt_opened_reasoning  # told before the first token
    return result, sink.calls


def _parse(loaded: Loaded, result: BackendResult, *, enable_reasoning: bool) -> Any:
    parser = parser_for_profile(
        loaded.profile.reasoning_parser,
        loaded.profile.architecture,
        enable_reasoning=enable_reasoning,
        vocabulary=loaded.backend.vocabulary,
    )
    return parser.parse(
        result.token_ids,
        result.text,
        native_reasoning=result.native_reasoning,
        prompt_opened_reasoning=result.prompt_opened_reasoning,
    )


def _token_id(loaded: Loaded, text: str) -> int:
    vocabulary = loaded.backend.vocabulary
    assert vocabulary is not None
    token_id = vocabulary.id_of(text)
    if token_id is None:  # byte-level BPE spells a leading space as "Ġ"
        token_id = vocabulary.id_of(text.replace(" ", "\u0120"))
    assert token_id is not None, text
    return token_id


def _image(color: tuple[int, int, int], size: tuple[int, int] = (64, 48)) -> Image.Image:
    return Image.new("RGB", size, color)


GREEDY = GenerationSettings(max_new_tokens=6, temperature=0.0, top_p=1.0, seed=0)


# -- loading --------------------------------------------------------------------------


def test_load_reports_progress_and_implements_the_backend_protocol(qwen_scripted: Loaded) -> None:
    backend = qwen_scripted.backend
    assert isinstance(backend, Backend)
    assert [event.stage for event in qwen_scripted.events] == [ProgressStage.LOAD] * 2
    assert qwen_scripted.events[0].indeterminate
    assert qwen_scripted.events[-1].fraction == 1.0
    metadata = backend.runtime_metadata()
    assert metadata["engine"] == "mlx-vlm"
    assert metadata["mlx_vlm_version"] == "0.7.10"
    assert metadata["device"] == "cpu"
    assert metadata["dtype"] == "float32"
    assert metadata["model_loaded"] is True


def test_profiles_for_other_engines_or_targets_are_refused(qwen_scripted: Loaded) -> None:
    cuda = dataclasses.replace(qwen_scripted.profile, backend="transformers", profile_id="")
    with pytest.raises(UnsupportedBackendError, match="backend=transformers") as error:
        create_backend(cuda, qwen_scripted.path, lambda event: None)
    assert error.value.expected == "mlx_vlm"
    modal = dataclasses.replace(
        qwen_scripted.profile, execution_target=ExecutionTarget.MODAL, profile_id=""
    )
    with pytest.raises(UnsupportedBackendError, match="execution_target=modal"):
        create_backend(modal, qwen_scripted.path, lambda event: None)


def test_only_completed_snapshots_load(qwen_scripted: Loaded, tmp_path: Path) -> None:
    unmarked = write_checkpoint("qwen3_5", tmp_path / "unmarked", scripted=True)
    with pytest.raises(IncompleteSnapshotError):
        create_backend(qwen_scripted.profile, unmarked, lambda event: None)
    # A path that does not exist is never taken for a Hub repository id.
    with pytest.raises(IncompleteSnapshotError):
        create_backend(qwen_scripted.profile, tmp_path / "tiny" / "qwen3_5", lambda event: None)


# -- generation -----------------------------------------------------------------------


def test_qwen_with_an_image_streams_every_token_id(qwen_random: Loaded) -> None:
    text_only, _ = _run(qwen_random, Inputs.text("Describe the picture."), GREEDY)
    inputs = Inputs.text(
        "Describe the picture.", ImagePart(_image((200, 0, 0))), system_prompt="Be brief."
    )
    result, calls = _run(qwen_random, inputs, GREEDY)
    assert [token_id for token_id, _ in calls] == list(result.token_ids)
    assert 1 <= len(result.token_ids) <= GREEDY.max_new_tokens
    if result.finish_reason == "length":
        assert len(result.token_ids) == GREEDY.max_new_tokens
    # random weights may emit byte tokens that never form valid UTF-8: the
    # stream drops them, the final decode shows U+FFFD
    assert calls[-1][1] == result.text.replace("\ufffd", "")
    assert result.native_reasoning is None
    timings = result.timings
    assert timings.generation_seconds > 0
    assert timings.prompt_tokens is not None and text_only.timings.prompt_tokens is not None
    assert timings.prompt_tokens > text_only.timings.prompt_tokens  # the image's tokens


def test_smolvlm_takes_video_frames_as_an_ordered_image_sequence(smolvlm_random: Loaded) -> None:
    frames = tuple(
        Frame(_image((40 * i, 100, 255 - 40 * i)), timestamp_seconds=1.5 * i, index=i)
        for i in range(3)
    )
    prompt = "Frames at 0.0s, 1.5s, 3.0s.\nWhat happens in the video?"
    text_only, _ = _run(smolvlm_random, Inputs.text(prompt), GREEDY)
    one, _ = _run(smolvlm_random, Inputs.text(prompt, *frames[:1]), GREEDY)
    result, calls = _run(smolvlm_random, Inputs.text(prompt, *frames), GREEDY)
    assert [token_id for token_id, _ in calls] == list(result.token_ids)
    assert result.token_ids
    per_frame = one.timings.prompt_tokens - text_only.timings.prompt_tokens  # type: ignore[operator]
    assert per_frame > 0
    assert result.timings.prompt_tokens == text_only.timings.prompt_tokens + 3 * per_frame  # type: ignore[operator]


def test_scripted_reasoning_is_split_by_the_qwen3_parser(qwen_scripted: Loaded) -> None:
    settings = GenerationSettings(max_new_tokens=32, temperature=0.0, enable_reasoning=True)
    result, calls = _run(qwen_scripted, Inputs.text("Think, then answer."), settings)
    assert result.prompt_opened_reasoning
    assert result.finish_reason == "stop"
    assert _token_id(qwen_scripted, "</think>") in result.token_ids
    assert len(calls) == len(result.token_ids) == 5  # " a", " b", "</think>", " answer", end
    parsed = _parse(qwen_scripted, result, enable_reasoning=True)
    assert parsed.reasoning == SCRIPTED_REASONING
    assert parsed.response == SCRIPTED_ANSWER
    assert parsed.reasoning_tokens == 2
    assert parsed.output_tokens == 5
    assert not parsed.truncated


def test_reasoning_disabled_leaves_the_reasoning_channel_empty(qwen_scripted: Loaded) -> None:
    settings = GenerationSettings(max_new_tokens=32, temperature=0.0, enable_reasoning=False)
    result, _ = _run(qwen_scripted, Inputs.text("Just answer."), settings)
    assert not result.prompt_opened_reasoning  # the template closed an empty block
    parsed = _parse(qwen_scripted, result, enable_reasoning=False)
    assert parsed.reasoning == ""
    assert parsed.response == SCRIPTED_ANSWER


def test_thinking_budget_closes_reasoning_and_leaves_room_to_answer(qwen_scripted: Loaded) -> None:
    a, close, answer = (_token_id(qwen_scripted, t) for t in (" a", "</think>", " answer"))
    # max_new_tokens=3 -> at most 1 reasoning token: " b" is replaced by </think>.
    capped = GenerationSettings(max_new_tokens=3, temperature=0.0, enable_reasoning=True)
    result, calls = _run(qwen_scripted, Inputs.text("Think, then answer."), capped)
    assert result.token_ids == (a, close, answer)
    assert [token_id for token_id, _ in calls] == [a, close, answer]
    assert result.finish_reason == "length"
    parsed = _parse(qwen_scripted, result, enable_reasoning=True)
    assert (parsed.reasoning, parsed.response) == ("a", SCRIPTED_ANSWER)
    assert qwen_scripted.backend.runtime_metadata()["thinking_budget_tokens"] == 1
    # A budget the scripted reasoning fits in changes nothing.
    roomy = dataclasses.replace(capped, max_new_tokens=4)
    assert _run(qwen_scripted, Inputs.text("Think."), roomy)[0].token_ids[:3] == (
        a,
        _token_id(qwen_scripted, " b"),
        close,
    )
    # Without reasoning there is no cap: the model's own block runs on.
    plain = dataclasses.replace(capped, enable_reasoning=False)
    plain_result, _ = _run(qwen_scripted, Inputs.text("Think."), plain)
    assert close not in plain_result.token_ids
    assert qwen_scripted.backend.runtime_metadata()["thinking_budget_tokens"] is None


def test_an_exception_from_on_token_stops_generation_and_propagates(qwen_scripted: Loaded) -> None:
    class Interrupted(Exception):
        pass

    sink = RecordingSink(stop_after=2, error=Interrupted())
    settings = GenerationSettings(max_new_tokens=32, temperature=0.0)
    with pytest.raises(Interrupted):
        qwen_scripted.backend.generate(Inputs.text("Think."), settings, sink)
    assert len(sink.calls) == 2
    # The model stays loaded and usable.
    again, _ = _run(qwen_scripted, Inputs.text("Think."), settings)
    assert len(again.token_ids) == 5


def test_a_seed_makes_sampling_reproducible(qwen_random: Loaded) -> None:
    def sample(seed: int) -> tuple[int, ...]:
        settings = GenerationSettings(max_new_tokens=12, temperature=1.0, top_p=1.0, seed=seed)
        return _run(qwen_random, Inputs.text("Tell me a story."), settings)[0].token_ids

    first = sample(7)
    assert sample(7) == first
    assert any(sample(seed) != first for seed in (8, 9, 10))


def test_generation_runs_on_another_thread(qwen_scripted: Loaded) -> None:
    results: list[Any] = []

    def work() -> None:
        try:
            results.append(_run(qwen_scripted, Inputs.text("Think."), GREEDY)[0].token_ids)
        except Exception as error:  # reported below
            results.append(error)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(timeout=60)
    assert len(results) == 1 and isinstance(results[0], tuple)


def test_unload_drops_the_model(world: World) -> None:
    loaded = world.load("qwen3_5", scripted=True)
    backend = loaded.backend
    model = weakref.ref(backend._loaded.model)  # type: ignore[union-attr]
    backend.unload()
    gc.collect()
    assert model() is None
    assert not backend.loaded
    assert backend.runtime_metadata()["model_loaded"] is False
    backend.unload()  # twice is fine
    with pytest.raises(BackendUnloadedError):
        backend.generate(Inputs.text("Hello"), GREEDY, RecordingSink())


def test_the_resident_manager_serves_a_request_through_this_backend(world: World) -> None:
    profile, path = world.stage("qwen3_5", scripted=True)
    manager = ResidentModelManager(
        ExecutionTarget.LOCAL_APPLE, backend_factory=create_backend, max_resident=1
    )
    settings = GenerationSettings(max_new_tokens=32, temperature=0.0, enable_reasoning=True)
    try:
        first = manager.run(
            profile, path, Inputs.text("Think, then answer."), settings, reserve_gb=0
        )
        second = manager.run(profile, path, Inputs.text("Again."), settings, reserve_gb=0)
    finally:
        manager.unload_all()
    assert (first.response, first.reasoning) == (SCRIPTED_ANSWER, SCRIPTED_REASONING)
    assert first.metadata.to_dict()["engine"] == "mlx-vlm"
    assert first.metadata.to_dict()["output_tokens"] == 5
    assert first.metadata.to_dict()["reasoning_tokens"] == 2
    assert (
        first.metadata.to_dict()["cache_status"],
        second.metadata.to_dict()["cache_status"],
    ) == ("cold", "warm")


def test_live_text_falls_back_to_full_decoding_when_the_detokenizer_fails() -> None:
    from types import SimpleNamespace

    from comfy_llm_backend_mlx._engine import _TextSoFar

    class Broken:
        def reset(self) -> None:
            pass

        def add_token(self, token: int, skip_special_token_ids: Any = ()) -> None:
            raise IndexError(token)  # an id beyond the tokenizer's vocabulary

    class Tokenizer:
        def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
            return "|".join(map(str, ids))

    loaded = SimpleNamespace(
        processor=SimpleNamespace(detokenizer=Broken()), tokenizer=Tokenizer(), special_ids=[9]
    )
    text = _TextSoFar(loaded)  # type: ignore[arg-type]
    assert [text.add(1, final=False), text.add(9, final=False), text.add(2, final=True)] == [
        "1",
        "1",
        "1|2",
    ]


# --- constrained JSON decoding (mask applied with mx.where: mlx-vlm's own needs Metal) ---

_SCHEMA = {
    "type": "object",
    "properties": {
        "color": {"enum": ["red", "green", "blue"]},
        "count": {"type": "integer", "minimum": 0, "maximum": 9},
    },
    "required": ["color", "count"],
    "additionalProperties": False,
}


def _schema_settings(**changes: Any) -> GenerationSettings:
    import json

    values: dict[str, Any] = {
        "max_new_tokens": 48,
        "temperature": 0.0,
        "enable_reasoning": False,
        "response_schema": json.dumps(_SCHEMA),
    }
    values.update(changes)
    return GenerationSettings(**values)


@pytest.mark.parametrize(
    "fixture, changes",
    [
        ("qwen_random", {}),
        ("smolvlm_random", {}),
        ("qwen_random", {"temperature": 1.0, "top_p": 0.9, "seed": 7}),
    ],
)
def test_random_weights_answer_valid_json(request, fixture: str, changes: dict) -> None:
    import json

    import jsonschema

    loaded = request.getfixturevalue(fixture)
    free, _ = _run(
        loaded, Inputs.text("Describe it as JSON."), _schema_settings(response_schema=None)
    )
    with pytest.raises(json.JSONDecodeError):
        json.loads(free.text)
    result, _ = _run(loaded, Inputs.text("Describe it as JSON."), _schema_settings(**changes))
    assert result.constrained is True
    assert result.finish_reason == "stop"
    jsonschema.validate(json.loads(result.text), _SCHEMA)


def test_constrained_answer_keeps_reasoning_free(qwen_scripted) -> None:
    import json

    import jsonschema

    settings = _schema_settings(enable_reasoning=True, max_new_tokens=64)
    result, _ = _run(qwen_scripted, Inputs.text("Describe it as JSON."), settings)
    parsed = _parse(qwen_scripted, result, enable_reasoning=True)
    assert parsed.reasoning == SCRIPTED_REASONING
    jsonschema.validate(json.loads(parsed.response), _SCHEMA)


# -- batches -----------------------------------------------------------------------------------
def _batch_items(count: int, settings: GenerationSettings, size: tuple[int, int] = (32, 32)):
    import numpy as np
    from comfy_llm_residency.backend import BatchItem

    pixels = np.random.default_rng(4).integers(0, 255, (count, size[1], size[0], 3), np.uint8)
    return [
        BatchItem(Inputs.text("Caption it.", ImagePart(Image.fromarray(frame))), settings)
        for frame in pixels
    ]


@pytest.mark.parametrize("name", ["qwen_random", "qwen_scripted", "smolvlm_random"])
def test_a_greedy_batch_equals_single_runs_token_for_token(name: str, request) -> None:
    from comfy_llm_residency.backend import BatchBackend

    loaded = request.getfixturevalue(name)
    backend = loaded.backend
    settings = GenerationSettings(max_new_tokens=10, temperature=0.0, enable_reasoning=False)
    items = _batch_items(4, settings)
    assert isinstance(backend, BatchBackend) and backend.can_batch(items)
    streamed = RecordingBatchSink()
    results = backend.generate_batch(items, streamed)
    singles = [_run(loaded, item.inputs, settings)[0] for item in items]
    assert [r.token_ids for r in results] == [s.token_ids for s in singles]
    assert [r.finish_reason for r in results] == [s.finish_reason for s in singles]
    assert [r.text for r in results] == [s.text for s in singles]
    if name != "qwen_scripted":  # random weights: each image its own answer, so order shows
        assert len({s.token_ids for s in singles}) > 1
    assert [tuple(streamed.tokens(i)) for i in range(4)] == [s.token_ids for s in singles]
    assert [r.batch_size for r in results] == [4, 4, 4, 4]


def test_mlx_batches_decline_sampling_schemas_and_the_thinking_budget(qwen_random: Loaded) -> None:
    backend = qwen_random.backend
    sampled = GenerationSettings(max_new_tokens=4, temperature=0.7, seed=1, enable_reasoning=False)
    schema = GenerationSettings(
        max_new_tokens=4, temperature=0.0, enable_reasoning=False, response_schema="{}"
    )
    thinking = GenerationSettings(max_new_tokens=4, temperature=0.0, enable_reasoning=True)
    for settings in (sampled, schema, thinking):
        assert not backend.can_batch(_batch_items(2, settings))


def test_images_of_two_sizes_form_two_mlx_groups_and_cancel_stops_the_batch(
    qwen_random: Loaded,
) -> None:
    backend = qwen_random.backend
    settings = GenerationSettings(max_new_tokens=6, temperature=0.0, enable_reasoning=False)
    items = _batch_items(2, settings) + _batch_items(1, settings, (64, 48))
    results = backend.generate_batch(items, RecordingBatchSink())
    assert [r.batch_size for r in results] == [2, 2, 1]
    assert [r.token_ids for r in results] == [
        _run(qwen_random, item.inputs, settings)[0].token_ids for item in items
    ]

    class Stop(BaseException):
        pass

    stop = RecordingBatchSink(stop_after=3, error=Stop())
    with pytest.raises(Stop):
        backend.generate_batch(items, stop)
    assert len(stop.calls) == 3
    again = backend.generate_batch(items[:1], RecordingBatchSink())
    assert again[0].token_ids == results[0].token_ids
