"""What models are available here without typing: curated, staged, local folders, HF cache.

One listing for the node's model picker and ``comfy-llm models``. Listing
reads folder names and small JSON files only (no hashing, no Hub request), so
it is cheap enough for every ``/object_info``; the full gate runs when a
choice is resolved.

The picker (:func:`picker_choices`) lists only what the target's registry
accepts, each model once: a curated id by the registry's decision on its
pinned commit's facts when they are on disk (``profiles/pinned/``), else by
its review and whether the target has an engine for its family; a downloaded
snapshot of a curated pin is that curated id ("downloaded"); any other
snapshot or local folder by the decision on its own config.json. Each value
gets a label with its name, "downloaded" and its size where known.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from comfy_llm_core import ExecutionTarget
from comfy_llm_profiles import (
    CuratedEntry,
    ProfileError,
    RepositoryFile,
    available_backends,
    check_gguf_pair,
    decide,
    decide_gguf,
    hub_gguf_quantizations,
    list_gguf_files,
    list_hf_cache_snapshots,
    list_model_folders,
    load_curated_registry,
    load_pinned_facts,
    registry_for,
)
from comfy_llm_staging import list_staged_snapshots

from comfy_llm._json import JsonRecord
from comfy_llm._storage import model_folders

__all__ = [
    "SOURCES",
    "ModelChoice",
    "PickerChoice",
    "list_models",
    "picker_choices",
]

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

    def to_dict(self) -> JsonRecord:
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


@dataclass(frozen=True, slots=True)
class PickerChoice:
    """One entry of the node's model picker.

    Attributes:
        value: What the widget holds and a workflow saves (a curated id,
            ``owner/model@commit`` or ``models/<folder>/<name>``).
        label: What the picker shows for it: name, "downloaded", size.
    """

    value: str
    label: str


def picker_choices(storage_root: Path | None, target: ExecutionTarget) -> list[PickerChoice]:
    """The picker's entries for ``target``: accepted models only, each once (module docstring).

    Curated ids first (the curated list's order), then other downloaded
    snapshots, then local checkpoint folders.
    """
    backends = available_backends(target)
    staged = _staged(storage_root) if storage_root is not None else []
    on_disk = {(repo, rev): path for repo, rev, path in staged}
    choices: list[PickerChoice] = []
    pins: set[tuple[str, str]] = set()
    for entry in load_curated_registry().for_target(target):
        pins.add((entry.repository, entry.revision))
        folder = on_disk.get((entry.repository, entry.revision))
        size = _weights_size(folder) if folder is not None else None
        if not _curated_accepted(entry, target, backends, storage_root):
            continue
        if size is None and storage_root is not None:
            facts = load_pinned_facts(storage_root, entry.repository, entry.revision)
            size = facts.weight_bytes if facts is not None else None
        choices.append(PickerChoice(entry.id, _label(entry.display_name, folder is not None, size)))
    for (repo, rev), folder in on_disk.items():  # rev may end in :<quantization> (a GGUF)
        if (repo, rev) not in pins and _folder_accepted(folder, target, backends, repo):
            name = f"{repo} @ {rev[:7]}{rev[40:]}"  # a GGUF keeps its :QUANT
            choices.append(PickerChoice(f"{repo}@{rev}", _label(name, True, _weights_size(folder))))
    for label, folder in _local_choices():
        if _folder_accepted(folder, target, backends, label):
            choices.append(PickerChoice(label, _label(label, None, _weights_size(folder))))
    unique: dict[str, PickerChoice] = {}
    for choice in choices:
        unique.setdefault(choice.value, choice)
    return list(unique.values())


def _curated_accepted(
    entry: CuratedEntry,
    target: ExecutionTarget,
    backends: frozenset[str],
    storage_root: Path | None,
) -> bool:
    """The registry's decision on a curated id, from its pinned facts when they are here."""
    facts = (
        load_pinned_facts(storage_root, entry.repository, entry.revision)
        if storage_root is not None
        else None
    )
    if facts is None:  # not resolved here yet: its family must have an engine on this target
        return any(
            rule.family == entry.family and any(e.name in backends for e in rule.backends)
            for rule in registry_for(target).rules
        )
    try:
        entry.profile(target, facts.config, weight_bytes=facts.weight_bytes, backends=backends)
    except ProfileError:
        return False
    return True


def _folder_accepted(
    folder: Path, target: ExecutionTarget, backends: frozenset[str], name: str
) -> bool:
    if folder.is_file():  # a local GGUF file (list_gguf_files): the GGUF rules decide
        try:
            checked = check_gguf_pair(folder.parent, folder.name, max_weight_bytes=2**62)
            decide_gguf(
                target, checked.model, checked.projector, repository=name, backends=backends
            )
        except ProfileError:
            return False
        return True
    config = _config(folder / "config.json")
    if config is None:
        return False
    try:
        decide(
            target,
            config,
            weight_bytes=_weights_size(folder) or 0,
            repository=name,
            backends=backends,
        )
    except ProfileError:
        return False
    return True


def _weights_size(folder: Path) -> int | None:
    try:
        if folder.is_file():  # a GGUF file
            return folder.stat().st_size or None
        entries = list(folder.iterdir())
    except OSError:
        return None
    return sum(_safetensors(entries)) or None


def _label(name: str, downloaded: bool | None, size: int | None) -> str:
    """``"SmolVLM 256M Instruct · downloaded · 513 MB"`` (a local folder: no "downloaded")."""
    parts = [name]
    if downloaded:
        parts.append("downloaded")
    if size:
        parts.append(_size(size) if downloaded is not False else f"{_size(size)} download")
    return " · ".join(parts)


def _size(size: int) -> str:
    if size >= 1000**3:
        return f"{size / 1000**3:.1f} GB"
    return f"{max(1, round(size / 1000**2))} MB"


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
        folders += [(f"{repo}@{rev}", "staged", path) for repo, rev, path in _staged(storage_root)]
    folders += [(label, "local", path) for label, path in _local_choices()]
    folders += [
        (f"{repo}@{rev}", "hf-cache", path) for repo, rev, path in list_hf_cache_snapshots()
    ]
    for reference, source, path in folders:
        choices.append(_checked(reference, source, path, target))
    return choices


def _staged(storage_root: Path) -> list[tuple[str, str, Path]]:
    """Staged snapshots; a GGUF selection as ``(repo, rev:QUANT, its model file)``."""
    found = []
    for repo, rev, path in list_staged_snapshots(storage_root):
        if path.name != rev:  # a selection (staging's <revision>-<digest>): one quantization
            names = [RepositoryFile(p.name, None, None) for p in path.glob("*.gguf")]
            offered = hub_gguf_quantizations(names)
            if len(offered) != 1:
                continue
            ((quantization, model),) = offered.items()
            found.append((repo, f"{rev}:{quantization}", path / model.path))
        else:
            found.append((repo, rev, path))
    return found


def _checked_gguf(
    reference: str, source: str, path: Path, target: ExecutionTarget | None
) -> ModelChoice:
    """A GGUF file: with a target, checked (the GGUF rules) and decided like at resolution."""
    try:
        size = path.stat().st_size
    except OSError:
        size = None
    if target is None:
        return ModelChoice(reference, source, str(path), size)
    try:
        checked = check_gguf_pair(path.parent, path.name, max_weight_bytes=2**62)
        decision = decide_gguf(target, checked.model, checked.projector, repository=reference)
    except ProfileError as error:
        return ModelChoice(reference, source, str(path), size, False, type(error).__name__)
    projector = f" + {checked.projector.path.name}" if checked.projector else " (text only)"
    return ModelChoice(
        reference,
        source,
        str(path),
        checked.scan.weight_bytes,
        True,
        f"{decision.backend}, {decision.family}, {decision.quantization.method}{projector}",
    )


def _checked(
    reference: str, source: str, path: Path, target: ExecutionTarget | None
) -> ModelChoice:
    if path.is_file():
        return _checked_gguf(reference, source, path, target)
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


def _config(path: Path) -> JsonRecord | None:
    try:
        if path.stat().st_size > _CONFIG_MAX_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None
