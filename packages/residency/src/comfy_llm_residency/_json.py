"""Plain JSON from the values a run's metadata collects (enums, paths, tuples, sets)."""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from typing import Any

__all__ = ["json_ready"]


def json_ready(value: Any) -> Any:
    """Convert ``value`` into plain JSON types (dict, list, str, int, float, bool, None).

    Non-finite floats become None; enums their value; paths and unknown
    objects their string form.
    """
    if isinstance(value, enum.Enum):
        return json_ready(value.value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=str) if isinstance(value, set | frozenset) else value
        return [json_ready(v) for v in items]
    return str(value)  # a path, or an object of no JSON type
