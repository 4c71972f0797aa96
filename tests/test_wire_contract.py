"""What crosses a process boundary is plain data, and comes back equal.

A remote request is (profile, PreparedInputs, GenerationSettings, reserve,
prompt id); progress is a stream of ProgressEvents; the answer is an
InferenceResult (a backend's BackendResult inside a worker). Each of them
turns into plain data and back here, through JSON where it has no bytes
and through pickle where images travel as PNG bytes.
"""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest
from comfy_llm_inputs import PreparedInputs, VideoFrame
from comfy_llm_profiles import ProgressEvent, ProgressStage
from comfy_llm_residency import BackendResult, BackendTimings, GenerationSettings, InferenceResult
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
    result = InferenceResult(
        response="A red square.",
        reasoning="It is red.",
        metadata={"output_tokens": 7, "evicted_profiles": ["hf-a"], "memory": {"gb": 1.5}},
    )
    assert InferenceResult.from_dict(_through_json(result.to_dict())) == result


@pytest.mark.parametrize("ttft", [0.125, None])
def test_backend_result(ttft: float | None) -> None:
    result = BackendResult(
        token_ids=(100, 1, 2, 101, 3),
        text="<think> a b</think> answer",
        native_reasoning=None,
        timings=BackendTimings(
            time_to_first_token_seconds=ttft,
            generation_seconds=0.5,
            tokens_per_second=None if ttft is None else 10.0,
            prompt_tokens=12,
        ),
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
    inputs = PreparedInputs(
        prompt="[video frames at 0.00 s, 1.50 s]\nDescribe.\n\n--- notes.txt ---\nhello",
        system_prompt="Be brief.",
        images=(_image((255, 0, 0)), _image((0, 9, 200), (2, 7))),
        video_frames=(
            VideoFrame(image=_image((1, 2, 3)), timestamp_seconds=0.0, index=0),
            VideoFrame(image=_image((4, 5, 6)), timestamp_seconds=1.5, index=1),
        ),
        file_names=("notes.txt",),
    )
    wire = inputs.to_wire()
    assert _plain(wire, allow_bytes=True)
    assert all(isinstance(item, bytes) for item in wire["images"])
    assert all(isinstance(frame["image"], bytes) for frame in wire["video_frames"])

    copy = PreparedInputs.from_wire(pickle.loads(pickle.dumps(wire)))

    assert (copy.prompt, copy.system_prompt, copy.file_names) == (
        inputs.prompt,
        inputs.system_prompt,
        inputs.file_names,
    )
    assert [(i.size, i.mode, i.tobytes()) for i in copy.images] == [
        (i.size, i.mode, i.tobytes()) for i in inputs.images
    ]
    assert [(f.index, f.timestamp_seconds, f.image.tobytes()) for f in copy.video_frames] == [
        (f.index, f.timestamp_seconds, f.image.tobytes()) for f in inputs.video_frames
    ]
