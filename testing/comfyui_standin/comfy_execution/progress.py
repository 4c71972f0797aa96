"""Stand-in for ``comfy_execution.progress`` (tests only).

Spelled as upstream ComfyUI after 0.33 spells it (Comfy-Org/ComfyUI
``comfy_execution/progress.py``): ``get_progress_state()`` returns the global
``ProgressRegistry``; ``ProgressRegistry.set_activity(node_id, activity)`` sets
(or, with ``None``, clears) what a running node spends its time on, and does
nothing when the activity is unchanged. 0.33 has ``get_progress_state`` but no
``set_activity``: tests remove the method to be that ComfyUI.

``activities`` records every change that would reach the handlers (the
frontend), as ``(node_id, activity)``.
"""

from __future__ import annotations

from typing import Any


class ProgressRegistry:
    """Node progress state (only the part the node touches)."""

    def __init__(self, prompt_id: str = "") -> None:
        self.prompt_id = prompt_id
        self.nodes: dict[str, dict[str, Any]] = {}
        self.activities: list[tuple[str, str | None]] = []

    def ensure_entry(self, node_id: str) -> dict[str, Any]:
        """The node's entry, created pending on first use (as upstream)."""
        if node_id not in self.nodes:
            self.nodes[node_id] = {"state": "pending", "value": 0, "max": 1}
        return self.nodes[node_id]

    def set_activity(self, node_id: str, activity: str | None) -> None:
        """Set what a running node is spending time on, or None to clear it."""
        entry = self.ensure_entry(node_id)
        if entry.get("activity") == activity:
            return
        if activity is None:
            entry.pop("activity", None)
        else:
            entry["activity"] = activity
        self.activities.append((node_id, activity))


global_progress_registry: ProgressRegistry | None = None


def get_progress_state() -> ProgressRegistry:
    """The global registry, created empty on first use (as upstream)."""
    global global_progress_registry
    if global_progress_registry is None:
        global_progress_registry = ProgressRegistry()
    return global_progress_registry
