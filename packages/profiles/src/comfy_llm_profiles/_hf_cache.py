"""The Hugging Face cache as a source: snapshots other tools already downloaded.

huggingface_hub keeps ``<HF_HUB_CACHE>/models--<owner>--<model>/`` with
``snapshots/<commit>/<file>`` links into ``blobs/<etag>`` (the etag is the
file's sha256 for LFS files, its git blob sha1 otherwise) and
``refs/<branch>`` files holding the commit a branch last resolved to. The
cache folder is read as huggingface_hub reads it, at call time:
``HF_HUB_CACHE``, then ``HUGGINGFACE_HUB_CACHE``, then ``HF_HOME/hub``, then
``$XDG_CACHE_HOME/huggingface/hub`` (``~/.cache`` by default).

Only reading happens here; whether a snapshot is complete and its blobs
match their names is staging's check (``comfy_llm_staging._in_place``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection
from pathlib import Path

from comfy_llm_core import env_str

from comfy_llm_profiles._reference import is_commit

__all__ = [
    "OFFLINE_ENV",
    "hf_cache_dir",
    "hf_cache_ref",
    "hf_cache_repository_dir",
    "hf_cache_snapshot",
    "list_hf_cache_snapshots",
    "hub_offline",
    "snapshot_problem",
]

OFFLINE_ENV = "HF_HUB_OFFLINE"
_TRUE = frozenset({"1", "on", "yes", "true"})


def hub_offline() -> bool:
    """True when HF_HUB_OFFLINE (or the older TRANSFORMERS_OFFLINE) is set true."""
    names = (OFFLINE_ENV, "TRANSFORMERS_OFFLINE")
    return any((env_str(name) or "").lower() in _TRUE for name in names)


def hf_cache_dir() -> Path:
    """The Hugging Face hub cache folder huggingface_hub would use now."""
    explicit = env_str("HF_HUB_CACHE") or env_str("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    home = env_str("HF_HOME")
    if home:
        return Path(home).expanduser() / "hub"
    xdg = env_str("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return Path(xdg).expanduser() / "huggingface" / "hub"


def hf_cache_repository_dir(repository: str) -> Path:
    """``<cache>/models--<owner>--<model>`` (``repository`` already validated)."""
    return hf_cache_dir() / ("models--" + repository.replace("/", "--"))


def hf_cache_snapshot(repository: str, revision: str) -> Path | None:
    """The cached snapshot folder of ``repository`` at a 40-hex commit, if it holds config.json."""
    if not is_commit(revision):
        return None
    folder = hf_cache_repository_dir(repository) / "snapshots" / revision
    return folder if (folder / "config.json").is_file() else None


def list_hf_cache_snapshots() -> list[tuple[str, str, Path]]:
    """``(owner/model, commit, folder)`` of every cached model snapshot holding config.json."""
    found = []
    try:
        repositories = sorted(hf_cache_dir().glob("models--*--*"))
    except OSError:
        return []
    for folder in repositories:
        owner, _, model = folder.name.removeprefix("models--").partition("--")
        if not owner or not model or "--" in model:
            continue
        try:
            snapshots = sorted((folder / "snapshots").iterdir())
        except OSError:
            continue
        for snapshot in snapshots:
            if is_commit(snapshot.name) and (snapshot / "config.json").is_file():
                found.append((f"{owner}/{model}", snapshot.name, snapshot))
    return found


def hf_cache_ref(repository: str, branch: str | None) -> str | None:
    """The commit ``refs/<branch>`` (``main`` for None) records, when it is a 40-hex commit."""
    refs = hf_cache_repository_dir(repository) / "refs"
    name = branch or "main"
    path = refs / name
    try:
        if not path.resolve().is_relative_to(refs.resolve()) or path.stat().st_size > 128:
            return None
        commit = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return commit if is_commit(commit) else None


def snapshot_problem(files: Collection[str], read_index: Callable[[], object]) -> str | None:
    """Why a cached snapshot is not complete, or None when it is.

    Complete means: config.json, a tokenizer (``tokenizer.json`` or
    ``tokenizer_config.json``), and every weight file
    ``model.safetensors.index.json`` maps, or a ``*.safetensors`` without an
    index. A download interrupted between files leaves a shard out; a file
    interrupted mid-way never gets its link, so it is absent too.

    Args:
        files: The snapshot's relative file paths.
        read_index: Returns the parsed index JSON (called only when it exists).
    """
    names = set(files)
    if "config.json" not in names:
        return "no config.json"
    if not names & {"tokenizer.json", "tokenizer_config.json"}:
        return "no tokenizer.json or tokenizer_config.json"
    if "model.safetensors.index.json" in names:
        index = read_index()
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            return "model.safetensors.index.json has no weight_map"
        missing = sorted({str(v) for v in weight_map.values()} - names)
        if missing:
            return f"{len(missing)} weight file(s) of the index are missing ({missing[0]})"
    elif not any(name.endswith(".safetensors") for name in names):
        return "no *.safetensors"
    return None
