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
from comfy_llm_testworld.checkpoints import SCRIPTED_ANSWER, SCRIPTED_REASONING
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


class _Tab:
    """The module's one page, kept between tests.

    Loading the app (its scripts, the server's node definitions, settings and
    templates) was most of each test's time. A test that fails leaves its page
    behind; the next one gets a fresh load.
    """

    def __init__(self, browser: Any, server: ComfyUIServer) -> None:
        self.browser = browser
        self.server = server
        self.front: Frontend | None = None

    def ready(self) -> tuple[Frontend, str]:
        """The page, cleaned after the last test, or a fresh one; the version it runs."""
        if self.front is not None and not self.front.page.is_closed():
            self.front.clean()
        else:
            page = self.browser.new_page(viewport={"width": 1600, "height": 1000})
            self.front = Frontend(page, self.server.url)
            self.front.open()
        return self.front, self.front.version()

    def drop(self) -> None:
        if self.front is not None:
            self.front.page.close()
            self.front = None


@pytest.fixture(scope="module")
def tab(browser: Any, server: ComfyUIServer) -> Iterator[_Tab]:
    kept = _Tab(browser, server)
    yield kept
    kept.drop()


@pytest.fixture
def frontend(
    tab: _Tab, server: ComfyUIServer, request: pytest.FixtureRequest
) -> Iterator[Frontend]:
    front, version = tab.ready()
    expected = os.environ.get("COMFY_LLM_FRONTEND") or _pinned_frontend(server.source)
    assert version == expected, f"the page runs frontend {version}, expected {expected}"
    failed = request.session.testsfailed
    yield front
    if request.session.testsfailed > failed:
        front.screenshot(SHOTS / f"{version}-{request.node.name}.png")
        tab.drop()  # the next test starts from a fresh load, not from this failure


def _image(path: Path) -> Path:
    picture = Image.new("RGB", (96, 64), (30, 60, 200))
    ImageDraw.Draw(picture).rectangle((30, 20, 60, 50), fill=(220, 30, 30))
    picture.save(path)
    return path


_FINISHED = "box => ['final', 'stopped'].includes(box.dataset.state)"
_TEXT = "box.querySelector('.comfy-llm-text').textContent"
SUMMARY = "Captioned 2 of 2, kept 0, failed 0; wrote 2 caption files."
_GRAPH = """([nodes, links]) => {
    app.graph.clear();
    app.nodeOutputs = {};  // the cleared graph's outputs would land on the new nodes' ids
    const made = nodes.map(([type, x, y, values]) => {
        const node = LiteGraph.createNode(type);
        node.pos = [x, y];
        app.graph.add(node);
        for (const [name, value] of Object.entries(values)) {
            node.widgets.find(w => w.name === name).value = value;
        }
        return node;
    });
    for (const [from, slot, to, input] of links) {
        const target = input === undefined ? 0 : made[to].findInputSlot(input);
        if (target < 0) throw new Error(`${made[to].type} has no input ${input}`);
        made[from].connect(slot, made[to], target);
    }
    app.canvas.ds.offset = [60, 100];
    app.canvas.ds.scale = 0.7;  // the caption node fits the page whole
    app.canvas.setDirty(true, true);
}"""


def _graph(frontend: Frontend, nodes: list[Any], links: list[Any] = ()) -> None:
    """Replace the canvas with ``nodes`` ``[type, x, y, {widget: value}]`` and ``links``.

    A link is ``[from node, output slot, to node]`` (to its first input) or
    ``[from node, output slot, to node, input name]``.
    """
    frontend.js(_GRAPH, [nodes, list(links)])


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
    assert previews == {"Preview response", "Preview metadata_json"}
    # the answer on the node itself, after the run and after a reload (the same workflow)
    for when in ("after the run", "after a reload"):
        shown = frontend.wait_node_text("ModalLLM", _FINISHED, timeout=60)
        assert shown["state"] == "final" and shown["text"] in response, (when, shown)
        assert shown["reasoning"] is None, (when, shown)  # SmolVLM: reasoning off
        assert shown["visible"] and not shown["frontend_strip_shown"], (when, shown)
        if when == "after the run":
            frontend.reload()


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
    frontend.search("LLM")
    frontend.page.get_by_text("Multimodal LLM (comfy-llm)").first.wait_for(timeout=10_000)
    frontend.page.keyboard.press("Enter")
    frontend.page.wait_for_function(
        "() => app.graph._nodes.filter(n => n.type === 'ModalLLM').length === 2"
    )


_RESULTS = """() => [...document.querySelectorAll('[role=option]')]
    .map(e => e.innerText.split('\\n').map(line => line.trim()))"""
OURS = {"Multimodal LLM (comfy-llm)", "Caption images (comfy-llm)"}


def test_both_nodes_are_extensions_in_one_category_in_the_search_box(frontend: Frontend) -> None:
    # the search box's "Comfy" / "Extensions" filters read each node's source; a node
    # with an essentials_category counts as Comfy's own (frontend nodeDefStore)
    frontend.open_template(MODULE, IMAGE_TEMPLATE)
    frontend.search("LLM")
    frontend.page.get_by_text("Multimodal LLM (comfy-llm)").first.wait_for(timeout=10_000)
    shown = {"Extensions": OURS, "Comfy": set()}
    for chip, expected in shown.items():
        frontend.page.get_by_role("button", name=chip, exact=True).click()
        frontend.page.wait_for_function(
            f"() => ({_RESULTS})().length > 0 && ({_RESULTS})().filter(r => "
            f"{json.dumps(sorted(OURS))}.includes(r[0])).length === {len(expected)}"
        )
        results = frontend.js(_RESULTS)
        found = {result[0]: result for result in results if result[0] in OURS}
        assert set(found) == expected, (chip, results)
        for result in found.values():
            assert result[1].startswith("comfy-llm"), result  # the one category


def test_caption_node_on_a_folder_shows_its_summary_after_the_run_and_a_reload(
    frontend: Frontend, tmp_path: Path
) -> None:
    folder = tmp_path / "dataset"
    folder.mkdir()
    for index, color in enumerate(("red", "green")):
        Image.new("RGB", (32, 32), color).save(folder / f"img_{index}.png")
    frontend.open_template(MODULE, IMAGE_TEMPLATE)
    values = {
        "model_profile": "tiny/qwen35-scripted",
        "folder": str(folder),
        "write_caption_files": True,
        "max_new_tokens": 16,
    }
    _graph(
        frontend, [["ComfyLLMCaption", 60, 40, values], ["PreviewAny", 560, 40, {}]], [[0, 0, 1]]
    )
    frontend.run()
    shown = frontend.wait_node_text("ComfyLLMCaption", _FINISHED)
    assert sorted(path.name for path in folder.glob("*.txt")) == ["img_0.txt", "img_1.txt"]
    written = (folder / "img_0.txt").read_text(encoding="utf-8").strip()
    assert written
    for when in ("after the run", "after a reload"):
        assert shown["state"] == "final", (when, shown)
        lines = shown["text"].splitlines()
        assert lines[0] == SUMMARY, (when, shown)
        assert f"img_0.png: {written}" in lines, (when, shown)  # the first captions
        assert shown["visible"] and not shown["frontend_strip_shown"], (when, shown)
        if when == "after the run":
            frontend.reload()
            shown = frontend.wait_node_text("ComfyLLMCaption", _FINISHED, timeout=60)


def test_answer_and_folded_reasoning_stay_on_the_node_after_the_run_and_a_reload(
    frontend: Frontend,
) -> None:
    frontend.open_template(MODULE, IMAGE_TEMPLATE)
    values = {"model_profile": "tiny/qwen35-scripted", "max_new_tokens": 16, "temperature": 0.0}
    _graph(frontend, [["ModalLLM", 60, 40, values], ["PreviewAny", 560, 40, {}]], [[0, 0, 1]])
    frontend.run()
    shown = frontend.wait_node_text("ModalLLM", _FINISHED)
    for when in ("after the run", "after a reload"):
        assert shown["state"] == "final", (when, shown)
        assert shown["text"] == SCRIPTED_ANSWER, (when, shown)
        assert shown["reasoning"] == SCRIPTED_REASONING and shown["folded"], (when, shown)
        assert shown["visible"] and not shown["frontend_strip_shown"], (when, shown)
        if when == "after the run":
            frontend.reload()
            shown = frontend.wait_node_text("ModalLLM", _FINISHED, timeout=60)


_SET = """([index, name, value]) => {
    app.graph._nodes.filter(n => n.type === 'ModalLLM')[index]
        .widgets.find(w => w.name === name).value = value;
}"""


def test_a_reload_while_the_prompt_still_runs_shows_this_runs_answer_not_an_older_one(
    frontend: Frontend,
) -> None:
    """The text area is restored from /history, which holds finished prompts only.

    A page reloaded while the prompt's later nodes still run must not show the
    node's older run as this one's, and shows this run's answer once it is stored.
    """
    frontend.open_template(MODULE, IMAGE_TEMPLATE)
    quick = {"model_profile": "tiny/qwen35-scripted", "max_new_tokens": 16, "temperature": 0.0}
    later = {"model_profile": "tiny/qwen35", "max_new_tokens": 8, "temperature": 1.0}
    _graph(
        frontend,
        [
            ["ModalLLM", 60, 40, {**quick, "enable_reasoning": False}],
            ["ModalLLM", 560, 40, later],
            ["PreviewAny", 1060, 40, {}],
        ],
        [[0, 0, 1, "prompt"], [1, 0, 2]],  # the second answers the first: it runs after it
    )
    frontend.run()
    older = frontend.wait_node_text("ModalLLM", _FINISHED)
    frontend.wait_node_text("ModalLLM", _FINISHED, index=1)
    assert (older["text"], older["reasoning"]) == (SCRIPTED_ANSWER, None), older
    frontend.js(_SET, [0, "enable_reasoning", True])  # this run: the same answer, reasoned
    frontend.js(_SET, [1, "max_new_tokens", 4000])  # and the prompt runs on after node 0
    frontend.run()
    frontend.wait_node_text("ModalLLM", "box => box.dataset.state === 'live'", index=1)
    frontend.reload()
    assert frontend.queue()["queue_running"], "the prompt ended before the reload"
    shown = frontend.node_text("ModalLLM")
    assert shown is not None and shown["reasoning"] is None, shown
    assert shown["state"] == "empty", shown  # not the older run's answer as this one's
    shown = frontend.wait_node_text("ModalLLM", _FINISHED, timeout=180)
    assert (shown["text"], shown["reasoning"]) == (SCRIPTED_ANSWER, SCRIPTED_REASONING), shown
    assert not frontend.queue()["queue_running"]


def test_live_text_is_readable_on_the_node_while_the_model_streams(frontend: Frontend) -> None:
    frontend.open_template(MODULE, IMAGE_TEMPLATE)
    values = {
        "model_profile": "tiny/qwen35",
        "max_new_tokens": 4000,
        "temperature": 1.0,
        "prompt": "Ramble on.",
    }
    _graph(frontend, [["ModalLLM", 60, 40, values], ["PreviewAny", 560, 40, {}]], [[0, 0, 1]])
    frontend.run()
    streaming = f"box => box.dataset.state === 'live' && {_TEXT}.length > 300"
    shown = frontend.wait_node_text("ModalLLM", streaming)
    # several lines of the text generated so far, not the frontend's two-line strip
    assert shown["lines"] >= 6, shown
    assert shown["visible"] and not shown["frontend_strip_shown"], shown
    assert shown["text"].startswith(("Answer:", "Thinking")), shown
    frontend.page.get_by_role("button", name=re.compile("cancel|interrupt", re.I)).first.click()
    shown = frontend.wait_node_text("ModalLLM", f"box => {_TEXT} === 'Cancelled'")
    assert shown["visible"], shown


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
