"""What crosses a process boundary is plain data, and comes back equal.

A remote request is (profile, PreparedInputs, GenerationSettings, reserve,
prompt id); progress is a stream of ProgressEvents; the answer is an
InferenceResult (a backend's BackendResult inside a worker). Each of them
turns into plain data and back here, through JSON where it has no bytes
and through pickle where images travel as PNG bytes.
"""

from __future__ import annotations

import base64
import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import ProgressEvent, ProgressStage
from comfy_llm_inputs import ImagePart, PreparedInputs, VideoFramePart
from comfy_llm_residency import InferenceResult, RunMetadata
from comfy_llm_residency.backend import BackendResult, BackendTimings, GenerationSettings
from PIL import Image

JSON_TYPES = (str, int, float, bool, type(None))


def _plain(value: Any, *, allow_bytes: bool = False) -> bool:
    if isinstance(value, dict):
        return all(
            isinstance(k, str) and _plain(v, allow_bytes=allow_bytes) for k, v in value.items()
        )
    if isinstance(value, list):
        return all(_plain(v, allow_bytes=allow_bytes) for v in value)
    return isinstance(value, JSON_TYPES) or (allow_bytes and isinstance(value, bytes))


def _through_json(data: dict[str, Any]) -> dict[str, Any]:
    assert _plain(data), data
    loaded = json.loads(json.dumps(data))
    assert isinstance(loaded, dict)
    return loaded


@pytest.mark.parametrize(
    "settings",
    [
        GenerationSettings(),
        GenerationSettings(
            max_new_tokens=64, temperature=0.0, top_p=0.5, seed=2**40, enable_reasoning=False
        ),
        GenerationSettings(response_schema='{"type": "object", "required": ["caption"]}'),
    ],
)
def test_generation_settings(settings: GenerationSettings) -> None:
    assert GenerationSettings.from_dict(_through_json(settings.to_dict())) == settings


@pytest.mark.parametrize("stage", list(ProgressStage))
def test_progress_events(stage: ProgressStage) -> None:
    event = ProgressEvent(
        stage=stage,
        message="Generating",
        value=3.0,
        maximum=10.0,
        unit="tokens",
        indeterminate=False,
        elapsed_seconds=1.25,
        time_to_first_token_seconds=0.5,
        tokens_per_second=12.5,
        text="<think> a",
        token_id=42,
    )
    copy = ProgressEvent.from_dict(_through_json(event.to_dict()))
    assert copy == event
    assert copy.stage is stage
    bare = ProgressEvent(stage=stage)
    assert ProgressEvent.from_dict(_through_json(bare.to_dict())) == bare


def test_inference_result() -> None:
    flat = _recorded("modal_stage_and_generate.json")[1]["answer"]["ok"]["metadata"]
    result = InferenceResult(
        response="A red square.", reasoning="It is red.", metadata=RunMetadata.from_dict(flat)
    )
    assert InferenceResult.from_dict(_through_json(result.to_dict())) == result


@pytest.mark.parametrize("prompt_tokens", [12, None])
def test_backend_result(prompt_tokens: int | None) -> None:
    result = BackendResult(
        token_ids=(100, 1, 2, 101, 3),
        text="<think> a b</think> answer",
        native_reasoning=None,
        timings=BackendTimings(generation_seconds=0.5, prompt_tokens=prompt_tokens),
        prompt_opened_reasoning=True,
        finish_reason="length",
    )
    copy = BackendResult.from_dict(_through_json(result.to_dict()))
    assert copy == result
    assert isinstance(copy.timings, BackendTimings)


def _image(color: tuple[int, int, int], size: tuple[int, int] = (5, 3)) -> Image.Image:
    image = Image.new("RGB", size, color)
    image.putpixel((1, 2), (color[2], color[0], color[1]))
    return image


def test_prepared_inputs_travel_as_bytes() -> None:
    frames = (
        VideoFramePart(image=_image((1, 2, 3)), timestamp_seconds=0.0, index=0),
        VideoFramePart(image=_image((4, 5, 6)), timestamp_seconds=1.5, index=1),
    )
    inputs = PreparedInputs.text(
        "[video frames at 0.00 s, 1.50 s]\nDescribe.\n\n--- notes.txt ---\nhello",
        ImagePart(_image((255, 0, 0))),
        ImagePart(_image((0, 9, 200), (2, 7))),
        *frames,
        system_prompt="Be brief.",
        file_names=("notes.txt",),
    )
    wire = inputs.to_wire()
    assert _plain(wire, allow_bytes=True)
    assert [part["kind"] for part in wire["parts"]] == ["image"] * 2 + ["video_frame"] * 2 + [
        "text"
    ]
    assert all(isinstance(part["image"], bytes) for part in wire["parts"][:4])

    copy = PreparedInputs.from_wire(pickle.loads(pickle.dumps(wire)))

    assert (copy.prompt, copy.system_prompt, copy.file_names) == (
        inputs.prompt,
        inputs.system_prompt,
        inputs.file_names,
    )
    assert _media(copy) == _media(inputs)


# -- Recorded messages ------------------------------------------------------------
# tests/wire_fixtures holds messages recorded from the code at 2a96277 (before the
# request vocabulary moved): what an older node or worker sends must still decode,
# and the forms that did not change version must still encode the same.

FIXTURES = Path(__file__).parent / "wire_fixtures"


def _recorded(name: str) -> Any:
    def revive(value: Any) -> Any:
        if isinstance(value, dict):
            if set(value) == {"$bytes"}:
                return base64.b64decode(value["$bytes"])
            return {key: revive(item) for key, item in value.items()}
        if isinstance(value, list):
            return [revive(item) for item in value]
        return value

    return revive(json.loads((FIXTURES / name).read_text(encoding="utf-8")))


def _pixels(image: Image.Image) -> tuple[tuple[int, int], str, bytes]:
    return image.size, image.mode, image.tobytes()


def _media(inputs: PreparedInputs) -> list[tuple[str, Any, Any]]:
    """Every image and frame of ``inputs`` in order, as (kind, pixels, timestamp)."""
    return [
        (
            "frame" if isinstance(part, VideoFramePart) else "image",
            _pixels(part.image),  # type: ignore[attr-defined]
            part.timestamp_seconds if isinstance(part, VideoFramePart) else None,
        )
        for part in inputs.media
    ]


def test_recorded_prepared_inputs_version_1_decode() -> None:
    full, text_only = _recorded("request_parts.json")["prepared_inputs"]
    inputs = PreparedInputs.from_wire(full)
    assert inputs.prompt.startswith("Describe.\n\nVideo: 2 frames")
    assert (inputs.system_prompt, inputs.file_names) == ("Be brief.", ("notes.txt",))
    expected = [
        ("image", _pixels(_image((255, 0, 0))), None),
        ("image", _pixels(_image((0, 9, 200), (2, 7))), None),
        ("frame", _pixels(_image((1, 2, 3))), 0.0),
        ("frame", _pixels(_image((4, 5, 6))), 1.5),
    ]
    assert _media(inputs) == expected
    again = PreparedInputs.from_wire(pickle.loads(pickle.dumps(inputs.to_wire())))
    assert (again.prompt, again.system_prompt, _media(again)) == (
        inputs.prompt,
        inputs.system_prompt,
        expected,
    )
    bare = PreparedInputs.from_wire(text_only)
    assert (bare.prompt, bare.system_prompt, _media(bare)) == ("hi", None, [])


def test_recorded_progress_events_settings_and_results_keep_their_form() -> None:
    recorded = _recorded("request_parts.json")
    events = [ProgressEvent.from_dict(item) for item in recorded["progress_events"]]
    assert [event.stage for event in events] == [*ProgressStage, ProgressStage.DOWNLOAD]
    assert events[0].token_id == 42 and events[0].prompt_opened_reasoning is True
    assert [event.to_dict() for event in events] == recorded["progress_events"]
    settings = [GenerationSettings.from_dict(item) for item in recorded["generation_settings"]]
    assert settings[1].seed == 2**40 and settings[1].schema is not None
    assert [item.to_dict() for item in settings] == recorded["generation_settings"]
    # a recorded result still decodes: its token times (measured by the sink now) are ignored
    result = BackendResult.from_dict(recorded["backend_result"])
    assert (result.finish_reason, result.batch_size, result.timings) == (
        "length",
        2,
        BackendTimings(generation_seconds=0.5, prompt_tokens=12),
    )
    assert result.token_ids == (100, 1, 2, 101, 3) and result.constrained is True


def test_recorded_modal_exchange_decodes() -> None:
    from comfy_llm_modal_remote.wire._wire import (
        EngineRequest,
        StageRequest,
        StageResult,
        result_from_wire,
        unwrap,
    )

    stage, generate = _recorded("modal_stage_and_generate.json")
    assert StageRequest.from_wire(stage["request"]).reference == "tiny/smolvlm-scripted"
    staged = StageResult.from_wire(unwrap(stage["answer"]))
    assert staged.downloaded is True and staged.profile["backend"] == "transformers"

    request = EngineRequest.from_wire(generate["request"])
    assert request.generation_settings().max_new_tokens == 512
    inputs = PreparedInputs.from_wire(request.inputs)
    assert inputs.system_prompt == "Be brief." and inputs.file_names == ("notes.txt",)
    assert [kind for kind, _, _ in _media(inputs)] == ["image"]
    assert _media(inputs)[0][1][0] == (5, 6)

    answer = unwrap(generate["answer"])
    result = result_from_wire(answer)
    assert (result.response, result.reasoning) == ("a b</think> answer", "")
    flat = result.to_dict()["metadata"]
    assert flat == answer["metadata"]  # every key, in order, with its value
    assert list(flat) == list(answer["metadata"])
