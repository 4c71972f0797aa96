"""The caption node's folder, read back by what trainers and ComfyUI itself read.

ComfyUI 0.33's own ``LoadImageTextDataSetFromFolder``
(``comfy_extras/nodes_dataset.py``: the images of a folder under ``input/``
and of its kohya-style ``<repeats>_<name>`` subfolders, each paired with the
same-name ``.txt``) loads the folder the caption node wrote; every image
must come back with its own caption. The ``metadata.jsonl`` manifest is read
as musubi-tuner's ``image_jsonl_file`` reader takes it: one JSON object per
line, ``image_path`` (a path it opens as is) and ``caption``.
"""

from __future__ import annotations

import json

from comfy_llm_testworld.checkpoints import SCRIPTED_ANSWER
from comfy_llm_testworld.real_comfyui import ComfyUIClient, ComfyUIServer
from PIL import Image

COLORS = {
    "red.png": (230, 20, 20),
    "green.jpg": (20, 230, 20),
    "2_cat/blue.png": (20, 20, 230),
    "2_cat/white.webp": (250, 250, 250),
}


def _nearest(pixel: tuple[int, ...]) -> str:
    def distance(name: str) -> int:
        return sum((a - b) ** 2 for a, b in zip(COLORS[name], pixel[:3], strict=True))

    return min(COLORS, key=distance)


def test_comfyuis_own_loader_pairs_every_image_with_its_caption(
    client: ComfyUIClient, server: ComfyUIServer
) -> None:
    folder = server.input_dir / "lora_set"
    (folder / "2_cat").mkdir(parents=True)
    for name, color in COLORS.items():
        Image.new("RGB", (32, 32), color).save(folder / name)
    (folder / "red.txt").write_text("sks, a red square\n", encoding="utf-8")  # kept as is
    caption = {
        "class_type": "ComfyLLMCaption",
        "inputs": {
            "model_profile": "tiny/qwen35-scripted",
            "prompt": "Caption this image.",
            "folder": str(folder),
            "caption_prefix": "[trigger],",  # the trailing comma is not doubled
            "caption_suffix": "{name}",
            "trigger_word": "sks",
            "subfolders": True,
            "write_manifest": True,
            "temperature": 0.0,
            "max_new_tokens": 16,
            "seed": 0,
        },
    }
    run = client.run({"50": caption})
    assert run.status == "execution_success", run.error()
    summary = run.outputs["50"]["text"][0]
    assert summary.startswith("Captioned 3 of 4, kept 1, failed 0; wrote 3 caption files and ")

    loader = {"class_type": "LoadImageTextDataSetFromFolder", "inputs": {"folder": "lora_set"}}
    graph = {
        "60": loader,
        "61": {"class_type": "PreviewAny", "inputs": {"source": ["60", 1]}},
        "62": {"class_type": "SaveImage", "inputs": {"images": ["60", 0], "filename_prefix": "c"}},
    }
    run = client.run(graph)
    assert run.status == "execution_success", run.error()
    texts = run.outputs["61"]["text"]
    saved = run.outputs["62"]["images"]
    assert len(texts) == len(saved) == 6  # 2_cat: its two images twice (kohya repeats)
    pairs = []
    for text, image in zip(texts, saved, strict=True):
        path = server.root / "output" / image["subfolder"] / image["filename"]
        with Image.open(path) as loaded:
            name = _nearest(loaded.convert("RGB").getpixel((16, 16)))
        pairs.append((name, text))
    expected = {
        "red.png": "sks, a red square",
        "green.jpg": f"sks, {SCRIPTED_ANSWER}, green",
        "2_cat/blue.png": f"sks, {SCRIPTED_ANSWER}, blue",
        "2_cat/white.webp": f"sks, {SCRIPTED_ANSWER}, white",
    }
    assert sorted(set(pairs)) == sorted(expected.items()), pairs

    # the manifest, read as musubi-tuner reads an image_jsonl_file
    lines = (folder / "metadata.jsonl").read_text(encoding="utf-8").splitlines()
    manifest = {}
    for line in lines:
        item = json.loads(line)
        with Image.open(item["image_path"]) as opened:  # opened as given
            opened.load()
        manifest[item["media_path"]] = item["caption"]
    assert manifest == expected
