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


def _assert_forward_to_full(run: PromptRun, node: str = LLM) -> list[tuple[float, float]]:
    """Each phase has its own bar (it may start again from empty); full once, at the end."""
    bar = run.progress(node)
    assert bar[-1][0] == bar[-1][1], bar  # ends full ...
    assert sum(1 for value, top in bar if value >= top) == 1, bar  # ... exactly once
    return bar


STAGE_KEYS = ("inspect:", "download:", "prepare_inputs:", "admission:", "load:", "generate:")


def _timeline(client: ComfyUIClient, graph: dict[str, Any], node: str = LLM) -> Any:
    """Run ``graph``; return the run and its bar moves and texts for ``node``, in order."""
    events: list[tuple[str, Any]] = []

    def record(run: PromptRun, kind: str, data: dict[str, Any]) -> None:
        if str(data.get("node")) != node:
            return
        if kind == "progress":
            events.append(("bar", float(data["value"]) / float(data["max"])))
        elif kind == "progress_text":
            events.append(("text", data["text"]))

    return client.run(graph, on_message=record), events


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
    # each phase shows its own bar from empty (download, load, generate): a phase's
    # moves inside it may all fall under ComfyUI's 100 ms throttle on a fast machine
    # (5 tokens), so they are checked on a long run (the token-budget test)
    assert sum(1 for value, top in bar[:-1] if value == 0) >= 2, bar
    texts = [text for node, text in cold.texts if node == LLM]
    # plain words, not stage keys
    assert texts[0] == "Starting", texts
    # "Checking the model" shows only when this run inspects the Hub: the browser tests
    # (run first, same server) may already have pinned this model
    # the download's words say whether anything downloads (earlier tests on this server
    # may have staged the model already)
    fetched = "Downloading" if metadata["snapshot_downloaded"] else "Already downloaded"
    assert any(text.startswith(fetched) for text in texts), texts
    assert not [text for text in texts if text.startswith(STAGE_KEYS)], texts
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
        if live and data["text"].startswith(("Thinking", "Answer")) and not pressed:
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


def test_free_then_a_cold_run(client: ComfyUIClient, server: ComfyUIServer) -> None:
    _outputs(client.run(_with_previews({LLM: _llm(prompt="Before the unload.")})))
    unloaded = "comfy-llm: unloaded "  # the node's one log line when ComfyUI unloads it
    before = server.log(tail=10**9).count(unloaded)
    # "Unload models": ComfyUI's unload_all_models() reaches the resident LLM too
    client.free(unload_models=True, free_memory=True)
    # ComfyUI's prompt worker applies the flag when it wakes, before it takes the next
    # prompt only if that prompt comes later: a user clicks Run after Unload, not with
    # it. Wait until it has (its log says so), not for a time: a loaded machine wakes late.
    deadline = time.monotonic() + 120
    while server.log(tail=10**9).count(unloaded) == before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert server.log(tail=10**9).count(unloaded) > before, server.log()
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


def test_generation_moves_the_bar_by_tokens_against_the_budget(client: ComfyUIClient) -> None:
    run, events = _timeline(client, _with_previews({LLM: _llm(max_new_tokens=16)}))
    _outputs(run)
    bar = [value for kind, value in events if kind == "bar"]
    # each phase starts a fresh, empty bar; the last phase is generation
    generating = bar[len(bar) - 1 - bar[::-1].index(0.0) :]
    assert generating[-1] == 1.0 and bar.count(1.0) == 1, bar
    # 5 tokens of a 16-token budget: the bar stands at 5/16 or less until the end fills it
    assert all(value <= 5 / 16 for value in generating[:-1]), bar


def test_the_status_of_the_last_run_is_replaced_at_once(client: ComfyUIClient) -> None:
    failed = client.run(_with_previews({LLM: _llm(model_profile="acme/nope")}))
    assert failed.status == "execution_error"
    # the next run fails earlier, while checking its settings: it still replaces the text
    again = client.run(_with_previews({LLM: _llm(response_schema="{not json")}))
    assert again.status == "execution_error"
    texts = [text for node, text in again.texts if node == LLM]
    assert texts and texts[0] == "Starting", texts
    assert texts[-1].startswith("Stopped:"), texts
    assert not [text for text in texts if "acme/nope" in text], texts


def test_an_error_shown_names_no_module_and_the_log_keeps_the_class(
    client: ComfyUIClient, server: ComfyUIServer
) -> None:
    # 4096 is the tiny checkpoints' context: this prompt fills it on a CPU run
    failed = client.run(_with_previews({LLM: _llm(prompt="word " * 6000, max_new_tokens=4)}))
    assert failed.status == "execution_error"
    error = failed.error()
    # what the frontend shows: the type (execution.py full_type_name) and the message
    assert error["exception_type"] == "ValueError", error["exception_type"]
    message = error["exception_message"]
    assert "context limit is 4096" in message and "Shorten the prompt" in message, message
    assert "comfy_llm" not in message, message
    texts = [text for node, text in failed.texts if node == LLM]
    assert texts[-1].startswith("Stopped: The prompt is "), texts[-1]
    assert "comfy_llm" not in texts[-1] and "Error" not in texts[-1], texts[-1]
    # the server log keeps the class (the note, and the chained original)
    log = server.log(tail=200_000)
    assert "comfy-llm error class: " in log and "PromptTooLongError (action: fix_input)" in log


def test_long_live_text_keeps_to_its_last_lines(client: ComfyUIClient) -> None:
    # the cut itself is exercised on the stand-in (test_glue); here: what reaches the node
    from comfy_llm._comfyui._glue import LIVE_TEXT_MAX_CHARS, LIVE_TEXT_MAX_LINES

    rambling = _llm(model_profile="tiny/qwen35", max_new_tokens=600, prompt="Ramble on.")
    run = client.run(
        _with_previews(
            {LLM: {**rambling, "inputs": {**rambling["inputs"], "temperature": 1.0, "seed": 3}}}
        )
    )
    _outputs(run)
    texts = [text for node, text in run.texts if node == LLM]
    assert len(texts) >= 3, texts
    for text in texts:
        assert len(text) <= LIVE_TEXT_MAX_CHARS + 400, len(text)
        assert text.count("\n") <= 2 * LIVE_TEXT_MAX_LINES + 6, text


def test_a_budget_spent_reasoning_is_explained_on_the_node(client: ComfyUIClient) -> None:
    run = client.run(_with_previews({LLM: _llm(max_new_tokens=1)}))
    response, metadata, _ = _outputs(run)
    assert response == ""
    expected = (
        "The answer is empty: the model used all 1 token while reasoning; "
        "raise max_new_tokens or turn enable_reasoning off."
    )
    assert metadata["empty_answer"]["message"] == expected
    texts = [text for node, text in run.texts if node == LLM]
    assert expected in texts[-1], texts[-1]


def test_the_live_label_agrees_with_the_outputs_when_the_budget_ends(
    client: ComfyUIClient,
) -> None:
    # issue 20 item 8: enable_reasoning on, a template that opens no think block, and a
    # budget that ends before any </think>: the tokens are the answer, live and at the end
    rambling = _llm(model_profile="tiny/qwen35-unopened", max_new_tokens=200, prompt="Go.")
    graph = {LLM: {**rambling, "inputs": {**rambling["inputs"], "temperature": 1.0, "seed": 3}}}
    run = client.run(_with_previews(graph))
    response, metadata, reasoning = _outputs(run)
    assert metadata["finish_reason"] == "length" and response, metadata
    assert reasoning == "" and metadata["reasoning_truncated"] is False
    texts = [text for node, text in run.texts if node == LLM]
    live = [text for text in texts[:-1] if text.startswith(("Answer:", "Thinking"))]
    assert len(live) >= 2, texts
    assert all(text.startswith("Answer:") and "Reasoning:" not in text for text in live), live


def test_a_seed_era_workflow_keeps_the_local_reserve_on_a_local_run(client: ComfyUIClient) -> None:
    seed_era = _llm(reserve_free_vram_gb=24.0, local_reserve_free_memory_gb=4.0)
    _, metadata, _ = _outputs(client.run(_with_previews({LLM: seed_era})))
    assert metadata["reserve_gb"] == 4.0  # 24 GiB is the Modal GPU's reserve


def test_the_caption_node_shares_modal_llms_widgets(client: ComfyUIClient) -> None:
    llm, caption = client.object_info("ModalLLM"), client.object_info("ComfyLLMCaption")
    shared = [
        "prompt",
        "model_profile",
        "system_prompt",
        "max_new_tokens",
        "enable_reasoning",
        "temperature",
        "top_p",
        "seed",
        "keep_model_loaded",
        "response_schema",
    ]

    def order(info: dict[str, Any]) -> list[str]:
        names = info["input_order"]["required"] + info["input_order"].get("optional", [])
        return [name for name in names if name in shared]

    assert order(caption) == order(llm)
    specs = {**caption["input"]["required"], **caption["input"]["optional"]}
    llm_specs = {**llm["input"]["required"], **llm["input"]["optional"]}
    assert specs["model_profile"][1]["default"] == llm_specs["model_profile"][1]["default"]
    for name in shared:
        assert len(specs[name][1].get("tooltip", "")) > 20, name
    assert specs["seed"][1]["control_after_generate"] == "fixed"
    assert all(len(tip) > 20 for tip in caption["output_tooltips"]), caption["output_tooltips"]
    assert "caption" in caption.get("search_aliases", [])
    assert caption["output_node"] is True


def test_the_caption_node_runs_alone_and_shows_what_it_wrote(
    client: ComfyUIClient, tmp_path: Path
) -> None:
    import stat

    from PIL import Image

    folder = tmp_path / "alone"
    folder.mkdir()
    for index, color in enumerate(("red", "green", "blue")):
        Image.new("RGB", (32, 32), color).save(folder / f"img_{index}.png")
    caption = {
        "class_type": "ComfyLLMCaption",
        "inputs": {
            "model_profile": "tiny/qwen35-scripted",
            "prompt": "Caption this image.",
            "folder": str(folder),
            "write_caption_files": True,
            "temperature": 0.0,
            "max_new_tokens": 16,
            "seed": 0,
            "batch_size": 1,
        },
    }
    run, events = _timeline(client, {"40": caption}, node="40")  # no preview node wired
    assert run.status == "execution_success", run.error()
    for index in range(3):
        written = folder / f"img_{index}.txt"
        assert written.read_text(encoding="utf-8") == f"{SCRIPTED_ANSWER}\n"
        assert stat.S_IMODE(written.stat().st_mode) == 0o644  # as an editor writes it
    summary = run.outputs["40"]["text"][0]
    assert summary.startswith("Captioned 3 of 3, kept 0, failed 0; wrote 3 caption files.")
    assert f"img_0.png: {SCRIPTED_ANSWER}" in summary
    texts = [value for kind, value in events if kind == "text"]
    assert texts[-1] == summary
    # the status follows the batch: images done / total and the current file
    assert any(text.startswith("Captioning 1/3: img_0.png") for text in texts), texts
    assert not [text for text in texts if text.startswith(STAGE_KEYS)], texts
    # the bar counts images once generation starts, and fills once at the end
    first = next(i for i, (k, v) in enumerate(events) if k == "text" and v.startswith("Caption"))
    generating = [value for kind, value in events[first:] if kind == "bar"]
    assert generating[-1] == 1.0 and all(value < 1.0 for value in generating[:-1]), events
