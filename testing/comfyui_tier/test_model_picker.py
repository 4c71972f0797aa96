"""The model picker in a real ComfyUI 0.33: what it lists, saved values off the list,
and a reference that cannot parse refused when the workflow is queued."""

from __future__ import annotations

import json
import urllib.error
from collections.abc import Iterator
from typing import Any

import pytest
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.checkpoints import SCRIPTED_ANSWER, write_checkpoint
from comfy_llm_testworld.frontend_workflow import to_api_prompt, widget_slots
from comfy_llm_testworld.real_comfyui import ComfyUIClient, ComfyUIServer


@pytest.fixture(scope="module", autouse=True)
def _unload_afterwards(client: ComfyUIClient) -> Iterator[None]:
    """Leave no resident model behind: other modules expect their first run cold."""
    yield
    client.free(unload_models=True)


CURATED = {"smolvlm-256m-instruct", "smolvlm2-500m-video-instruct", "qwen3.5-0.8b"}
"""Curated ids the CPU target (the tier's server) accepts; never the MLX or GPU-only ones."""
REFUSED_HERE = {"qwen3.5-2b-mlx-4bit", "smolvlm2-2.2b-instruct", "qwen3.5-2b"}


def _options(client: ComfyUIClient, node: str) -> list[str]:
    spec = client.object_info(node)["input"]["required"]["model_profile"]
    assert spec[0] == "COMBO", spec
    return list(spec[1]["options"])


def _seed_era_workflow(client: ComfyUIClient, model: str) -> dict[str, Any]:
    """A UI workflow as the seed node saved it: its widgets end at modal_gpu (no
    response_schema, no custom_model), its model a free-text value."""
    info = client.object_info("ModalLLM")
    slots = widget_slots(info)
    seed_slots = slots[: slots.index("modal_gpu") + 1]
    values = {
        "prompt": "Say the scripted answer.",
        "model_profile": model,
        "system_prompt": "",
        "max_new_tokens": 16,
        "enable_reasoning": True,
        "temperature": 0.0,
        "top_p": 0.95,
        "seed": 0,
        "seed:control_after_generate": "fixed",
        "video_frames": 8,
        "reserve_free_vram_gb": 4.0,
        "keep_model_loaded": True,
        "local_reserve_free_memory_gb": 4.0,
        "run_on_modal": False,
        "modal_gpu": "L40S",
    }
    assert seed_slots == list(values), seed_slots  # the seed's widget order, unchanged
    return {
        "nodes": [
            {
                "id": 10,
                "type": "ModalLLM",
                "mode": 0,
                "inputs": [],
                "widgets_values": [values[slot] for slot in seed_slots],
            },
            {
                "id": 21,
                "type": "PreviewAny",
                "mode": 0,
                "widgets_values": [],
                "inputs": [{"name": "source", "link": 1}],
            },
        ],
        "links": [[1, 10, 0, 21, 0, "STRING"]],
    }


def test_the_picker_lists_curated_staged_and_local(
    client: ComfyUIClient, server: ComfyUIServer, hub: FakeHub
) -> None:
    write_checkpoint("qwen3_5", server.root / "models" / "LLM" / "Qwen3.5-tiny", scripted=True)
    staged = client.run(
        to_api_prompt(
            _seed_era_workflow(client, "tiny/smolvlm-scripted"),
            {
                "ModalLLM": client.object_info("ModalLLM"),
                "PreviewAny": client.object_info("PreviewAny"),
            },
        )
    )
    assert staged.status == "execution_success", staged.error()
    pinned = f"tiny/smolvlm-scripted@{hub.head('tiny/smolvlm-scripted')}"
    for node in ("ModalLLM", "ComfyLLMCaption"):
        options = _options(client, node)
        assert options[0] == "smolvlm-256m-instruct"
        assert len(options) == len(set(options))  # each model once
        assert set(options) >= CURATED and not set(options) & REFUSED_HERE
        assert pinned in options  # staged by the run above, listed on the next /object_info
        assert "models/LLM/Qwen3.5-tiny" in options
        labels = client.object_info(node)["input"]["required"]["model_profile"][1]
        labels = labels["comfy_llm_labels"]  # the frontend extension's label map
        assert labels[pinned].startswith("tiny/smolvlm-scripted @ ")
        assert " · downloaded · " in labels[pinned]
        assert labels["smolvlm-256m-instruct"] == "SmolVLM 256M Instruct"

    # The local folder, picked from the list, runs in place.
    hub.clear_requests()
    picked = client.run(
        to_api_prompt(
            _seed_era_workflow(client, "models/LLM/Qwen3.5-tiny"),
            {
                "ModalLLM": client.object_info("ModalLLM"),
                "PreviewAny": client.object_info("PreviewAny"),
            },
        )
    )
    assert picked.status == "execution_success", picked.error()
    assert picked.text_of("21") == SCRIPTED_ANSWER
    assert hub.requests == []


def test_a_seed_era_workflow_with_a_model_off_the_list_loads_and_runs(
    client: ComfyUIClient,
) -> None:
    off_list = (
        "tiny/qwen35-scripted@main"  # never in the list: the list holds commits, not branches
    )
    assert off_list not in _options(client, "ModalLLM")
    workflow = _seed_era_workflow(client, off_list)
    info = {kind: client.object_info(kind) for kind in ("ModalLLM", "PreviewAny")}
    prompt = to_api_prompt(workflow, info)
    llm = prompt["10"]["inputs"]
    assert llm["model_profile"] == off_list
    assert llm["custom_model"] == "" and llm["response_schema"] == ""  # newer widgets: defaults
    run = client.run(prompt, workflow=workflow)
    assert run.status == "execution_success", run.error()
    assert run.text_of("21").endswith(SCRIPTED_ANSWER)  # SmolVLM has no reasoning parser


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("Qwen/Qwen3-VL 2B Instruct", "whitespace"),
        ("smolvlm-256m-instrct", "neither owner/model nor a known curated id"),
        ("https://huggingface.co/datasets/Qwen/x", "not a model page"),
        ("models/LLM/no-such-folder", "no such folder"),
    ],
)
def test_an_unparsable_model_profile_is_one_error_when_queued(
    client: ComfyUIClient, hub: FakeHub, value: str, words: str
) -> None:
    workflow = _seed_era_workflow(client, "tiny/qwen35-scripted")
    info = {kind: client.object_info(kind) for kind in ("ModalLLM", "PreviewAny")}
    prompt = to_api_prompt(workflow, info)
    prompt["10"]["inputs"]["model_profile"] = value
    hub.clear_requests()
    with pytest.raises(urllib.error.HTTPError) as refused:
        client.post_json("/prompt", {"prompt": prompt, "client_id": client.client_id})
    assert refused.value.code == 400
    body = json.loads(str(refused.value.reason).split(": ", 1)[1])
    errors = body["node_errors"]["10"]["errors"]
    # one bad value, one error (ComfyUI reports a refusal once per input validate_inputs
    # names: naming custom_model too had doubled it)
    assert len(errors) == 1, errors
    assert errors[0]["type"] == "custom_validation_failed"
    assert words in errors[0]["details"] and value in errors[0]["details"]
    assert hub.requests == []  # refused before anything was asked of the Hub


def test_a_bad_custom_model_is_one_error_naming_it_before_any_model_work(
    client: ComfyUIClient, hub: FakeHub
) -> None:
    workflow = _seed_era_workflow(client, "tiny/qwen35-scripted")
    info = {kind: client.object_info(kind) for kind in ("ModalLLM", "PreviewAny")}
    prompt = to_api_prompt(workflow, info)
    prompt["10"]["inputs"]["custom_model"] = "owner/model@"
    hub.clear_requests()
    run = client.run(prompt, workflow=workflow)
    assert run.status == "execution_error"
    error = run.error()
    assert error["node_id"] == "10" and error["exception_type"] == "ValueError", error
    assert error["exception_message"].startswith("custom_model: Model reference 'owner/model@'")
    assert hub.requests == []


def test_a_pasted_model_page_address_runs(client: ComfyUIClient, hub: FakeHub) -> None:
    address = (
        f"https://huggingface.co/tiny/qwen35-scripted/tree/{hub.head('tiny/qwen35-scripted')}/"
    )
    workflow = _seed_era_workflow(client, "smolvlm-256m-instruct")
    info = {kind: client.object_info(kind) for kind in ("ModalLLM", "PreviewAny")}
    prompt = to_api_prompt(workflow, info)
    prompt["10"]["inputs"]["custom_model"] = address
    run = client.run(prompt, workflow=workflow)
    assert run.status == "execution_success", run.error()
    assert run.text_of("21") == SCRIPTED_ANSWER
