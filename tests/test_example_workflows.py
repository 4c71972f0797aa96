"""The example workflows as saved by the frontend: every widget slot in place (the
seed's control_after_generate included), a JPEG thumbnail each, no overlapping nodes.
testing/comfyui_tier loads and runs each in a real ComfyUI server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO_ROOT / "example_workflows").glob("*.json"))
DESCRIBE = [path for path in EXAMPLES if path.stem.startswith("Describe")]
"""The Multimodal LLM templates (the caption template has its own checks)."""
CAPTION = REPO_ROOT / "example_workflows" / "Caption a LoRA folder.json"
_WIDGET_TYPES = {"STRING", "INT", "FLOAT", "BOOLEAN", "COMBO"}
_TITLE_HEIGHT = 30  # the frontend draws a node's title bar above its pos


def _slots(schema: Any) -> list[str]:
    """The frontend's widgets_values slots for the node (as in frontend_workflow)."""
    slots = []
    for item in schema.inputs:
        if item.io_type in _WIDGET_TYPES:
            slots.append(item.id)
            if item.io_type == "INT" and (
                item.id in {"seed", "noise_seed"} or item.options.get("control_after_generate")
            ):
                slots.append(f"{item.id}:control_after_generate")
    return slots


def test_there_are_three_examples_image_video_and_a_lora_folder() -> None:
    """The frontend shows a custom node's template by its file name (no title field is
    read for them, frontend 1.49 and 1.58), so the file names are the display titles."""
    assert [path.stem for path in EXAMPLES] == [
        "Caption a LoRA folder",
        "Describe a video clip with notes",
        "Describe an image",
    ]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.stem)
def test_example_media_ships_with_the_node(path: Path) -> None:
    """Every file a loader names is one ComfyUI ships (input/example.png) or a sample
    in example_workflows/media that the node copies into input/ at start-up."""
    shipped = {"example.png"} | {p.name for p in (REPO_ROOT / "example_workflows/media").iterdir()}
    for node in json.loads(path.read_text(encoding="utf-8"))["nodes"]:
        if node["type"] in {"LoadImage", "LoadVideo", "OpenAIInputFiles"}:
            assert node["widgets_values"][0] in shipped, (node["type"], node["widgets_values"])


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.stem)
def test_example_node_sizes_are_what_the_canvas_needs(path: Path) -> None:
    """Saved sizes close to the frontend's own minimum for the node (460 x 860 gave a
    huge prompt box in the newer canvas). Multimodal LLM is wide enough that the
    picker's label is not cut ("model_…" at 380), and tall enough for its answer
    area (web/comfy-llm.js, 140 px) under the widgets."""
    for node in json.loads(path.read_text(encoding="utf-8"))["nodes"]:
        width, height = node["size"]
        if node["type"] == "ModalLLM":
            assert (width, height) == (440, 780), node["size"]
        elif node["type"] == "ComfyLLMCaption":  # 28 widgets and the summary area
            assert (width, height) == (440, 1000), node["size"]
        else:
            assert width <= 420 and height <= 640, (node["type"], node["size"])


@pytest.mark.parametrize("path", DESCRIBE, ids=lambda path: path.stem)
def test_example_is_consistent_with_the_node_and_its_model(
    path: Path, comfyui_standin: Path
) -> None:
    """A graph id (1.58.1 refuses ``"id": null`` against its schema), reasoning off for
    a model without a reasoning mode (SmolVLM), and the node's own Modal reserve."""
    import uuid

    from comfy_llm._comfyui._modal_llm import ModalLLMNode
    from comfy_llm_core import defaults

    workflow = json.loads(path.read_text(encoding="utf-8"))
    uuid.UUID(workflow["id"])
    llm = next(node for node in workflow["nodes"] if node["type"] == "ModalLLM")
    values = dict(zip(_slots(ModalLLMNode.define_schema()), llm["widgets_values"], strict=True))
    # the templates' models have no reasoning mode (SmolVLM; Qwen2.5-VL for video)
    assert values["enable_reasoning"] is False
    assert any(name in values["model_profile"] for name in ("SmolVLM", "qwen2.5-vl")), values
    assert values["reserve_free_vram_gb"] == defaults.RESERVE_GB["modal"]


@pytest.mark.parametrize("path", DESCRIBE, ids=lambda path: path.stem)
def test_example_matches_the_node_as_the_frontend_saves_it(
    path: Path, comfyui_standin: Path
) -> None:
    from comfy_llm._comfyui._inputs import MODAL_GPUS
    from comfy_llm._comfyui._modal_llm import ModalLLMNode

    workflow = json.loads(path.read_text(encoding="utf-8"))
    nodes = {node["id"]: node for node in workflow["nodes"]}
    llm = next(node for node in nodes.values() if node["type"] == "ModalLLM")
    schema = ModalLLMNode.define_schema()
    assert [o["name"] for o in llm["outputs"]] == [o.id for o in schema.outputs]
    slots = _slots(schema)
    assert len(llm["widgets_values"]) == len(slots)
    values = dict(zip(slots, llm["widgets_values"], strict=True))
    assert values["seed:control_after_generate"] in {"fixed", "increment", "decrement", "randomize"}
    assert values["run_on_modal"] is False
    assert values["modal_gpu"] in MODAL_GPUS
    assert isinstance(values["max_new_tokens"], int) and isinstance(values["temperature"], float)
    for link_id, source, _from_slot, target, _to_slot, _type in workflow["links"]:
        assert source in nodes and target in nodes, link_id
    previews = [link for link in workflow["links"] if link[1] == llm["id"]]
    assert sorted(link[2] for link in previews) == [0, 1]  # no reasoning to preview
    assert all(nodes[link[3]]["type"] == "PreviewAny" for link in previews)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.stem)
def test_example_nodes_do_not_overlap(path: Path) -> None:
    boxes = []
    for node in json.loads(path.read_text(encoding="utf-8"))["nodes"]:
        (x, y), (width, height) = node["pos"], node["size"]
        boxes.append((node["id"], x, y - _TITLE_HEIGHT, x + width, y + height))
    for index, (first, *a) in enumerate(boxes):
        for second, *b in boxes[index + 1 :]:
            apart = a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]
            assert apart, f"nodes {first} and {second} overlap"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.stem)
def test_example_has_a_jpeg_thumbnail(path: Path) -> None:
    thumbnail = path.with_suffix(".jpg")
    with Image.open(thumbnail) as image:
        assert image.format == "JPEG"
        assert image.width >= 256 and image.height >= 144


def test_the_lora_template_captions_the_shipped_sample_folder(comfyui_standin: Path) -> None:
    """The caption template as the frontend saves it: every widget slot, the shipped
    sample folder (copied into input/ at start-up) named relative to input/, files and
    a manifest written, [trigger] left for ai-toolkit, local and greedy."""
    import uuid

    from comfy_llm._comfyui._caption_node import CaptionImagesNode
    from comfy_llm_core import defaults

    workflow = json.loads(CAPTION.read_text(encoding="utf-8"))
    uuid.UUID(workflow["id"])
    nodes = {node["id"]: node for node in workflow["nodes"]}
    caption = next(node for node in nodes.values() if node["type"] == "ComfyLLMCaption")
    schema = CaptionImagesNode.define_schema()
    assert [o["name"] for o in caption["outputs"]] == [o.id for o in schema.outputs]
    slots = _slots(schema)
    values = dict(zip(slots, caption["widgets_values"], strict=True))
    sample = REPO_ROOT / "example_workflows" / "media" / values["folder"]
    assert values["folder"].startswith("comfy-llm-example-") and sample.is_dir()
    assert sorted(p.suffix for p in sample.iterdir()) == [".jpg", ".jpg", ".jpg"]
    assert values["write_caption_files"] is True and values["write_manifest"] is True
    assert values["caption_mode"] == "skip_existing" and values["caption_extension"] == ".txt"
    assert values["caption_prefix"] == "[trigger]," and values["trigger_word"] == ""
    assert values["enable_reasoning"] is False and values["temperature"] == 0.0
    assert values["run_on_modal"] is False and values["batch_size"] == defaults.CAPTION_BATCH_SIZE
    assert "SmolVLM" in values["model_profile"]
    targets = sorted((link[2], nodes[link[3]]["type"]) for link in workflow["links"])
    assert targets == [(0, "PreviewAny"), (1, "PreviewAny")]
