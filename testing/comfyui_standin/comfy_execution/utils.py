"""Stand-in for ``comfy_execution.utils.get_executing_context`` (tests only)."""

from __future__ import annotations

from typing import NamedTuple


class ExecutionContext(NamedTuple):
    prompt_id: str
    node_id: str
    list_index: int | None


current: ExecutionContext | None = None


def get_executing_context() -> ExecutionContext | None:
    return current
