"""Real Transformers on the CPU with tiny checkpoints (loaded once per session)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import shutil
from pathlib import Path

import pytest
from comfy_llm_backend_cuda import (
    BackendUnloadedError,
    PromptTooLongError,
    TransformersBackend,
    UnsupportedBackendError,
    create_backend,
)
from comfy_llm_core import ProgressStage
from comfy_llm_inputs import (
    ExtractedFile,
    ImagePart,
    PreparedInputs,
    VideoFramePart,
    assemble_prompt,
)
from comfy_llm_reasoning import parser_for_profile
from comfy_llm_residency.backend import Backend, GenerationSettings
from comfy_llm_staging import MARKER_FILENAME, IncompleteSnapshotError
from comfy_llm_testworld.checkpoints import (
    SCRIPTED_ANSWER,
    SCRIPTED_REASONING,
    scripted_text,
    think_token_ids,
)
from comfy_llm_testworld.sinks import RecordingSink as Recorder
from PIL import Image

pytestmark = pytest.mark.slow

GREEDY = GenerationSettings(max_new_tokens=6, temperature=0.0, enable_reasoning=True)


def image(color: tuple[int, int, int], size: tuple[int, int] = (64, 48)) -> Image.Image:
    return Image.new("RGB", size, color)


def test_qwen_with_an_image_streams_every_token(qwen) -> None:
    backend = qwen.backend
    assert isinstance(backend, Backend)
    record = Recorder()
    inputs = PreparedInputs.text(
        "What colour is this?", ImagePart(image((200, 20, 20))), system_prompt="Be brief."
    )
    result = backend.generate(inputs, GREEDY, record)

    assert 1 <= len(result.token_ids) <= GREEDY.max_new_tokens
    assert [token for token, _ in record.calls] == list(result.token_ids)
    assert all(isinstance(token, int) for token in result.token_ids)
    # the text passed along only grows and ends as the final text
    texts = [text for _, text in record.calls]
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(texts))
    assert result.text.startswith(texts[-1])
    assert result.native_reasoning is None
    assert result.prompt_opened_reasoning is True  # Qwen template with thinking enabled
    assert record.opened is True  # told to the sink before the first token
    assert result.finish_reason in {"stop", "length"}

    timings = result.timings
    assert timings.generation_seconds > 0
    assert timings.prompt_tokens is not None and timings.prompt_tokens > 10


def test_image_adds_vision_tokens_to_the_prompt(qwen) -> None:
    text_only = qwen.backend.generate(PreparedInputs.text("Hi"), GREEDY, Recorder())
    with_image = qwen.backend.generate(
        PreparedInputs.text("Hi", ImagePart(image((0, 0, 255)))), GREEDY, Recorder()
    )
    assert with_image.timings.prompt_tokens > text_only.timings.prompt_tokens


def test_smolvlm_with_video_frames_and_a_file_section(smolvlm) -> None:
    frames = tuple(
        VideoFramePart(image=image((40 * i, 100, 50)), timestamp_seconds=1.5 * i, index=i)
        for i in range(3)
    )
    notes = ExtractedFile(
        name="notes.txt", mime_type="text/plain", text="alpha beta", size_bytes=10
    )
    prompt = assemble_prompt(
        "Summarise the clip and the notes.",
        video_timestamps=[frame.timestamp_seconds for frame in frames],
        files=[notes],
    )
    assert "notes.txt" in prompt and "1.50s" in prompt
    record = Recorder()
    with_frames = smolvlm.backend.generate(PreparedInputs.text(prompt, *frames), GREEDY, record)
    one_frame = smolvlm.backend.generate(
        PreparedInputs.text(prompt, *frames[:1]), GREEDY, Recorder()
    )
    assert [token for token, _ in record.calls] == list(with_frames.token_ids)
    assert len(with_frames.token_ids) >= 1
    # every frame went in as an image: three frames cost more prompt tokens than one
    assert with_frames.timings.prompt_tokens > one_frame.timings.prompt_tokens


def test_scripted_reasoning_enabled_splits_into_reasoning_and_answer(scripted) -> None:
    backend, profile = scripted.backend, scripted.staged.profile
    record = Recorder()
    settings = GenerationSettings(max_new_tokens=16, temperature=0.0, enable_reasoning=True)
    result = backend.generate(PreparedInputs.text("Think, then answer."), settings, record)

    open_id, close_id = think_token_ids(scripted.staged.path)
    assert close_id in result.token_ids  # boundary tokens kept for the parser
    assert result.prompt_opened_reasoning is True
    assert result.text == scripted_text("qwen3_5", enable_thinking=True)
    assert result.finish_reason == "stop"
    assert len(record.calls) == len(result.token_ids) == 5

    parser = parser_for_profile(
        profile.reasoning_parser,
        profile.architecture,
        enable_reasoning=True,
        vocabulary=backend.vocabulary,
    )
    parsed = parser.parse(
        result.token_ids,
        result.text,
        native_reasoning=result.native_reasoning,
        prompt_opened_reasoning=result.prompt_opened_reasoning,
    )
    assert parsed.reasoning == SCRIPTED_REASONING
    assert parsed.response == SCRIPTED_ANSWER
    assert parsed.output_tokens == len(result.token_ids)
    assert parsed.reasoning_tokens == 2
    assert open_id not in result.token_ids


def test_scripted_reasoning_disabled_gives_empty_reasoning(scripted) -> None:
    backend, profile = scripted.backend, scripted.staged.profile
    settings = GenerationSettings(max_new_tokens=16, temperature=0.0, enable_reasoning=False)
    result = backend.generate(PreparedInputs.text("Answer directly."), settings, Recorder())

    assert result.prompt_opened_reasoning is False  # the template closed <think></think>
    parser = parser_for_profile(
        profile.reasoning_parser,
        profile.architecture,
        enable_reasoning=False,
        vocabulary=backend.vocabulary,
    )
    parsed = parser.parse(result.token_ids, result.text, prompt_opened_reasoning=False)
    assert parsed.reasoning == ""
    assert parsed.response == SCRIPTED_ANSWER


def test_on_token_raising_stops_generation_and_propagates(scripted) -> None:
    class Interrupted(Exception):
        pass

    error = Interrupted("stop now")
    record = Recorder(stop_after=2, error=error)
    settings = GenerationSettings(max_new_tokens=16, temperature=0.0, enable_reasoning=True)
    with pytest.raises(Interrupted) as caught:
        scripted.backend.generate(PreparedInputs.text("Go."), settings, record)
    assert caught.value is error
    assert len(record.calls) == 2
    # the model stays usable
    again = scripted.backend.generate(PreparedInputs.text("Go."), settings, Recorder())
    assert len(again.token_ids) == 5


def test_max_new_tokens_caps_and_reports_length(scripted) -> None:
    settings = GenerationSettings(max_new_tokens=3, temperature=0.0, enable_reasoning=True)
    result = scripted.backend.generate(PreparedInputs.text("Go."), settings, Recorder())
    assert len(result.token_ids) == 3
    assert result.finish_reason == "length"


def test_min_new_tokens_keeps_generating_past_the_stop_token(scripted) -> None:
    stopped = scripted.backend.generate(
        PreparedInputs.text("Go."),
        GenerationSettings(max_new_tokens=16, temperature=0.0),
        Recorder(),
    )
    assert stopped.finish_reason == "stop" and len(stopped.token_ids) < 12
    settings = GenerationSettings(max_new_tokens=16, min_new_tokens=12, temperature=0.0)
    result = scripted.backend.generate(PreparedInputs.text("Go."), settings, Recorder())
    assert len(result.token_ids) >= 12  # a benchmark's fixed length: the stop token waits


def test_seed_makes_sampling_reproducible(qwen) -> None:
    def sample(seed: int):
        settings = GenerationSettings(
            max_new_tokens=8, temperature=1.0, top_p=1.0, seed=seed, enable_reasoning=False
        )
        return qwen.backend.generate(PreparedInputs.text("Tell a story."), settings, Recorder())

    first, second, other = sample(7), sample(7), sample(8)
    assert first.token_ids == second.token_ids
    assert first.token_ids != other.token_ids


def test_prompt_longer_than_the_context_is_refused(scripted) -> None:
    backend = scripted.backend
    profile = scripted.staged.profile
    small = dataclasses.replace(
        profile, profile_id="", limits=dataclasses.replace(profile.limits, context_tokens=8)
    )
    narrow = TransformersBackend(
        small,
        backend.snapshot_path,
        torch=backend._torch,
        transformers=backend._transformers,
        processor=backend._processor,
        model=backend._model,
        plan=backend.plan,
        load_seconds=0.0,
    )
    with pytest.raises(PromptTooLongError, match="context limit is 8") as caught:
        narrow.generate(PreparedInputs.text("A prompt of many words."), GREEDY, Recorder())
    assert caught.value.context_tokens == 8 and caught.value.prompt_tokens > 8


def test_load_reports_progress_and_runtime_metadata(qwen) -> None:
    assert [event.stage for event in qwen.events] == [ProgressStage.LOAD] * len(qwen.events)
    assert all(event.indeterminate for event in qwen.events)
    messages = [event.message for event in qwen.events]
    assert messages[0] == "Loading processor"
    assert messages[1].startswith("Loading model")
    metadata = qwen.backend.runtime_metadata()
    json.dumps(metadata)
    assert metadata["engine"] == "transformers"
    assert metadata["device"] == "cpu"
    assert metadata["dtype"] == "float32"
    assert metadata["attention_implementation"] == "sdpa"
    assert metadata["engine_version"] and metadata["torch_version"]
    assert "cuda_memory_allocated_bytes" not in metadata


def test_loading_refuses_a_snapshot_without_completion_marker(staged, tmp_path: Path) -> None:
    source = staged["qwen"]
    copy = tmp_path / "copy"
    shutil.copytree(source.path, copy)
    (copy / MARKER_FILENAME).unlink()
    with pytest.raises(IncompleteSnapshotError):
        create_backend(source.profile, copy, lambda event: None)


def test_a_profile_of_another_engine_is_refused_clearly(staged) -> None:
    mlx = dataclasses.replace(staged["qwen"].profile, profile_id="", backend="mlx_vlm")
    with pytest.raises(UnsupportedBackendError, match="mlx_vlm"):
        create_backend(mlx, staged["qwen"].path, lambda event: None)


def test_unload_frees_the_model_and_refuses_generation(staged) -> None:
    backend = create_backend(staged["smolvlm"].profile, staged["smolvlm"].path, lambda e: None)
    backend.unload()
    backend.unload()  # idempotent
    assert backend.runtime_metadata()["loaded"] is False
    assert backend.vocabulary is not None
    with pytest.raises(BackendUnloadedError):
        backend.generate(PreparedInputs.text("Hi"), GREEDY, Recorder())
