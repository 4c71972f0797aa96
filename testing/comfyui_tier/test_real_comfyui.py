"""The node inside a real ComfyUI 0.33 server, driven as the frontend drives it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.checkpoints import SCRIPTED_ANSWER, SCRIPTED_REASONING
from comfy_llm_testworld.media import write_test_video
from comfy_llm_testworld.real_comfyui import ComfyUIClient, ComfyUIServer, PromptRun

LLM = "10"


def _llm(**inputs: Any) -> dict[str, Any]:
    values = {
        "prompt": "Say the scripted answer.",
        "model_profile": "tiny/qwen35-scripted",
        "temperature": 0.0,
        "max_new_tokens": 16,
        "seed": 0,
        **inputs,
    }
    return {"class_type": "ModalLLM", "inputs": values}


def _with_previews(nodes: dict[str, Any]) -> dict[str, Any]:
    """Preview as Text on each of the node's three outputs (nodes 21, 22, 23)."""
    previews = {
        str(21 + slot): {"class_type": "PreviewAny", "inputs": {"source": [LLM, slot]}}
        for slot in range(3)
    }
    return {**nodes, **previews}


def _outputs(run: PromptRun) -> tuple[str, dict[str, Any], str]:
    assert run.status == "execution_success", run.error()
    return run.text_of("21"), json.loads(run.text_of("22")), run.text_of("23")


def _assert_forward_to_full(run: PromptRun) -> list[tuple[float, float]]:
    bar = run.progress(LLM)
    values = [value for value, _ in bar]
    assert values == sorted(set(values)), values  # only ever forward
    assert bar[-1][0] == bar[-1][1], bar  # ends full ...
    assert sum(1 for value, top in bar if value >= top) == 1, bar  # ... exactly once
    return bar


def test_object_info_lists_the_node_as_declared(client: ComfyUIClient) -> None:
    info = client.object_info("ModalLLM")
    assert info["output_name"] == ["response", "metadata_json", "reasoning"]
    assert info["input_order"]["required"] == ["prompt", "model_profile"]
    optional = info["input_order"]["optional"]
    assert optional[:3] == ["images", "video", "files"]
    assert info["input"]["optional"]["files"][0] == "OPENAI_INPUT_FILES"


def test_scripted_answer_reasoning_progress_and_warm_repeat(
    client: ComfyUIClient, hub: FakeHub, measurements: dict[str, Any]
) -> None:
    cold = client.run(_with_previews({LLM: _llm()}))
    response, metadata, reasoning = _outputs(cold)
    assert (response, reasoning) == (SCRIPTED_ANSWER, SCRIPTED_REASONING)
    assert metadata["cache_status"] == "cold"
    assert metadata["reasoning_tokens"] == 2
    bar = _assert_forward_to_full(cold)
    # the bar is seen between empty and full (ComfyUI sends at most one move per 100 ms)
    assert any(0 < value < top for value, top in bar), bar
    texts = [text for node, text in cold.texts if node == LLM]
    assert any(text.startswith("download") for text in texts), texts
    # the final live text: the answer first, then the reasoning
    assert texts[-1] == f"Answer:\n{SCRIPTED_ANSWER}\n\nReasoning:\n{SCRIPTED_REASONING}"
    measurements["progress_messages_cold"] = len(bar)
    # the snapshot just downloaded into models/modal_llm is not listed as a model
    assert client.get_json("/models/modal_llm") == []

    hub.clear_requests()
    warm = client.run(_with_previews({LLM: _llm(prompt="Again, please.")}))
    response, metadata, reasoning = _outputs(warm)
    assert (response, reasoning) == (SCRIPTED_ANSWER, SCRIPTED_REASONING)
    assert metadata["cache_status"] == "warm"
    assert hub.file_requests() == []  # nothing fetched again
    _assert_forward_to_full(warm)
    measurements["progress_messages_warm"] = len(warm.progress(LLM))
    measurements["warm_tokens_per_second"] = metadata["tokens_per_second"]
    measurements["warm_request_seconds"] = round(warm.seconds, 3)


def test_trimmed_video_from_video_slice(
    client: ComfyUIClient, server: ComfyUIServer, tmp_path: Path
) -> None:
    clip = write_test_video(tmp_path / "tier_clip.mp4", frames=30, fps=10)  # 3 s
    name = client.upload(clip)
    graph = {
        "1": {"class_type": "LoadVideo", "inputs": {"file": name}},
        "2": {
            "class_type": "Video Slice",
            "inputs": {
                "video": ["1", 0],
                "start_time": 1.0,
                "duration": 0.5,
                "strict_duration": False,
            },
        },
    }
    whole = client.run(_with_previews({**graph, LLM: _llm(video=["1", 0], video_frames=8)}))
    trimmed = client.run(_with_previews({**graph, LLM: _llm(video=["2", 0], video_frames=8)}))
    assert _outputs(whole)[1]["video_frame_count"] == 8
    assert _outputs(trimmed)[1]["video_frame_count"] == 5  # frames at 1.0 .. 1.4 s


def test_openai_input_files(client: ComfyUIClient, tmp_path: Path) -> None:
    notes = tmp_path / "tier_notes.txt"
    notes.write_text("A red square moves from left to right.\n", encoding="utf-8")
    name = client.upload(notes)
    graph = {
        "1": {"class_type": "OpenAIInputFiles", "inputs": {"file": name}},
        LLM: _llm(files=["1", 0]),
    }
    _, metadata, _ = _outputs(client.run(_with_previews(graph)))
    assert metadata["file_count"] == 1


def test_interrupt_then_a_successful_run(
    client: ComfyUIClient, measurements: dict[str, Any]
) -> None:
    pressed: list[float] = []

    def cancel_once_generating(run: PromptRun, kind: str, data: dict[str, Any]) -> None:
        # The live text shows generated text: the model is generating; press Cancel.
        live = kind == "progress_text" and data["node"] == LLM
        if live and data["text"].startswith(("Reasoning", "Answer")) and not pressed:
            client.interrupt()
            pressed.append(time.monotonic())

    long = _llm(model_profile="tiny/qwen35", max_new_tokens=4000, prompt="Ramble on.")
    stopped = client.run(_with_previews({LLM: long}), on_message=cancel_once_generating)
    ended = time.monotonic()
    assert pressed, "generation ended before Cancel could be pressed"
    assert stopped.status == "execution_interrupted", stopped.messages[-3:]
    latency = ended - pressed[0]
    measurements["interrupt_latency_seconds"] = round(latency, 3)
    # how long the model kept generating after Cancel (live text still arriving)
    last_text = max(stopped.text_times)
    measurements["interrupt_last_live_text_after_seconds"] = round(last_text - pressed[0], 3)
    assert latency < 5.0

    response, _, _ = _outputs(client.run(_with_previews({LLM: _llm()})))
    assert response == SCRIPTED_ANSWER  # the lock was released, the next run works


def test_free_then_a_cold_run(client: ComfyUIClient) -> None:
    _outputs(client.run(_with_previews({LLM: _llm(prompt="Before the unload.")})))
    # "Unload models": ComfyUI's unload_all_models() reaches the resident LLM too
    client.free(unload_models=True, free_memory=True)
    # ComfyUI's prompt worker applies the flag when it wakes, before it takes the next
    # prompt only if that prompt comes later: a user clicks Run after Unload, not with it
    time.sleep(2.0)
    response, metadata, _ = _outputs(client.run(_with_previews({LLM: _llm(prompt="After.")})))
    assert response == SCRIPTED_ANSWER
    assert metadata["cache_status"] == "cold"
    assert metadata["evicted_by_host"] is True  # ComfyUI's unload reached the resident LLM


def test_caption_node_writes_a_caption_per_image_of_a_folder(
    client: ComfyUIClient, tmp_path: Path
) -> None:
    from PIL import Image

    info = client.object_info("ComfyLLMCaption")
    assert info["output_is_list"][0] is True  # one caption per image, in order
    folder = tmp_path / "dataset"
    folder.mkdir()
    for index, color in enumerate(("red", "green", "blue")):
        Image.new("RGB", (32, 32), color).save(folder / f"img_{index}.png")
    (folder / "img_1.txt").write_text("kept caption", encoding="utf-8")
    (folder / "img_3.png").write_bytes(b"not a png")  # corrupt: reported, the rest go on
    caption = {
        "class_type": "ComfyLLMCaption",
        "inputs": {
            "model_profile": "tiny/qwen35-scripted",
            "prompt": "Caption this image.",
            "folder": str(folder),
            "caption_prefix": "ohwx",
            "write_caption_files": True,
            "skip_existing": True,
            "temperature": 0.0,
            "max_new_tokens": 16,
            "seed": 0,
        },
    }
    graph = {
        "30": caption,
        "31": {"class_type": "PreviewAny", "inputs": {"source": ["30", 0]}},
        "32": {"class_type": "PreviewAny", "inputs": {"source": ["30", 1]}},
    }
    run = client.run(graph)
    assert run.status == "execution_success", run.error()
    metadata = json.loads(run.text_of("32"))
    # PreviewAny ran once per list item: one per image in folder order, the kept
    # caption as it is on disk, "" for the corrupt image
    captions = run.outputs["31"]["text"]
    written = f"ohwx, {SCRIPTED_ANSWER}"
    assert captions == [written, "kept caption", written, ""], captions
    for index in (0, 2):
        assert (folder / f"img_{index}.txt").read_text(encoding="utf-8") == written + "\n"
    assert (folder / "img_1.txt").read_text(encoding="utf-8") == "kept caption"
    assert not (folder / "img_3.txt").exists()
    assert json.dumps(metadata).count("img_3.png") >= 1  # the corrupt one, named
    bar = run.progress("30")
    assert bar and bar[-1][0] == bar[-1][1], bar


def test_a_response_schema_makes_random_weights_answer_valid_json(client: ComfyUIClient) -> None:
    schema = {
        "type": "object",
        "properties": {"color": {"enum": ["red", "blue"]}, "n": {"type": "integer", "maximum": 9}},
        "required": ["color", "n"],
        "additionalProperties": False,
    }
    answer = _llm(
        model_profile="tiny/qwen35",  # random weights: only the constraint makes this JSON
        response_schema=json.dumps(schema),
        enable_reasoning=False,
        max_new_tokens=48,
    )
    response, metadata, _ = _outputs(client.run(_with_previews({LLM: answer})))
    value = json.loads(response)
    assert set(value) == {"color", "n"}
    assert value["color"] in ("red", "blue")
    assert isinstance(value["n"], int) and value["n"] <= 9
    assert metadata["schema_valid"] is True and metadata["constrained_decoding"] is True
