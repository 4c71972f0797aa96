"""What models are available here without typing: curated, staged, local folders, HF cache.

One listing for the node's model picker and ``comfy-llm models``. Listing
reads folder names and small JSON files only (no hashing, no Hub request), so
it is cheap enough for every ``/object_info``; the full gate runs when a
choice is resolved.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from comfy_llm_core import ExecutionTarget
from comfy_llm_profiles import (
    ProfileError,
    check_gguf_pair,
    decide,
    decide_gguf,
    list_gguf_files,
    list_hf_cache_snapshots,
    list_model_folders,
    load_curated_registry,
)
from comfy_llm_staging import list_staged_snapshots

from comfy_llm._storage import model_folders

__all__ = ["SOURCES", "ModelChoice", "list_models", "picker_values"]

SOURCES = ("curated", "staged", "local", "hf-cache")
_CONFIG_MAX_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """One model a user can pick.

    Attributes:
        reference: What to type or pick (a curated id, ``owner/model@commit``,
            or ``models/<folder>/<name>``).
        source: One of :data:`SOURCES`.
        path: The folder on disk (None for a curated id not staged yet).
        size_bytes: Safetensors bytes on disk (None when unknown).
        compatible: None when not checked, else whether the target's registry
            accepts it.
        reason: Why not, or the backend it would use.
    """

    reference: str
    source: str
    path: str | None = None
    size_bytes: int | None = None
    compatible: bool | None = None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``comfy-llm models --json``)."""
        return {
            "reference": self.reference,
            "source": self.source,
            "path": self.path,
            "size_bytes": self.size_bytes,
            "compatible": self.compatible,
            "reason": self.reason,
        }


def _local_choices() -> list[tuple[str, Path]]:
    folders = model_folders()
    return list_model_folders(folders) + list_gguf_files(folders)


def picker_values(storage_root: Path | None) -> list[str]:
    """The picker's list: curated ids, staged snapshots, then local folders (no duplicates)."""
    values = list(load_curated_registry().ids)
    if storage_root is not None:
        values += [f"{repo}@{rev}" for repo, rev, _ in list_staged_snapshots(storage_root)]
    values += [label for label, _ in _local_choices()]
    return list(dict.fromkeys(values))


def list_models(storage_root: Path | None, target: ExecutionTarget | None) -> list[ModelChoice]:
    """Every model available here, each checked against ``target``'s registry when given."""
    curated = load_curated_registry()
    choices = [
        ModelChoice(
            entry.id,
            "curated",
            compatible=None if target is None else target in entry.targets,
            reason=f"{entry.reference} ({entry.display_name})",
        )
        for entry in curated.entries.values()
    ]
    folders: list[tuple[str, str, Path]] = []
    if storage_root is not None:
        folders += [
            (f"{repo}@{rev}", "staged", path)
            for repo, rev, path in list_staged_snapshots(storage_root)
        ]
    folders += [(label, "local", path) for label, path in _local_choices()]
    folders += [
        (f"{repo}@{rev}", "hf-cache", path) for repo, rev, path in list_hf_cache_snapshots()
    ]
    for reference, source, path in folders:
        choices.append(_checked(reference, source, path, target))
    return choices


def _checked_gguf(reference: str, path: Path, target: ExecutionTarget | None) -> ModelChoice:
    """A GGUF file: with a target, checked (the GGUF rules) and decided like at resolution."""
    try:
        size = path.stat().st_size
    except OSError:
        size = None
    if target is None:
        return ModelChoice(reference, "local", str(path), size)
    try:
        checked = check_gguf_pair(path.parent, path.name, max_weight_bytes=2**62)
        decision = decide_gguf(target, checked.model, checked.projector, repository=reference)
    except ProfileError as error:
        return ModelChoice(reference, "local", str(path), size, False, type(error).__name__)
    projector = f" + {checked.projector.path.name}" if checked.projector else " (text only)"
    return ModelChoice(
        reference,
        "local",
        str(path),
        checked.scan.weight_bytes,
        True,
        f"{decision.backend}, {decision.family}, {decision.quantization.method}{projector}",
    )


def _checked(
    reference: str, source: str, path: Path, target: ExecutionTarget | None
) -> ModelChoice:
    if path.is_file():
        return _checked_gguf(reference, path, target)
    weights = _safetensors(path.iterdir() if path.is_dir() else ())
    size = sum(weights)
    if target is None:
        return ModelChoice(reference, source, str(path), size)
    config = _config(path / "config.json")
    if config is None:
        return ModelChoice(reference, source, str(path), size, False, "no readable config.json")
    try:
        decision = decide(target, config, weight_bytes=size, repository=reference)
    except ProfileError as error:
        return ModelChoice(reference, source, str(path), size, False, type(error).__name__)
    return ModelChoice(
        reference, source, str(path), size, True, f"{decision.backend}, {decision.family}"
    )


def _safetensors(entries: Iterable[Path]) -> list[int]:
    sizes = []
    for entry in entries:
        if entry.name.endswith(".safetensors"):
            try:
                sizes.append(entry.stat().st_size)
            except OSError:
                continue
    return sizes


def _config(path: Path) -> dict[str, Any] | None:
    try:
        if path.stat().st_size > _CONFIG_MAX_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None
