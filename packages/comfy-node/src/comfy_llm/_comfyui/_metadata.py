"""The node's ``metadata_json`` as an artist reads it: key facts first, no disk paths.

The facts a reader looks for (which model, where it ran, how the answer
ended, how long it took; a caption batch's counts) come first, the rest
sorted by name. A value naming a place on this disk (``snapshot_path`` and
other ``*_path`` fields) is shown relative to the folder it lives in:
``models/LLM/<name>`` under ComfyUI's models folder, ``<storage>/...``
under comfy-llm's storage root, else its last folder's name, so a shared
workflow or screenshot does not carry the user's home folder. The CLI's
``--json`` keeps full paths (the user asked for the record).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from comfy_llm_core import redact
from comfy_llm_residency import RunMetadata

from comfy_llm._json import JsonRecord
from comfy_llm._storage import comfy_models_dir, storage_root

__all__ = ["KEY_FACTS", "metadata_json", "shown_metadata"]

KEY_FACTS = (
    "model",
    "repository",
    "revision",
    "model_source",
    "backend",
    "execution_target",
    "finish_reason",
    "output_tokens",
    "generation_seconds",
    "time_to_first_token_seconds",
    "cache_status",
    "images",
    "captioned",
    "kept_existing",
    "failed",
    "written",
    "manifest",
)


def metadata_json(metadata: RunMetadata | JsonRecord) -> str:
    """A run's record (or a caption batch's summary) as ComfyUI's metadata_json.

    Indented JSON, key facts first and no disk paths (:func:`shown_metadata`);
    tokens scrubbed.
    """
    flat = metadata.to_dict() if isinstance(metadata, RunMetadata) else metadata
    shown = shown_metadata(flat)
    return redact(json.dumps(shown, indent=2, ensure_ascii=False, default=str))


def shown_metadata(metadata: JsonRecord) -> JsonRecord:
    """``metadata`` reordered (key facts first) with disk paths shortened."""
    roots = _roots()
    first = [key for key in KEY_FACTS if key in metadata]
    rest = sorted(key for key in metadata if key not in KEY_FACTS)
    return {key: _shown(key, metadata[key], roots) for key in [*first, *rest]}


def _roots() -> list[tuple[Path, str]]:
    roots: list[tuple[Path, str]] = []
    models = comfy_models_dir()
    if models is not None:
        roots.append((models.resolve(), "models"))
    with contextlib.suppress(OSError, ValueError):  # unusable: paths show their names
        roots.append((storage_root().resolve(), "<storage>"))
    return roots


def _shown(key: str, value: object, roots: list[tuple[Path, str]]) -> object:
    if isinstance(value, dict):
        return {k: _shown(k, value[k], roots) for k in sorted(value)}
    if isinstance(value, list):
        return [_shown(key, item, roots) for item in value]
    if isinstance(value, str) and (key == "path" or key.endswith("_path")):
        return _short_path(value, roots)
    return value


def _short_path(value: str, roots: list[tuple[Path, str]]) -> str:
    path = Path(value)
    if not path.is_absolute():
        return value
    resolved = path.resolve()
    for root, label in roots:
        if resolved.is_relative_to(root):
            return f"{label}/{resolved.relative_to(root).as_posix()}"
    return f".../{path.name}"
