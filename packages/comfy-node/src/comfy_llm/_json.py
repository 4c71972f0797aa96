"""The one name for the JSON-ready records the node and the CLI print.

A caption batch's summary, its per-image records and the CLI's command
results are plain JSON objects built key by key and printed as they are
(``metadata_json``, ``--json``): their values are any JSON value. One request's
record is typed (``comfy_llm_residency.RunMetadata``) and flattened once,
where it is printed.
"""

from __future__ import annotations

from typing import Any, TypeAlias

__all__ = ["JsonRecord"]

JsonRecord: TypeAlias = dict[str, Any]
"""A JSON object as printed: string keys, any JSON value."""
