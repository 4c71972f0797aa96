"""What the Hub said about a pinned commit, kept beside the manifests.

A commit is immutable, so the facts a decision reads from it (config.json and
the safetensors total) never change. Curated entries are resolved from them:
the first resolution inspects the Hub (model info + config.json), stores the
facts at ``<storage_root>/profiles/pinned/<owner>/<model>/<commit>.json``,
and every later resolution decides from that file without any request. The
file is read as hostile (it lives on a shared disk): anything malformed, or
naming another repository or commit, is ignored and the Hub asked again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from comfy_llm_core import make_folder, write_atomically

from comfy_llm_profiles._manifest import MANIFEST_DIR
from comfy_llm_profiles._reference import is_commit

__all__ = [
    "PinnedFacts",
    "load_branch_pin",
    "load_pinned_facts",
    "pinned_facts_path",
    "save_branch_pin",
    "save_pinned_facts",
]

_FORMAT = 1
_MAX_BYTES = 5 * 1024**2


@dataclass(frozen=True, slots=True)
class PinnedFacts:
    """The metadata a decision needs about one commit.

    Attributes:
        repository: ``owner/model``.
        revision: The 40-hex commit.
        weight_bytes: Total safetensors bytes at that commit.
        config: config.json at that commit.
    """

    repository: str
    revision: str
    weight_bytes: int
    config: Mapping[str, Any]


def pinned_facts_path(storage_root: Path, repository: str, revision: str) -> Path:
    """``<storage_root>/profiles/pinned/<owner>/<model>/<commit>.json``.

    ``repository`` must already be a validated ``owner/model`` and ``revision``
    a 40-hex commit (both become path parts).
    """
    owner, model = repository.split("/")
    return Path(storage_root) / MANIFEST_DIR / "pinned" / owner / model / f"{revision}.json"


def load_pinned_facts(storage_root: Path, repository: str, revision: str) -> PinnedFacts | None:
    """The stored facts of ``repository@revision``, or None when absent or unusable."""
    path = pinned_facts_path(storage_root, repository, revision)
    try:
        if path.stat().st_size > _MAX_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        return None
    weight, config = data.get("weight_bytes"), data.get("config")
    if (
        data.get("repository") != repository
        or data.get("revision") != revision
        or isinstance(weight, bool)
        or not isinstance(weight, int)
        or weight < 0
        or not isinstance(config, dict)
    ):
        return None
    return PinnedFacts(repository, revision, weight, config)


def save_pinned_facts(storage_root: Path, facts: PinnedFacts) -> Path:
    """Write ``facts`` atomically (temp file + ``os.replace``); return the path.

    Raises:
        ValueError: ``facts.revision`` is not a 40-hex commit.
        DiskFullError: No room for the folder or the file (comfy_llm_core).
        OSError: The folder cannot be created or written for another reason.
    """
    if not is_commit(facts.revision):
        raise ValueError(f"revision {facts.revision!r} is not a 40-hex commit")
    path = pinned_facts_path(storage_root, facts.repository, facts.revision)
    _write_json(
        path,
        {
            "format": _FORMAT,
            "repository": facts.repository,
            "revision": facts.revision,
            "weight_bytes": facts.weight_bytes,
            "config": dict(facts.config),
        },
    )
    return path


def _branch_pin_path(storage_root: Path, repository: str, branch: str | None) -> Path:
    owner, model = repository.split("/")
    name = quote(branch, safe="") if branch else "@default"
    return Path(storage_root) / MANIFEST_DIR / "pinned" / owner / model / "refs" / f"{name}.json"


def save_branch_pin(storage_root: Path, repository: str, branch: str | None, revision: str) -> Path:
    """Record that ``repository@branch`` (None: the default branch) last resolved to ``revision``.

    An offline resolution of the same branch uses it (and says so in its
    metadata: ``resolved_offline``).
    """
    if not is_commit(revision):
        raise ValueError(f"revision {revision!r} is not a 40-hex commit")
    path = _branch_pin_path(storage_root, repository, branch)
    _write_json(
        path,
        {"format": _FORMAT, "repository": repository, "branch": branch, "revision": revision},
    )
    return path


def load_branch_pin(storage_root: Path, repository: str, branch: str | None) -> str | None:
    """The commit ``repository@branch`` last resolved to here, or None."""
    path = _branch_pin_path(storage_root, repository, branch)
    try:
        if path.stat().st_size > 4096:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        return None
    revision = data.get("revision")
    if data.get("repository") != repository or data.get("branch") != branch:
        return None
    return revision if isinstance(revision, str) and is_commit(revision) else None


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    what = "the Hub facts cache (profiles/pinned)"
    make_folder(path.parent, what)
    write_atomically(path, json.dumps(data, indent=2, sort_keys=True) + "\n", what=what)
