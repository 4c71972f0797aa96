"""The example workflows, loaded from the real server as the frontend loads templates,
converted the frontend's way (widget slots included) and run green."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_testworld.frontend_workflow import to_api_prompt, widget_slots
from comfy_llm_testworld.real_comfyui import ComfyUIClient, ComfyUIServer

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(path.stem for path in (REPO_ROOT / "example_workflows").glob("*.json"))
FOLDER = "comfy-llm"  # the custom_nodes folder the README's way 1 clones into


def _fetch(client: ComfyUIClient, path: str) -> tuple[str, bytes]:
    with urllib.request.urlopen(f"{client.url}{urllib.parse.quote(path)}", timeout=60) as reply:
        return reply.headers.get("Content-Type", ""), reply.read()


def _media_is_listed(workflow: dict[str, Any], info: dict[str, Any]) -> None:
    """Every file a loader names is already among its choices (nothing to upload): the
    node copied its samples into input/ at start-up, or ComfyUI ships the file."""
    for node in workflow["nodes"]:
        if node["type"] in {"LoadImage", "LoadVideo", "OpenAIInputFiles"}:
            spec = next(iter(info[node["type"]]["input"]["required"].values()))
            choices = spec[0] if isinstance(spec[0], list) else spec[1].get("options", [])
            assert node["widgets_values"][0] in choices, (node["type"], node["widgets_values"])


def test_the_server_lists_every_example_with_its_thumbnail(client: ComfyUIClient) -> None:
    listed = client.get_json("/workflow_templates")
    assert sorted(listed[FOLDER]) == EXAMPLES
    for name in EXAMPLES:
        kind, body = _fetch(client, f"/api/workflow_templates/{FOLDER}/{name}.jpg")
        assert kind == "image/jpeg" and body[:3] == b"\xff\xd8\xff", name


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_loads_as_saved_and_runs(
    name: str, client: ComfyUIClient, server: ComfyUIServer
) -> None:
    _, body = _fetch(client, f"/api/workflow_templates/{FOLDER}/{name}.json")
    workflow = json.loads(body)
    types = {node["type"] for node in workflow["nodes"]}
    info = {kind: client.object_info(kind) for kind in types}
    for node in workflow["nodes"]:
        # exactly the frontend's slots: nothing shifts when the UI loads it
        assert len(node["widgets_values"]) == len(widget_slots(info[node["type"]])), node["type"]
    prompt = to_api_prompt(workflow, info)
    if "ComfyLLMCaption" in types:
        _lora_template_runs(client, server, workflow, prompt)
        return
    llm = next(node for node in prompt.values() if node["class_type"] == "ModalLLM")
    assert llm["inputs"]["run_on_modal"] is False
    assert (
        llm["inputs"]["modal_gpu"]
        in info["ModalLLM"]["input"]["optional"]["modal_gpu"][1]["options"]
    )
    _media_is_listed(workflow, info)
    run = client.run(prompt, workflow=workflow)
    assert run.status == "execution_success", run.error()
    texts = {prompt[node]["_meta"]["title"]: run.text_of(node) for node in run.outputs}
    assert texts["Preview response"].strip()
    metadata = json.loads(texts["Preview metadata_json"])
    assert metadata["execution_target"] == "local_cpu"
    assert "\n  " in texts["Preview metadata_json"]  # indented for reading


def _lora_template_runs(
    client: ComfyUIClient, server: ComfyUIServer, workflow: dict[str, Any], prompt: dict[str, Any]
) -> None:
    """The caption template, unchanged, captions the sample folder ComfyUI's input/ got at
    start-up: a caption file per image, [trigger] first, and the manifest."""
    node_id, caption = next(
        (key, node) for key, node in prompt.items() if node["class_type"] == "ComfyLLMCaption"
    )
    folder = server.input_dir / caption["inputs"]["folder"]
    images = sorted(folder.glob("*.jpg"))
    assert len(images) == 3  # copied from example_workflows/media
    run = client.run(prompt, workflow=workflow)
    assert run.status == "execution_success", run.error()
    summary = run.outputs[node_id]["text"][0]
    assert summary.startswith("Captioned 3 of 3, kept 0, failed 0; wrote 3 caption files and ")
    texts = {
        prompt[node]["_meta"]["title"]: run.outputs[node]["text"]
        for node in run.outputs
        if node != node_id
    }
    assert len(texts["Preview captions"]) == 3
    for image, shown in zip(images, texts["Preview captions"], strict=True):
        written = image.with_suffix(".txt").read_text(encoding="utf-8").strip()
        assert written == shown and written.startswith("[trigger], ") and len(written) > 11
    metadata = json.loads(texts["Preview metadata_json"][0])
    assert metadata["execution_target"] == "local_cpu" and metadata["manifest_lines"] == 3
    assert len((folder / "metadata.jsonl").read_text(encoding="utf-8").splitlines()) == 3
