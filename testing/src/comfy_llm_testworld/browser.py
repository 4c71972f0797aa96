"""ComfyUI's real frontend in a real browser: Debian's chromium driven by Playwright.

Playwright's own browser download cannot work offline, so the browser is the
system's (``/usr/bin/chromium``, Debian package ``chromium``; ``$CHROMIUM``
overrides) launched headless with the flags below. :class:`Frontend` wraps a
page on a ComfyUI server with the few gestures the browser tier makes: open
a template from the Templates dialog, find a node's widget on the canvas,
read the text widgets' DOM, click Run and Cancel. Graph state is read through
``window.app`` (the frontend's own object) only to know *where* to click and
what the canvas holds; every action is a real click, key press or file choice.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import unquote

__all__ = ["CHROMIUM_FLAGS", "Frontend", "chromium_path", "launched_browser"]

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
_NODE_POINT = """([type, index, name]) => {
  const node = app.graph._nodes.filter(n => n.type === type).at(index);
  const widget = name ? node.widgets.find(w => w.name === name) : null;
  const y = widget ? (widget.last_y ?? widget.y ?? 0) + 10 : -15;
  const middle = [node.pos[0] + node.size[0] / 2, node.pos[1] + y];
  const point = app.canvas.ds.convertOffsetToCanvas(middle);
  const box = app.canvas.canvas.getBoundingClientRect();
  return [box.left + point[0], box.top + point[1]];
}"""
_BELOW_GRAPH = """() => {
  const nodes = app.graph._nodes;
  const left = Math.min(...nodes.map(n => n.pos[0]));
  const bottom = Math.max(...nodes.map(n => n.pos[1] + n.size[1]));
  const point = app.canvas.ds.convertOffsetToCanvas([left + 40, bottom + 60]);
  const box = app.canvas.canvas.getBoundingClientRect();
  // kept off the page's edges, where the side bar and the tab bar lie over the canvas
  return [Math.max(box.left + point[0], box.left + 120),
          Math.min(box.top + point[1], box.bottom - 80)];
}"""

#: Whether a workflow draft the frontend saved holds the nodes (id, type, widget
#: values) on the canvas now (draft payloads: ``{data: <workflow JSON>, updatedAt}``).
_DRAFT_HOLDS_THE_CANVAS = """() => {
  const nodes = (graph) => JSON.stringify(
      (graph.nodes ?? []).map(n => [n.id, n.type, n.widgets_values ?? null]).sort());
  const canvas = nodes(app.rootGraph.serialize());
  for (let i = 0; i < localStorage.length; i++) {
    const key = localStorage.key(i);
    if (!key?.startsWith('Comfy.Workflow.Draft.v2:')) continue;
    try {
      if (nodes(JSON.parse(JSON.parse(localStorage.getItem(key)).data)) === canvas) return true;
    } catch (error) {}
  }
  return false;
}"""

_NODE_TEXT = """([type, index]) => {
  const box = [...document.querySelectorAll(`.comfy-llm-output[data-comfy-llm-node="${type}"]`)]
      .at(index);
  if (!box) return null;
  const style = getComputedStyle(box);
  const line = parseFloat(style.lineHeight) || 16;
  const fold = box.querySelector('details');
  const node = app.graph._nodes.filter(n => n.type === type).at(index);
  const strip = (node?.widgets ?? []).find(w => w.name === '$$node-text-preview');
  return {
    state: box.dataset.state,
    text: box.querySelector('.comfy-llm-text').textContent,
    reasoning: fold.hidden ? null : box.querySelector('.comfy-llm-thinking').textContent,
    folded: !fold.open,
    lines: box.clientHeight / line,
    frontend_strip_shown: strip ? !(strip.hidden || strip.options?.hidden) : false,
  };
}"""


# The graph emptied and the outputs of earlier runs forgotten (a new node may take
# an earlier node's id), as on a freshly loaded page.
_CLEAN = """() => {
  app.graph.clear();
  app.nodeOutputs = {};
  app.canvas.setDirty(true, true);
}"""


_CARD_PICTURE = """(title) => {
  const label = [...document.querySelectorAll('[role=dialog] *')].find(e =>
      e.children.length === 0 && e.textContent.trim() === title);
  for (let box = label; box; box = box.parentElement) {
    const picture = box.querySelector('img');
    if (picture) return picture.complete && picture.naturalWidth > 0;
  }
  return false;
}"""


def chromium_path() -> Path:
    """The system chromium (``$CHROMIUM`` or ``/usr/bin/chromium``).

    Raises:
        FileNotFoundError: Not installed (``apt-get install -y chromium``).
    """
    path = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
    if not path.is_file():
        raise FileNotFoundError(
            f"no chromium at {path}: install Debian's package (apt-get install -y chromium) "
            "or point $CHROMIUM at a Chromium binary"
        )
    return path


@contextmanager
def launched_browser() -> Iterator[Any]:
    """A headless chromium (Playwright sync API), closed afterwards."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(chromium_path()), args=list(CHROMIUM_FLAGS)
        )
        try:
            yield browser
        finally:
            browser.close()


class Frontend:
    """One browser page on a ComfyUI server."""

    def __init__(self, page: Any, url: str) -> None:
        self.page = page
        self.url = url

    def open(self, timeout: float = 120.0) -> str:
        """Load the app; return the frontend's version as it reports itself."""
        self.page.goto(self.url)
        self.page.wait_for_function(
            "() => window.app && window.app.graph && window.app.canvas", timeout=timeout * 1000
        )
        return self.version()

    def version(self) -> str:
        """The frontend's version as the page reports it."""
        return str(self.page.evaluate("() => window.__COMFYUI_FRONTEND_VERSION__ ?? ''"))

    def clean(self, timeout: float = 10.0) -> None:
        """Leave the page as a fresh load does, for the next test.

        No dialog or search box open (the Escape key, as a user closes them), an
        empty canvas and no outputs of earlier runs (through ``window.app``).
        """
        dialogs = self.page.locator("[role=dialog]:visible")
        deadline = time.monotonic() + timeout
        while dialogs.count():
            if time.monotonic() > deadline:
                raise TimeoutError("a dialog stayed open after Escape")
            self.page.keyboard.press("Escape")
            with suppress(Exception):
                dialogs.first.wait_for(state="hidden", timeout=1000)
        self.js(_CLEAN)

    def js(self, expression: str, argument: Any = None) -> Any:
        """Evaluate ``expression`` (a JS function) in the page."""
        return self.page.evaluate(expression, argument)

    def nodes(self, node_type: str) -> list[dict[str, Any]]:
        """``{id, title, widgets_values}`` of each node of ``node_type`` on the canvas."""
        return list(
            self.js(
                """(type) => app.graph._nodes.filter(n => n.type === type).map(n => ({
                    id: n.id, title: n.title,
                    widgets_values: n.serialize().widgets_values ?? []}))""",
                node_type,
            )
        )

    def open_template(self, module: str, title: str) -> dict[str, Any]:
        """Templates (sidebar) -> ``module`` -> the card titled ``title``.

        Returns:
            ``{"status": <HTTP status of the thumbnail request>, "shown": <the card's
            picture decoded>}``.
        """
        answers: dict[str, int] = {}

        def seen(response: Any) -> None:
            if "/workflow_templates/" in response.url:
                answers[unquote(response.url)] = response.status

        self.page.on("response", seen)
        from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

        # (inside the dialog: a workflow tab of an earlier test may carry the same title)
        dialog = self.page.get_by_role("dialog")
        category = dialog.get_by_text(module, exact=True).first
        # A first start opens the Templates dialog by itself, at a moment of its own:
        # until the category shows, try the sidebar button (its click fails while
        # the dialog's overlay covers it, which means the dialog is opening anyway).
        deadline = time.monotonic() + 60
        while not category.is_visible():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the Templates dialog never showed {module!r}")
            with suppress(PlaywrightTimeoutError):
                self.page.get_by_role("button", name="Templates").first.click(timeout=2000)
            try:
                category.wait_for(state="visible", timeout=3000)
            except PlaywrightTimeoutError:
                continue
        category.click()
        card = dialog.get_by_text(title, exact=True).first
        card.wait_for()
        shown = False
        deadline = time.monotonic() + 10
        while not shown and time.monotonic() < deadline:
            time.sleep(0.2)
            shown = bool(self.js(_CARD_PICTURE, title))
        status = next(
            (code for url, code in answers.items() if url.endswith(f"/{module}/{title}.jpg")), 0
        )
        self.page.remove_listener("response", seen)
        card.click()
        self.page.wait_for_function("() => app.graph._nodes.length > 0")
        time.sleep(0.5)
        return {"status": status, "shown": shown}

    def point(
        self, node_type: str, widget: str | None = None, index: int = 0
    ) -> tuple[float, float]:
        """The page coordinates of a node's widget (or its title bar)."""
        x, y = self.js(_NODE_POINT, [node_type, index, widget])
        return float(x), float(y)

    def below_graph(self) -> tuple[float, float]:
        """An empty spot of canvas under the graph's nodes."""
        x, y = self.js(_BELOW_GRAPH)
        return float(x), float(y)

    def search(self, query: str, timeout: float = 30.0) -> None:
        """Double-click empty canvas, as an artist opens the node search box, and type.

        Typed only once the box has the keyboard (its input focused): keys that reach
        the canvas instead are the frontend's shortcuts. A double-click the canvas
        missed (the page still settling) is made again.
        """
        from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

        deadline = time.monotonic() + timeout
        while True:
            self.page.mouse.dblclick(*self.below_graph())
            try:
                self.page.wait_for_function(
                    "() => document.activeElement?.tagName === 'INPUT'", timeout=3000
                )
                break
            except PlaywrightTimeoutError:
                if time.monotonic() > deadline:
                    raise
        self.page.keyboard.type(query, delay=40)

    def reload(self, timeout: float = 120.0) -> None:
        """Reload the page (as an artist's F5) and wait until the workflow is back.

        The frontend keeps the canvas across a reload as a draft in
        localStorage, written 512 ms after the last graph change (1.49.6 and
        1.58.1: ``useWorkflowPersistenceV2``, ``PERSIST_DEBOUNCE_MS``) and not
        flushed when the page unloads. A reload sooner than that brings back
        the draft before, which for a graph built on an opened template is the
        template. So the reload waits until the draft holds the canvas's nodes,
        as an artist's F5 a moment after a run finds it.
        """
        try:
            self.page.wait_for_function(_DRAFT_HOLDS_THE_CANVAS, timeout=10_000)
        except Exception as error:
            raise AssertionError(
                "the frontend did not save the canvas as its workflow draft within 10 s"
                " (a reload would bring back an older graph): is Comfy.Workflow.Persist off?"
            ) from error
        self.page.reload()
        self.page.wait_for_function(
            "() => window.app && app.graph && app.graph._nodes.length > 0", timeout=timeout * 1000
        )

    def node_text(self, node_type: str, index: int = 0) -> dict[str, Any] | None:
        """What comfy-llm's text area on a node shows (``web/comfy-llm.js``).

        ``{state, text, reasoning, folded, lines, frontend_strip_shown, visible}``:
        ``state`` is ``empty``, ``live``, ``final`` or ``stopped``; ``reasoning``
        is None when there is none; ``lines`` how many text lines the area's
        height holds; ``visible`` whether the text's first line is on the page
        (Playwright's visibility, inside the viewport). None when the node has
        no text area.
        """
        shown = self.js(_NODE_TEXT, [node_type, index])
        if shown is None:
            return None
        selector = f'.comfy-llm-output[data-comfy-llm-node="{node_type}"] .comfy-llm-text'
        text = self.page.locator(selector).nth(index)
        view = self.page.viewport_size or {"width": 0, "height": 0}
        bounds = text.bounding_box()
        shown["visible"] = bool(  # the text's first line is on the page
            text.is_visible()
            and bounds
            and bounds["height"] > 0
            and 0 <= bounds["x"] < view["width"]
            and 0 <= bounds["y"] <= view["height"] - min(bounds["height"], 16)
        )
        return dict(shown)

    def wait_node_text(
        self, node_type: str, predicate: str, index: int = 0, timeout: float = 180.0
    ) -> dict[str, Any]:
        """Wait until the node's text area satisfies the JS ``predicate(box)``; return it.

        ``box`` is the area's element (``box.dataset.state``, ``box.textContent``).
        """
        self.page.wait_for_function(
            f"""([type, index]) => {{
              const box = [...document.querySelectorAll(
                  `.comfy-llm-output[data-comfy-llm-node="${{type}}"]`)].at(index);
              return !!box && ({predicate})(box);
            }}""",
            arg=[node_type, index],
            timeout=timeout * 1000,
        )
        shown = self.node_text(node_type, index)
        assert shown is not None
        return shown

    def texts(self) -> list[str]:
        """The values of every text box on the page (prompts and text previews)."""
        return [box.input_value() for box in self.page.locator("textarea").all()]

    def wait_text(self, predicate: str, timeout: float = 180.0) -> list[str]:
        """Wait until some textarea's value satisfies the JS ``predicate(value)``."""
        self.page.wait_for_function(
            f"() => [...document.querySelectorAll('textarea')].some(t => ({predicate})(t.value))",
            timeout=timeout * 1000,
        )
        return self.texts()

    def run(self) -> None:
        """Click Run (the queue button)."""
        self.page.get_by_role("button", name=re.compile(r"^\s*(Run|Queue)\b")).first.click()

    def queue(self) -> dict[str, Any]:
        """The server's queue as the page sees it (``/api/queue``)."""
        return dict(self.js("() => fetch('/api/queue').then(r => r.json())"))

    def screenshot(self, target: Path) -> None:
        """Save the page as it is now (best effort)."""
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(target), full_page=True)
        except Exception as error:  # the page may be gone; keep the test's own error
            target.with_suffix(".txt").write_text(f"no screenshot: {error}\n")
