"""Draw each example workflow's thumbnail (``example_workflows/<title>.jpg``) from its JSON.

Usage: uv run --frozen python scripts/draw-template-thumbnails.py

The Templates dialog shows a custom node's template as its file name and this
picture, so the picture is drawn from the same file: the title is the file
name, the boxes are the workflow's own nodes (inputs on the left, Multimodal
LLM or the caption node in the middle, its previews on the right). Re-run it after editing a
template. Needs the DejaVu fonts (Debian: fonts-dejavu-core).
"""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

ROOT = Path(__file__).resolve().parents[1] / "example_workflows"
FONTS = Path("/usr/share/fonts/truetype/dejavu")
SIZE = (768, 432)
BACKGROUND, TEXT, MUTED, BODY = (32, 33, 38), (240, 240, 240), (150, 170, 200), (52, 54, 64)
GREEN, BLUE, YELLOW = (120, 200, 140), (110, 160, 245), (232, 192, 110)
NAMES = {
    "LoadImage": "Load Image",
    "LoadVideo": "Load Video",
    "Video Slice": "Video Slice",
    "OpenAIInputFiles": "Input Files",
    "ModalLLM": "Multimodal LLM",
    "ComfyLLMCaption": "Caption images",
}
ROWS = {
    "ModalLLM": ("prompt", "model_profile", "seed", "max_new_tokens"),
    "ComfyLLMCaption": ("folder", "caption_prefix", "caption_mode", "write_manifest"),
}


def _font(size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(FONTS / "DejaVuSans-Bold.ttf"), size)


def _box(
    draw: ImageDraw.ImageDraw, xy: tuple[int, int, int, int], color: tuple, title: str
) -> None:
    left, top, right, _bottom = xy
    draw.rounded_rectangle(xy, radius=8, fill=BODY, outline=color, width=3)
    draw.rounded_rectangle((left, top, right, top + 30), radius=8, fill=color)
    draw.rectangle((left, top + 20, right, top + 30), fill=color)
    draw.text((left + 12, top + 6), title, font=_font(16), fill=(20, 20, 24))


def draw(path: Path) -> None:
    """Write ``path``'s thumbnail next to it."""
    workflow = json.loads(path.read_text(encoding="utf-8"))
    nodes = {node["id"]: node for node in workflow["nodes"]}
    llm = next(node for node in nodes.values() if node["type"] in ROWS)
    others = [n for n in nodes.values() if n is not llm and n["type"] != "PreviewAny"]
    inputs = sorted(others, key=lambda n: n["pos"][1])
    previews = [nodes[link[3]] for link in workflow["links"] if link[1] == llm["id"]]
    image = Image.new("RGB", SIZE, BACKGROUND)
    draw_ = ImageDraw.Draw(image)
    draw_.text((32, 26), path.stem, font=_font(32), fill=TEXT)
    draw_.text((32, 72), f"comfy-llm · {NAMES[llm['type']]}", font=_font(18), fill=MUTED)
    middle = (290, 130, 500, 380)
    for index, node in enumerate(inputs):
        top = 130 + index * 83
        _box(draw_, (32, top, 222, top + 70), GREEN, NAMES.get(node["type"], node["type"]))
        draw_.line((222, top + 45, middle[0], 200), fill=(180, 180, 190), width=2)
    _box(draw_, middle, BLUE, NAMES[llm["type"]])
    for row, name in enumerate(ROWS[llm["type"]]):
        draw_.text((305, 175 + row * 26), name, font=_font(15), fill=(200, 205, 215))
    for index, node in enumerate(previews):
        top = 130 + index * 88
        title = str(node.get("title") or "").removeprefix("Preview ") or "preview"
        _box(draw_, (560, top, 740, top + 70), YELLOW, title)
        draw_.line((middle[2], 200 + index * 40, 560, top + 45), fill=(180, 180, 190), width=2)
    image.save(path.with_suffix(".jpg"), "JPEG", quality=90)


def main() -> None:
    """Draw every example's thumbnail."""
    for path in sorted(ROOT.glob("*.json")):
        draw(path)
        print(f"drew {path.with_suffix('.jpg').name}")


if __name__ == "__main__":
    main()
