"""The browser tier: ComfyUI's real frontend in Debian's chromium, driven as an artist would.

Runs against the tier's ComfyUI server with whatever frontend its venv holds:
``scripts/test-comfyui.sh`` runs it with 0.33's pinned frontend, then again after
installing ``comfyui-frontend-package==1.58.1`` ($COMFY_LLM_FRONTEND names the
version expected). On a failure the page's screenshot is kept under
$COMFY_LLM_BROWSER_SHOTS (default: ``browser-shots/`` in the current folder).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_testworld.browser import Frontend, launched_browser
from comfy_llm_testworld.checkpoints import SCRIPTED_ANSWER
from comfy_llm_testworld.real_comfyui import ComfyUIServer
from PIL import Image, ImageDraw
from playwright.sync_api import expect

REPO_ROOT = Path(__file__).resolve().parents[2]
MODULE = "comfy-llm"  # the custom_nodes folder: the Templates dialog's category
IMAGE_TEMPLATE = "Describe an image"
VIDEO_TEMPLATE = "Describe a video clip with notes"
SHOTS = Path(os.environ.get("COMFY_LLM_BROWSER_SHOTS", "browser-shots"))


# Before Run: note when the node's live text shows generated text, which is how the
# real-ComfyUI tier's interrupt test knows the model is generating (the frontend's
# api object dispatches each progress_text frame as an event).
_RECORD_GENERATION = """() => {
    window.__comfyLlmGenerating = false;
    window.comfyAPI.api.api.addEventListener('progress_text', (event) => {
        if (/^(Thinking|Answer)/.test(event.detail?.text ?? '')) {
            window.__comfyLlmGenerating = true;
        }
    });
}"""


def _pinned_frontend(source: Path) -> str:
    for line in (source / "requirements.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("comfyui-frontend-package=="):
            return line.split("==", 1)[1].strip()
    raise AssertionError("ComfyUI's requirements.txt pins no frontend")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with launched_browser() as launched:
        yield launched


@pytest.fixture
def frontend(
    browser: Any, server: ComfyUIServer, request: pytest.FixtureRequest
) -> Iterator[Frontend]:
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    front = Frontend(page, server.url)
    version = front.open()
    expected = os.environ.get("COMFY_LLM_FRONTEND") or _pinned_frontend(server.source)
    assert version == expected, f"the page runs frontend {version}, expected {expected}"
    failed = request.session.testsfailed
    yield front
    if request.session.testsfailed > failed:
        front.screenshot(SHOTS / f"{version}-{request.node.name}.png")
    page.close()


def _image(path: Path) -> Path:
    picture = Image.new("RGB", (96, 64), (30, 60, 200))
    ImageDraw.Draw(picture).rectangle((30, 20, 60, 50), fill=(220, 30, 30))
    picture.save(path)
    return path


def _saved(title: str) -> dict[str, Any]:
    return json.loads((REPO_ROOT / "example_workflows" / f"{title}.json").read_text())


def test_image_template_shows_its_values_uploads_runs_and_answers_on_the_page(
    frontend: Frontend, tmp_path: Path
) -> None:
    card = frontend.open_template(MODULE, IMAGE_TEMPLATE)
    assert card == {"status": 200, "shown": True}, f"thumbnail not shown: {card}"
    saved = {node["type"]: node["widgets_values"] for node in _saved(IMAGE_TEMPLATE)["nodes"]}
    (llm,) = frontend.nodes("ModalLLM")
    assert llm["widgets_values"] == saved["ModalLLM"]  # every widget, in order
    with frontend.page.expect_file_chooser() as chooser:
        frontend.page.mouse.click(*frontend.point("LoadImage", "upload"))
    chooser.value.set_files(str(_image(tmp_path / "red-square.png")))
    frontend.page.wait_for_function(
        "() => app.graph._nodes.find(n => n.type === 'LoadImage').widgets[0].value"
        ".startsWith('red-square')"
    )
    frontend.run()
    frontend.wait_text("v => v.includes('\"execution_target\"')")
    # the three previews fill one after another (ComfyUI runs each output node in
    # turn): the answer may land a moment after the metadata
    answer = json.dumps(SCRIPTED_ANSWER)
    frontend.wait_text(f"v => v.includes({answer}) && !v.includes('{{') && !v.includes('Answer:')")
    texts = frontend.texts()
    metadata = json.loads(next(t for t in texts if '"execution_target"' in t))
    assert metadata["execution_target"] == "local_cpu"
    assert saved["ModalLLM"][1] in json.dumps(metadata)  # the model the template names
    response = [t for t in texts if t and t != saved["ModalLLM"][0] and "{" not in t]
    assert response, texts  # the answer is on the page
    previews = {node["title"] for node in frontend.nodes("PreviewAny")}
    assert previews == {"Preview response", "Preview metadata_json", "Preview reasoning"}


def test_video_template_opens_with_its_media(frontend: Frontend) -> None:
    frontend.open_template(MODULE, VIDEO_TEMPLATE)
    loaders = frontend.js(
        """() => app.graph._nodes.filter(n => ['LoadVideo', 'OpenAIInputFiles'].includes(n.type))
            .map(n => [n.type, n.widgets[0].value, n.widgets[0].options.values])"""
    )
    assert len(loaders) == 2
    for kind, value, options in loaders:
        assert value in options, f"{kind} names {value}, not among {options}"
    assert not frontend.page.get_by_text(re.compile("missing", re.I)).count()


def test_node_from_search_and_a_tooltip(frontend: Frontend) -> None:
    frontend.open_template(MODULE, IMAGE_TEMPLATE)
    x, y = frontend.point("ModalLLM", "max_new_tokens")
    frontend.page.mouse.move(x - 4, y)
    frontend.page.mouse.move(x, y)
    tooltip = frontend.page.locator(".node-tooltip, [role=tooltip]").filter(has_text="token")
    tooltip.first.wait_for(timeout=10_000)
    assert "token" in tooltip.first.inner_text()
    frontend.page.mouse.dblclick(*frontend.below_graph())
    frontend.page.keyboard.type("LLM", delay=40)
    frontend.page.get_by_text("Multimodal LLM (comfy-llm)").first.wait_for(timeout=10_000)
    frontend.page.keyboard.press("Enter")
    frontend.page.wait_for_function(
        "() => app.graph._nodes.filter(n => n.type === 'ModalLLM').length === 2"
    )


def test_caption_node_on_a_folder(frontend: Frontend, tmp_path: Path) -> None:
    folder = tmp_path / "dataset"
    folder.mkdir()
    for index, color in enumerate(("red", "green")):
        Image.new("RGB", (32, 32), color).save(folder / f"img_{index}.png")
    frontend.open_template(MODULE, IMAGE_TEMPLATE)
    frontend.js(
        """(folder) => {
            app.graph.clear();
            const caption = LiteGraph.createNode('ComfyLLMCaption');
            caption.pos = [100, 100];
            app.graph.add(caption);
            const preview = LiteGraph.createNode('PreviewAny');
            preview.pos = [600, 100];
            app.graph.add(preview);
            caption.connect(0, preview, 0);
            const set = (name, value) => {
                caption.widgets.find(w => w.name === name).value = value;
            };
            set('model_profile', 'tiny/qwen35-scripted');
            set('folder', folder);
            set('write_caption_files', true);
            set('max_new_tokens', 16);
            app.canvas.setDirty(true, true);
        }""",
        str(folder),
    )
    frontend.run()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not (folder / "img_1.txt").exists():
        time.sleep(0.5)
    assert sorted(path.name for path in folder.glob("*.txt")) == ["img_0.txt", "img_1.txt"]
    written = (folder / "img_0.txt").read_text(encoding="utf-8").strip()
    assert written
    frontend.wait_text(f"v => v.includes({json.dumps(written[:20])})", timeout=60)


def test_cancel_mid_generation_empties_the_queue(frontend: Frontend) -> None:
    frontend.open_template(MODULE, IMAGE_TEMPLATE)
    frontend.js(
        """() => {
            const llm = app.graph._nodes.find(n => n.type === 'ModalLLM');
            const set = (name, value) => { llm.widgets.find(w => w.name === name).value = value; };
            set('model_profile', 'tiny/qwen35');
            set('max_new_tokens', 4000);
            set('prompt', 'Ramble on.');
        }"""
    )
    frontend.js(_RECORD_GENERATION)
    frontend.run()
    # Wait for states, not for a time (a loaded machine loads the model slowly): the
    # node's live text shows generated text, and the frontend shows the run as running.
    frontend.page.wait_for_function("() => window.__comfyLlmGenerating === true", timeout=300_000)
    cancel = frontend.page.get_by_role("button", name=re.compile("cancel|interrupt", re.I)).first
    expect(cancel).to_be_enabled(timeout=60_000)
    cancel.click()
    started = time.monotonic()
    while time.monotonic() - started < 30 and (
        frontend.queue()["queue_running"] or frontend.queue()["queue_pending"]
    ):
        time.sleep(0.2)
    queue = frontend.queue()
    assert not queue["queue_running"] and not queue["queue_pending"], queue
    assert time.monotonic() - started < 30
