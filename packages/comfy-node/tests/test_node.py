"""The ModalLLM node through a ComfyUI stand-in, with real engines on the CPU."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from comfy_llm_core import install_command
from comfy_llm_testworld import FakeHub

TARGETS = ["local_cpu", "local_apple"]


def _node(comfyui: Path) -> Any:
    from comfy_api.latest import io
    from comfy_llm._comfyui._modal_llm import ModalLLMNode

    ModalLLMNode.hidden = io.HiddenHolder(unique_id="7")
    return ModalLLMNode


def _execute(node: Any, **kwargs: Any) -> tuple[str, dict[str, Any], str]:
    kwargs.setdefault("temperature", 0.0)
    output = node.execute(**kwargs)
    response, metadata_json, reasoning = output.args
    return response, json.loads(metadata_json), reasoning


@pytest.fixture
def target(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", request.param)
    return request.param


def test_schema_keeps_the_seed_node_contract(comfyui: Path) -> None:
    schema = _node(comfyui).define_schema()
    assert schema.node_id == "ModalLLM"
    names = [item.id for item in schema.inputs]
    assert names[:2] == ["prompt", "model_profile"]
    for name in (
        "images",
        "video",
        "files",
        "system_prompt",
        "max_new_tokens",
        "enable_reasoning",
        "temperature",
        "top_p",
        "seed",
        "video_frames",
        "reserve_free_vram_gb",
        "keep_model_loaded",
        "local_reserve_free_memory_gb",
        "run_on_modal",
        "modal_gpu",
    ):
        assert name in names
    assert [o.id for o in schema.outputs] == ["response", "metadata_json", "reasoning"]
    assert schema.not_idempotent is True
    files_input = next(item for item in schema.inputs if item.id == "files")
    assert files_input.io_type == "OPENAI_INPUT_FILES"


def test_every_input_and_output_explains_itself(comfyui: Path) -> None:
    schema = _node(comfyui).define_schema()
    for item in [*schema.inputs, *schema.outputs]:
        assert item.tooltip and len(item.tooltip) > 20, item.id
    by_name = {item.id: item for item in schema.inputs}
    # each reserve names the targets it applies to
    assert "Modal GPU" in by_name["reserve_free_vram_gb"].tooltip
    for target in ("NVIDIA", "Apple", "CPU"):
        assert target in by_name["local_reserve_free_memory_gb"].tooltip
    expert = {name for name, item in by_name.items() if item.options.get("advanced")}
    assert expert == {
        "system_prompt",
        "temperature",
        "top_p",
        "reserve_free_vram_gb",
        "local_reserve_free_memory_gb",
        "run_on_modal",
        "modal_gpu",
        "response_schema",
    }
    assert by_name["seed"].options["control_after_generate"] == "fixed"
    for name in ("run_on_modal", "modal_gpu"):
        assert "not available" not in (by_name[name].display_name or "")
    assert install_command("modal") in by_name["run_on_modal"].tooltip
    assert {"LLM", "VLM", "caption", "describe", "vision"} <= set(schema.search_aliases)


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS, indirect=True)
def test_scripted_answer_then_warm_hit(
    target: str, model_hub: FakeHub, storage: Path, comfyui: Path
) -> None:
    import comfy.utils
    from server import PromptServer

    node = _node(comfyui)
    image = np.random.default_rng(0).random((1, 24, 32, 3), dtype=np.float32)
    response, metadata, reasoning = _execute(
        node, prompt="What is this?", model_profile="tiny/qwen35-scripted", images=image
    )
    assert (response, reasoning) == ("answer", "a b")
    assert metadata["output_tokens"] == 5 and metadata["reasoning_tokens"] == 2
    assert metadata["cache_status"] == "cold"
    assert metadata["execution_target"] == target
    assert metadata["image_count"] == 1
    assert "comfyui_managed_models" in metadata
    assert "hf_test_token" not in json.dumps(metadata)
    # ComfyUI saw progress on its bar and the live text, labelled.
    assert any(node_id == "7" for node_id, _, _ in comfy.utils.updates)
    texts = [text for node_id, text in PromptServer.instance.progress_texts if node_id == "7"]
    assert any(text.startswith("Loading") for text in texts)
    assert texts[-1] == "Answer:\nanswer\n\nReasoning:\na b"  # the answer first
    # Second request: warm, no reload.
    response, metadata, _ = _execute(
        node, prompt="Again", model_profile="tiny/qwen35-scripted", images=image
    )
    assert response == "answer"
    assert metadata["cache_status"] == "warm"


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS, indirect=True)
def test_reasoning_disabled_gives_an_empty_channel(
    target: str, model_hub: FakeHub, storage: Path, comfyui: Path
) -> None:
    response, metadata, reasoning = _execute(
        _node(comfyui), prompt="hi", model_profile="tiny/qwen35-scripted", enable_reasoning=False
    )
    assert reasoning == "" and response == "answer"
    assert metadata["reasoning_enabled"] is False


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS, indirect=True)
def test_smolvlm_with_video_and_openai_files(
    target: str, model_hub: FakeHub, storage: Path, comfyui: Path, tmp_path: Path
) -> None:
    import base64

    from comfy_llm_testworld.media import write_test_video

    class VideoFromFile:  # ComfyUI's VIDEO: a file-backed source
        def __init__(self, path: Path) -> None:
            self._path = path

        def get_stream_source(self) -> str:
            return str(self._path)

    class InputFileContent:  # ComfyUI's OPENAI_INPUT_FILES item
        def __init__(self, name: str, text: str) -> None:
            self.filename = name
            self.file_data = "data:text/plain;base64," + base64.b64encode(text.encode()).decode()
            self.file_id = None
            self.type = "input_file"

    video = VideoFromFile(write_test_video(tmp_path / "clip.mp4", frames=20, fps=10))
    _, metadata, _ = _execute(
        _node(comfyui),
        prompt="Summarise.",
        model_profile="tiny/smolvlm",
        video=video,
        video_frames=3,
        files=[InputFileContent("notes.txt", "a red square moves")],
        max_new_tokens=4,
    )
    assert metadata["video_frame_count"] == 3
    assert metadata["file_count"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS, indirect=True)
def test_interrupt_after_a_few_tokens_keeps_the_model_resident(
    target: str, model_hub: FakeHub, storage: Path, comfyui: Path
) -> None:
    import comfy.model_management as mm
    from comfy_llm_residency import get_manager

    node = _node(comfyui)
    _execute(node, prompt="warm up", model_profile="tiny/qwen35-scripted")
    mm.interrupt_after_checks = 3  # ComfyUI's Cancel, three checks from now
    with pytest.raises(mm.InterruptProcessingException):
        _execute(node, prompt="stop me", model_profile="tiny/qwen35-scripted")
    mm.interrupt_after_checks = None
    manager = get_manager(target, backend_factory=None)  # type: ignore[arg-type]
    assert len(manager.state().resident_profiles) == 1
    # The lock is free: the next request runs at once, warm.
    _, metadata, _ = _execute(node, prompt="again", model_profile="tiny/qwen35-scripted")
    assert metadata["cache_status"] == "warm"


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS, indirect=True)
def test_two_threads_are_served_one_at_a_time(
    target: str, model_hub: FakeHub, storage: Path, comfyui: Path
) -> None:
    node = _node(comfyui)
    results: list[str] = []
    errors: list[BaseException] = []

    def call() -> None:
        try:
            results.append(_execute(node, prompt="hi", model_profile="tiny/qwen35-scripted")[0])
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=call) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert errors == []
    assert results == ["answer", "answer"]


@pytest.mark.slow
def test_limit_of_one_evicts_the_older_profile(
    model_hub: FakeHub, storage: Path, comfyui: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from comfy_llm_residency import get_manager

    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    monkeypatch.setenv("COMFY_MODAL_LOCAL_LLM_MAX_RESIDENT_MODELS", "1")
    node = _node(comfyui)
    _execute(node, prompt="a", model_profile="tiny/qwen35-scripted")
    _execute(node, prompt="b", model_profile="tiny/smolvlm-scripted")
    resident = get_manager("local_cpu", backend_factory=None).state().resident_profiles  # type: ignore[arg-type]
    assert len(resident) == 1
    _, metadata, _ = _execute(node, prompt="c", model_profile="tiny/qwen35-scripted")
    assert metadata["cache_status"] == "cold"


@pytest.mark.parametrize("target", TARGETS, indirect=True)
@pytest.mark.parametrize(
    ("model", "budget", "answered"),
    [
        # the template opened no think block: cut before </think>, "a b" is the answer
        ("tiny/qwen35-unopened", 2, True),
        ("tiny/qwen35-unopened", 16, True),
        # the template opened it: cut inside, the answer is empty
        ("tiny/qwen35-scripted", 2, False),
    ],
)
def test_the_live_label_follows_the_parse_the_outputs_get(
    target: str,
    model_hub: FakeHub,
    storage: Path,
    comfyui: Path,
    monkeypatch: pytest.MonkeyPatch,
    model: str,
    budget: int,
    answered: bool,
) -> None:
    # issue 20 item 8: the backend reports whether the rendered prompt opened <think>,
    # and the live text is split by the parser the outputs go through
    import functools

    from comfy_llm._comfyui import _run
    from comfy_llm._comfyui._glue import ComfyGlue
    from comfy_llm_residency import _generation
    from server import PromptServer

    # every live text is sent (no 0.25 s spacing, and a GENERATE event for every token,
    # not at most 20 a second), so each token's label is seen
    monkeypatch.setattr(_run, "ComfyGlue", functools.partial(ComfyGlue, text_interval=0))
    monkeypatch.setattr(_generation, "STEP_EVENT_SECONDS", 0.0)
    PromptServer.instance.progress_texts.clear()
    response, metadata, reasoning = _execute(
        _node(comfyui), prompt="Hi", model_profile=model, max_new_tokens=budget, seed=0
    )
    assert bool(response) is answered, (response, reasoning)
    texts = [text for node_id, text in PromptServer.instance.progress_texts if node_id == "7"]
    live = [text for text in texts[:-1] if text.startswith(("Answer:", "Thinking"))]
    # a live text per token whose text changed (the glue never re-sends the text
    # the node already shows), before the final text
    assert live, texts
    # the last live text is the outputs' split of the whole generation
    truncated = metadata["reasoning_truncated"]
    label = "Thinking…" if truncated and not response else "Answer:"
    assert live[-1].startswith(label), (live, response, reasoning)
    assert live[-1].startswith(f"Answer:\n{response}") or not response, live
    if reasoning:
        assert live[-1].endswith(f"Reasoning:\n{reasoning}"), (live, reasoning)
    else:
        assert "Reasoning:" not in live[-1], live
    if truncated or not reasoning:  # no </think> came: the split never moved
        assert all(text.startswith(label) for text in live), live


def test_run_on_modal_is_refused_clearly(model_hub: FakeHub, storage: Path, comfyui: Path) -> None:
    with pytest.raises(RuntimeError, match="run_on_modal") as caught:
        _execute(_node(comfyui), prompt="hi", model_profile="tiny/qwen35", run_on_modal=True)
    assert type(caught.value).__module__ == "builtins"  # ComfyUI shows no module path


@pytest.mark.slow
def test_a_warm_request_makes_no_hub_request(
    model_hub: FakeHub, storage: Path, comfyui: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    node = _node(comfyui)
    _execute(node, prompt="a", model_profile="tiny/qwen35-scripted")
    model_hub.clear_requests()
    _, metadata, _ = _execute(node, prompt="b", model_profile="tiny/qwen35-scripted")
    assert metadata["cache_status"] == "warm"
    assert model_hub.requests == []


def test_snapshot_files_are_never_listed_as_comfyui_models(comfyui: Path, tmp_path: Path) -> None:
    import folder_paths
    from comfy_llm._storage import register_model_folder

    root = tmp_path / "modal_llm"
    partial = root / "llm_models" / "repo-x" / ("a" * 40 + ".partial")
    (partial / ".cache" / "huggingface" / "download").mkdir(parents=True)
    (partial / "model.safetensors").write_bytes(b"half")
    (partial / "config.json").write_text("{}")
    (partial / ".cache" / "huggingface" / "download" / "model.safetensors.incomplete").touch()
    register_model_folder(root)
    assert folder_paths.get_folder_paths("modal_llm") == [str(root)]
    assert folder_paths.get_filename_list("modal_llm") == []


def test_the_answer_is_ui_output_so_it_survives_a_reload(
    model_hub: FakeHub, storage: Path, comfyui: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ComfyUI keeps a node's UI output in the prompt's history (the browser shows it
    # again after a reload) and, with has_intermediate_output, re-sends it when the
    # node is taken from the cache; the live status text is not kept.
    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    node = _node(comfyui)
    assert node.define_schema().has_intermediate_output is True
    output = node.execute(prompt="hi", model_profile="tiny/qwen35-scripted", temperature=0.0)
    assert output.args[0] == "answer"
    # ``text`` is ui.PreviewText("answer").as_dict(); the reasoning is for the node's
    # web extension, which shows it folded (answer_ui)
    assert output.ui == {"text": ["answer"], "reasoning": [output.args[2]]}
    assert output.args[2]
