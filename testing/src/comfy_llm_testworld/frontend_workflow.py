"""Convert a saved UI workflow to the API format the way ComfyUI's frontend does.

The frontend (``graphToPrompt``) walks the graph's nodes; each widget input
of a node, in ``/object_info``'s ``input_order`` (required, then optional),
takes the next entry of the node's ``widgets_values``. Two kinds of widget
take an extra slot that is never sent: the ``control_after_generate`` combo
the frontend adds after an INT input named ``seed``/``noise_seed`` (or one
declaring ``control_after_generate``), and the upload button after a combo
with ``image_upload``/``video_upload``/``audio_upload``. A linked input is
sent as ``[origin node id, origin slot]``; muted (mode 2) and bypassed
(mode 4) nodes are left out, and so are nodes the server does not know that
only annotate (notes). A workflow saved before a node gained inputs (appended
last) has fewer ``widgets_values`` than slots: the frontend's
``LGraphNode.configure`` assigns the saved values by index and the widgets
past them keep their defaults, and so does :func:`to_api_prompt` (the
declared ``default``, else a combo's first option).

:func:`widget_slots` lists the slots a node's ``widgets_values`` must have,
so a test can check a saved workflow against the live schema.
"""

from __future__ import annotations

from typing import Any

__all__ = ["WorkflowError", "to_api_prompt", "widget_slots"]

_WIDGET_TYPES = {"INT", "FLOAT", "STRING", "BOOLEAN", "COMBO"}
_SEED_NAMES = {"seed", "noise_seed"}
_UPLOAD_FLAGS = ("image_upload", "video_upload", "audio_upload")
_ANNOTATIONS = {"Note", "MarkdownNote"}
CONTROL_SLOT = "control_after_generate"
UPLOAD_SLOT = "upload"


class WorkflowError(ValueError):
    """The workflow does not fit the server's schema."""


def _ordered_inputs(info: dict[str, Any]) -> list[tuple[str, Any, dict[str, Any]]]:
    declared = info.get("input", {})
    order = info.get("input_order", {})
    inputs = []
    for section in ("required", "optional"):
        specs = declared.get(section, {})
        for name in order.get(section, list(specs)):
            spec = specs[name]
            kind = spec[0]
            options = spec[1] if len(spec) > 1 and isinstance(spec[1], dict) else {}
            inputs.append((name, kind, options))
    return inputs


def _is_widget(kind: Any) -> bool:
    return isinstance(kind, list) or kind in _WIDGET_TYPES


def widget_slots(info: dict[str, Any]) -> list[str]:
    """The names of a node's ``widgets_values`` slots, in order.

    Inputs are named as declared; an extra slot is ``"<input>:control_after_generate"``
    or ``"<input>:upload"``.
    """
    slots = []
    for name, kind, options in _ordered_inputs(info):
        if not _is_widget(kind):
            continue
        slots.append(name)
        if kind == "INT" and (name in _SEED_NAMES or options.get(CONTROL_SLOT)):
            slots.append(f"{name}:{CONTROL_SLOT}")
        if any(options.get(flag) for flag in _UPLOAD_FLAGS):
            slots.append(f"{name}:{UPLOAD_SLOT}")
    return slots


def _defaults(info: dict[str, Any]) -> dict[str, Any]:
    """Each widget input's default as the frontend builds the widget."""
    found = {}
    for name, kind, options in _ordered_inputs(info):
        if "default" in options:
            found[name] = options["default"]
        elif isinstance(kind, list) and kind:
            found[name] = kind[0]
        elif options.get("options"):
            found[name] = options["options"][0]
    return found


def _links(workflow: dict[str, Any]) -> dict[int, tuple[int, int]]:
    links = {}
    for link in workflow.get("links", []):
        if isinstance(link, dict):
            links[int(link["id"])] = (int(link["origin_id"]), int(link["origin_slot"]))
        else:
            links[int(link[0])] = (int(link[1]), int(link[2]))
    return links


def to_api_prompt(
    workflow: dict[str, Any], object_info: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Return the API-format prompt for ``workflow``.

    Args:
        workflow: A UI workflow (``nodes``, ``links``), as saved by the frontend.
        object_info: ``/object_info`` entries by node class, for every node type used.

    Raises:
        WorkflowError: A node type is unknown or its ``widgets_values`` do not fit.
    """
    links = _links(workflow)
    skipped = {
        int(node["id"])
        for node in workflow.get("nodes", [])
        if node.get("mode", 0) in (2, 4) or node["type"] in _ANNOTATIONS
    }
    prompt: dict[str, dict[str, Any]] = {}
    for node in workflow.get("nodes", []):
        node_id = int(node["id"])
        if node_id in skipped:
            continue
        info = object_info.get(node["type"])
        if info is None:
            raise WorkflowError(f"node {node_id}: the server has no node type {node['type']!r}")
        linked = {
            entry["name"]: links[int(entry["link"])]
            for entry in node.get("inputs", [])
            if entry.get("link") is not None
        }
        values = list(node.get("widgets_values") or [])
        slots = widget_slots(info)
        defaults = _defaults(info)
        inputs: dict[str, Any] = {}
        for index, slot in enumerate(slots):
            if ":" in slot:
                continue
            if index < len(values):
                inputs[slot] = values[index]
            elif slot in defaults:  # a widget newer than the saved workflow
                inputs[slot] = defaults[slot]
        for name, (origin, slot_index) in linked.items():
            if origin in skipped:
                raise WorkflowError(f"node {node_id}: input {name} comes from a skipped node")
            inputs[name] = [str(origin), slot_index]
        prompt[str(node_id)] = {
            "class_type": node["type"],
            "inputs": inputs,
            "_meta": {"title": node.get("title") or info.get("display_name") or node["type"]},
        }
    return prompt
