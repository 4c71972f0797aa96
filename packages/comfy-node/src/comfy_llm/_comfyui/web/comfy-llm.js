/*
 * comfy-llm in ComfyUI's frontend: what the two nodes say stays on the nodes.
 *
 * Why a frontend extension (read in the bundles of comfyui-frontend-package
 * 1.49.6, which ComfyUI 0.33 pins, and 1.58.1, the newest):
 * - The frontend draws a node's `ui.text` only for its own text nodes: the
 *   "Comfy.PreviewAny" and "Comfy.saveText" extensions add text widgets to
 *   PreviewAny and SaveText alone.
 * - Live text (`progress_text`) lands in a strip the frontend adds to the node
 *   (widget "$$node-text-preview", 58 px high: two lines); 1.58.1 removes the
 *   strip when the job ends.
 * - A node's outputs live in memory per workflow tab; after a browser reload
 *   nothing puts them back (only the queue panel's "Load" does, from /history).
 *
 * So each node gets one text area of its own (a DOM widget, never saved in the
 * workflow, never sent with a prompt): filled live from `progress_text`, then
 * with the answer of `executed` (`ui.text`, and `ui.reasoning` folded under a
 * <details>), and, when a workflow loads, with the newest run of that same
 * workflow (its graph id) that ran the node, from the server's own /history
 * (a prompt still queued or running is waited for: it is not there yet).
 * The frontend's strip is hidden on these two nodes only: the text area shows
 * the same text, readable. Nothing here changes a workflow's widgets_values.
 *
 * The model picker's entries keep their values (what workflows save) and get
 * labels ("downloaded", size) from the `comfy_llm_labels` map the server puts
 * in the picker's input spec, through the combo widget's own `getOptionLabel`.
 *
 * Text reaches the page only through textContent (never as HTML).
 */
import { app } from "../../scripts/app.js";
import { api } from "../../scripts/api.js";

const NODE_TYPES = new Set(["ModalLLM", "ComfyLLMCaption"]);
const DISPLAY = "comfy_llm_output";
const FRONTEND_STRIP = "$$node-text-preview";
const PICKER = "model_profile";
const LABELS = "comfy_llm_labels";
const HISTORY_ITEMS = 32;
const MIN_HEIGHT = 140;

const STYLE = `
.comfy-llm-output {
  box-sizing: border-box; width: 100%; height: 100%; overflow-y: auto;
  padding: 6px 8px; border-radius: 6px;
  background: var(--comfy-input-bg, #222); color: var(--input-text, #ddd);
  font: 12px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  white-space: pre-wrap; word-break: normal; overflow-wrap: anywhere;
  user-select: text; cursor: auto;
}
.comfy-llm-output[data-state="empty"] { opacity: 0.6; }
.comfy-llm-output[data-state="stopped"] .comfy-llm-text { color: var(--error-text, #f88); }
.comfy-llm-output details { margin-top: 8px; }
.comfy-llm-output summary { cursor: pointer; opacity: 0.75; }
.comfy-llm-output .comfy-llm-thinking { opacity: 0.8; margin-top: 4px; }
`;

const displays = new WeakMap();

function rootGraph() {
  return app.rootGraph ?? app.graph;
}

function addStyle() {
  if (document.getElementById("comfy-llm-style")) return;
  const style = document.createElement("style");
  style.id = "comfy-llm-style";
  style.textContent = STYLE;
  document.head.append(style);
}

function joined(value) {
  if (value == null) return "";
  return Array.isArray(value) ? value.filter((part) => part != null).join("\n\n") : String(value);
}

/** The node's text area: live text while it runs, then its answer. */
function addDisplay(node) {
  const root = document.createElement("div");
  root.className = "comfy-llm-output";
  root.dataset.state = "empty";
  root.dataset.comfyLlmNode = node.type;
  const text = document.createElement("div");
  text.className = "comfy-llm-text";
  text.textContent = "The answer shows here after a run.";
  const fold = document.createElement("details");
  fold.className = "comfy-llm-reasoning";
  fold.hidden = true;
  const summary = document.createElement("summary");
  summary.textContent = "Reasoning";
  const thinking = document.createElement("div");
  thinking.className = "comfy-llm-thinking";
  fold.append(summary, thinking);
  root.append(text, fold);
  // the canvas must not take the wheel or a text selection for itself
  root.addEventListener("wheel", (event) => event.stopPropagation(), { passive: true });
  root.addEventListener("pointerdown", (event) => event.stopPropagation());

  const show = (state, body, reasoning = "") => {
    root.dataset.state = state;
    text.textContent = body;
    thinking.textContent = reasoning;
    fold.hidden = !reasoning;
    if (state === "live") root.scrollTop = root.scrollHeight;
    else root.scrollTop = 0;
    node.setDirtyCanvas?.(true, true);
  };
  const display = {
    get state() {
      return root.dataset.state;
    },
    live(value) {
      show("live", value);
    },
    final(output) {
      const answer = joined(output?.text);
      const note = joined(output?.note);
      const body = note ? (answer ? `${note}\n\n${answer}` : note) : answer || "(empty answer)";
      show("final", body, joined(output?.reasoning));
    },
    stopped(message) {
      show("stopped", message);
    },
  };
  const widget = node.addDOMWidget(DISPLAY, "comfy_llm_output", root, {
    serialize: false,
    hideOnZoom: false,
    getValue: () => text.textContent,
    setValue: () => {},
    getMinHeight: () => MIN_HEIGHT,
  });
  widget.serialize = false;
  displays.set(node, display);
  return display;
}

/** Hide the frontend's own live-text strip (the text area shows that text). */
function hideStrip(widget) {
  widget.hidden = true;
  if (widget.options) widget.options.hidden = true;
}

function growToFit(node) {
  const [width, height] = node.computeSize?.() ?? [0, 0];
  if (node.size && node.size[1] < height) node.setSize([Math.max(node.size[0], width), height]);
}

function labelPicker(node) {
  const widget = node.widgets?.find((w) => w.name === PICKER);
  if (!widget?.options) return;
  widget.options.getOptionLabel = (value) => {
    if (value == null) return "";
    const spec = node.constructor?.nodeData?.input?.required?.[PICKER]?.[1];
    return spec?.[LABELS]?.[value] ?? String(value);
  };
}

function ourNode(nodeId) {
  const id = String(nodeId ?? "");
  if (!id || id.includes(":")) return null; // inside a subgraph: left to the frontend's strip
  const graph = rootGraph();
  const node = graph?.getNodeById(Number(id)) ?? graph?.getNodeById(id);
  return node && NODE_TYPES.has(node.type) ? node : null;
}

function onProgressText(event) {
  const node = ourNode(event.detail?.nodeId);
  if (node && event.detail?.text) displays.get(node)?.live(event.detail.text);
}

const NO_GRAPH_ID = "00000000-0000-0000-0000-000000000000";

function graphId(graph) {
  return graph?.id && graph.id !== NO_GRAPH_ID ? graph.id : null;
}

function failureOf(entry, nodeId) {
  for (const [kind, data] of entry.status?.messages ?? []) {
    if (String(data?.node_id) !== nodeId) continue;
    if (kind === "execution_error") return `Stopped: ${data.exception_message ?? "error"}`;
    if (kind === "execution_interrupted") return "Cancelled";
  }
  return null;
}

/** Whether the node's widgets hold the values a prompt ran it with. */
function sameInputs(node, inputs) {
  let compared = 0;
  for (const widget of node.widgets ?? []) {
    if (widget.serialize === false || !(widget.name in (inputs ?? {}))) continue;
    const sent = inputs[widget.name];
    if (Array.isArray(sent)) continue; // a link, not a widget value
    if (String(sent) !== String(widget.value)) return false;
    compared += 1;
  }
  return compared > 0;
}

/** This node's inputs in a queued or stored prompt (`[number, id, prompt, extra, ...]`).
 *
 * A prompt ran this node when it came from this workflow (the same graph id)
 * or, for a graph whose id did not survive (a cleared graph has the all-zero id
 * and gets a new one when it loads again), when it ran a node of this id and
 * type with the values the node's widgets hold now.
 */
function specFor(queued, graphId, node) {
  const [, , prompt, extra] = queued ?? [];
  const spec = prompt?.[String(node.id)];
  if (spec?.class_type !== node.type) return null;
  const sameGraph = !!graphId && extra?.extra_pnginfo?.workflow?.id === graphId;
  return sameGraph || sameInputs(node, spec.inputs) ? spec : null;
}

/** The newest stored run of this node: its output, or why it stopped. */
function lastRun(entries, graphId, node) {
  const nodeId = String(node.id);
  for (const entry of entries) {
    if (!specFor(entry.prompt, graphId, node)) continue;
    const output = entry.outputs?.[nodeId];
    if (output) return { output };
    const failure = failureOf(entry, nodeId);
    if (failure) return { failure };
  }
  return null;
}

/** Prompts still running or waiting: their answers are not in /history yet. */
async function queuedPrompts() {
  const response = await api.fetchApi("/queue");
  if (!response.ok) return [];
  const queue = await response.json();
  return [...(queue.queue_running ?? []), ...(queue.queue_pending ?? [])];
}

let afterQueueMoves = false;
/** Try again once the server says the queue changed (ComfyUI stores a prompt's
 * history, then sends `status`: execution.py `task_done`, server.py `queue_updated`). */
function restoreWhenTheQueueMoves() {
  if (afterQueueMoves) return;
  afterQueueMoves = true;
  const again = () => {
    api.removeEventListener("status", again);
    afterQueueMoves = false;
    scheduleRestore();
  };
  api.addEventListener("status", again);
}

/**
 * Fill each empty text area with its node's newest run. A node that a running
 * or waiting prompt runs is left empty until that prompt is stored: /history
 * holds only finished prompts, and an older run's answer would be shown as
 * this one's (a page reloaded while the prompt's later nodes still ran).
 */
async function restoreFromHistory() {
  const graph = rootGraph();
  const waiting = (graph?._nodes ?? graph?.nodes ?? []).filter(
    (node) => NODE_TYPES.has(node.type) && displays.get(node)?.state === "empty"
  );
  if (!waiting.length) return;
  const queued = await queuedPrompts();
  const id = graphId(graph);
  const running = waiting.filter((node) => queued.some((item) => specFor(item, id, node)));
  if (running.length) restoreWhenTheQueueMoves();
  const settled = waiting.filter((node) => !running.includes(node));
  if (!settled.length) return;
  const response = await api.fetchApi(`/history?max_items=${HISTORY_ITEMS}`);
  if (!response.ok) return;
  const entries = Object.values(await response.json()).reverse();
  for (const node of settled) {
    const display = displays.get(node);
    const run = display?.state === "empty" ? lastRun(entries, id, node) : null;
    if (run?.output) display.final(run.output);
    else if (run?.failure) display.stopped(run.failure);
  }
}

let restoring = null;
function scheduleRestore() {
  // one /history read for all nodes of a graph that is loading (configure runs per node)
  restoring ??= new Promise((resolve) => setTimeout(resolve, 0))
    .then(restoreFromHistory)
    .catch((error) => console.warn("comfy-llm: could not read the last answers", error))
    .finally(() => {
      restoring = null;
    });
}

app.registerExtension({
  name: "comfy-llm.NodeText",
  async setup() {
    addStyle();
    api.addEventListener("progress_text", onProgressText);
    scheduleRestore();
  },
  async beforeRegisterNodeDef(nodeType, nodeData) {
    if (!NODE_TYPES.has(nodeData?.name)) return;
    const proto = nodeType.prototype;
    const { onNodeCreated, onExecuted, onConfigure, addCustomWidget } = proto;
    proto.onNodeCreated = function (...args) {
      const result = onNodeCreated?.apply(this, args);
      addDisplay(this);
      labelPicker(this);
      growToFit(this);
      return result;
    };
    proto.onExecuted = function (output, ...rest) {
      const result = onExecuted?.apply(this, [output, ...rest]);
      displays.get(this)?.final(output);
      return result;
    };
    proto.onConfigure = function (...args) {
      const result = onConfigure?.apply(this, args);
      growToFit(this);
      scheduleRestore();
      return result;
    };
    proto.addCustomWidget = function (widget, ...rest) {
      const added = addCustomWidget.apply(this, [widget, ...rest]);
      const shown = added ?? widget;
      if (shown?.name === FRONTEND_STRIP) hideStrip(shown);
      return added;
    };
  },
  onNodeOutputsUpdated(outputs) {
    // 1.58.1: a workflow tab shown again, or a run loaded from the queue panel
    for (const [id, output] of Object.entries(outputs ?? {})) {
      const node = ourNode(id);
      if (node && output) displays.get(node)?.final(output);
    }
  },
});
