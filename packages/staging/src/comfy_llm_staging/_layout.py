"""Where snapshots live on disk, and which files a snapshot holds.

A snapshot is keyed by repository and revision only: runtime tuning (backend
options, execution target, quantization policy) never changes the files, so
every profile of one repository revision shares one directory::

    <storage root>/                           default_storage_root()
    └── llm_models/
        ├── repo-<sha256(repository)>/        one folder per repository
        │   ├── <revision>/                   the completed snapshot (40-hex commit)
        │   │   ├── .comfy_llm_snapshot.json  completion marker, written last
        │   │   ├── config.json
        │   │   ├── model.safetensors ...     only ALLOW_PATTERNS files
        │   │   └── tokenizer.json ...
        │   ├── <revision>.partial/           download in progress (huggingface_hub
        │   │   └── .cache/huggingface/       local_dir + its bookkeeping); renamed
        │   │                                 to <revision>/ once verified
        │   ├── <revision>.lock               filelock guarding the lease file
        │   └── <revision>.lease.json         lease: pid, host, heartbeat of the stager
        ├── <legacy profile id>/              seed-era profile-keyed snapshot, reused
        │   └── .comfy-modal-llm-complete.json  in place when its marker matches
        └── <anything>/<revision>/            the seed's <profile id>/<revision>/: reused
            ├── config.json                   in place when the canonical directory is
            └── <a completion marker>         absent and the marker names the same
                                              repository and revision (_legacy.py)

The canonical ``<revision>/`` only ever appears by renaming a verified,
marked ``.partial`` directory, so a reader never sees half a snapshot there.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Collection
from pathlib import Path, PurePosixPath

from comfy_llm_core import hub_path_problem

from . import _settings
from .errors import InvalidRepositoryError, InvalidRevisionError, UnsafeSnapshotPathError

MODELS_DIRNAME = "llm_models"
COMFY_MODELS_SUBDIR = "modal_llm"
USER_CACHE_SUBDIR = "comfy-llm"

ALLOW_PATTERNS: tuple[str, ...] = (
    # weights: safetensors only, and their shard index
    "*.safetensors",
    "*.safetensors.index.json",
    # model, generation and quantization configuration
    "config.json",
    "generation_config.json",
    "hf_quant_config.json",
    "quantization_config.json",
    "quantize_config.json",
    # tokenizer
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "tokenizer.model",
    "*.tiktoken",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    # chat template and processors
    "chat_template.json",
    "chat_template.jinja",
    "processor_config.json",
    "preprocessor_config.json",
    "video_preprocessor_config.json",
)
"""Files a snapshot may hold (fnmatch patterns on the repository path)."""

SELECTION_PATTERNS: tuple[str, ...] = ("*.gguf",)
"""Files only a selection may hold (named one by one: a GGUF repository's model file and
projector). A whole snapshot never takes them: a Transformers repository that also
carries GGUF exports would download every quantization."""

IGNORE_PATTERNS: tuple[str, ...] = (
    "*.py",
    "*.pyc",
    "*.bin",
    "*.pt",
    "*.pth",
    "*.pkl",
    "*.pickle",
    "*.ckpt",
    "*.msgpack",
    "*.h5",
    "*.joblib",
    "*.npy",
    "*.npz",
)
"""Never requested even if an allow pattern matched: Python source and pickle-like formats."""

_REVISION_RE = re.compile(r"^[0-9a-f]{40}$")
_REPOSITORY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_SAFE_COMPONENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


def check_repository(repository: object) -> str:
    """Return ``repository`` if it is an ``owner/name`` model id.

    Raises:
        InvalidRepositoryError: It is not.
    """
    if (
        not isinstance(repository, str)
        or not _REPOSITORY_RE.fullmatch(repository)
        or ".." in repository
    ):
        raise InvalidRepositoryError(
            f"Repository {repository!r} is not a Hugging Face model id: expected 'owner/name' "
            "(letters, digits, '-', '_', '.'). Pass the repository the profile was resolved "
            "from.",
            repository=repository,
        )
    return repository


def check_revision(repository: str, revision: object) -> str:
    """Return ``revision`` if it is a lower-case 40-hex commit.

    Raises:
        InvalidRevisionError: It is not.
    """
    if not isinstance(revision, str) or not _REVISION_RE.fullmatch(revision):
        raise InvalidRevisionError(
            f"Revision {revision!r} of {repository} is not a 40-character hexadecimal commit: "
            "staging downloads only pinned revisions. Resolve the reference first (profiles "
            "pin branches and tags to their commit) and stage that commit.",
            repository=repository,
            revision=revision,
        )
    return revision


def repository_dirname(repository: str) -> str:
    """Return the folder name of a repository: ``repo-<sha256 of the id>``."""
    return "repo-" + hashlib.sha256(repository.encode("utf-8")).hexdigest()


def snapshot_path(
    storage_root: Path, repository: str, revision: str, *, files: Collection[str] = ()
) -> Path:
    """Return the canonical directory of one repository revision (or a selection of it).

    The path depends on the repository, revision and selection only. It may
    not exist yet; use :func:`find_completed_snapshot` to learn whether it is
    complete. A selection (one quantization of a GGUF repository: its model
    file and projector) has a folder of its own, so two quantizations of one
    commit never share, or wait on, one marker.

    Args:
        storage_root: The storage root (see :func:`default_storage_root`).
        repository: ``owner/name``.
        revision: A 40-hex commit.
        files: Only these files (exact paths); empty for the whole snapshot.

    Returns:
        ``storage_root/llm_models/repo-<sha256(repository)>/<revision>``, or
        ``…/<revision>-<sha256 of the sorted names, 16 hex>`` for a selection.

    Raises:
        InvalidRepositoryError: ``repository`` is not ``owner/name``.
        InvalidRevisionError: ``revision`` is not a 40-hex commit.
    """
    check_repository(repository)
    check_revision(repository, revision)
    name = f"{revision}-{selection_digest(files)}" if files else revision
    return Path(storage_root) / MODELS_DIRNAME / repository_dirname(repository) / name


def selection_digest(files: Collection[str]) -> str:
    """16 hex of the sha256 of a selection's sorted, NUL-separated file names."""
    joined = "\0".join(sorted(set(files)))
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()[:16]


def legacy_snapshot_path(storage_root: Path, legacy_profile_id: str) -> Path | None:
    """Return the seed-era profile-keyed directory, or None for an unsafe id."""
    if not _SAFE_COMPONENT_RE.fullmatch(legacy_profile_id) or ".." in legacy_profile_id:
        return None
    return Path(storage_root) / MODELS_DIRNAME / legacy_profile_id


def partial_path(snapshot: Path) -> Path:
    """Return the in-progress download directory next to a snapshot."""
    return snapshot.with_name(snapshot.name + ".partial")


def lock_path(snapshot: Path) -> Path:
    """Return the filelock path next to a snapshot."""
    return snapshot.with_name(snapshot.name + ".lock")


def lease_path(snapshot: Path) -> Path:
    """Return the lease file path next to a snapshot."""
    return snapshot.with_name(snapshot.name + ".lease.json")


def default_storage_root(comfy_models_dir: Path | None = None) -> Path:
    """Return where snapshots are stored when the caller names no root.

    Order: ``COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT``; else
    ``comfy_models_dir/modal_llm`` when ComfyUI's models folder is given (the
    node passes it; staging never imports ComfyUI); else a per-user cache
    folder: ``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux, ``~/Library/Caches``
    on macOS, ``%LOCALAPPDATA%`` on Windows, each with ``comfy-llm`` appended.

    Args:
        comfy_models_dir: ComfyUI's ``models`` directory, if known.

    Returns:
        The storage root (not created).
    """
    override = _settings.storage_root_override()
    if override is not None:
        return override
    if comfy_models_dir is not None:
        return Path(comfy_models_dir) / COMFY_MODELS_SUBDIR
    return _settings.user_cache_dir() / USER_CACHE_SUBDIR


# -- paths that come from the Hub -------------------------------------------------------
#
# Every name from Hub metadata is checked by comfy_llm_core.hub_path_problem when it
# enters (profiles' model-info parser). Staging re-proves it here, at the one place a
# name becomes a local path: :func:`file_in` is the only way staging turns a
# repository path into a file it stats, hashes, writes or deletes.


def is_hidden(relative: str) -> bool:
    """Return whether a repository path has a component starting with ``.`` (never staged)."""
    return any(part.startswith(".") for part in relative.split("/"))


def file_in(directory: Path, relative: str, *, repository: str, revision: str) -> Path:
    """Return ``directory / relative``, proven to lie inside ``directory``.

    The name must pass ``hub_path_problem`` and no existing component below
    ``directory`` may be a symbolic link (a snapshot never holds one), so
    neither ``..`` nor a planted link can lead outside.

    Raises:
        UnsafeSnapshotPathError: The name, or a link on its way, escapes.
    """
    problem = hub_path_problem(relative)
    if problem is not None:
        raise UnsafeSnapshotPathError(repository, revision, relative, problem)
    current = directory
    for part in PurePosixPath(relative).parts:
        current = current / part
        if current.is_symlink():
            raise UnsafeSnapshotPathError(
                repository, revision, relative, "passes through a symbolic link in the snapshot"
            )
    return current


def prune(directory: Path, keep: Collection[str], *, keep_dirs: Collection[str] = ()) -> list[str]:
    """Delete everything under ``directory`` but the regular files ``keep`` names.

    Symbolic links are removed as links (never followed), folders not on the
    way to a kept file are removed whole, and the top-level folders in
    ``keep_dirs`` are left alone. Only entries found by listing ``directory``
    itself are touched, so nothing outside it can be reached.

    Args:
        directory: The in-progress snapshot folder (a real folder, not a link).
        keep: Repository paths of the files to keep.
        keep_dirs: Top-level folder names to leave untouched (``.cache``).

    Returns:
        The removed entries, relative to ``directory`` (folders end in ``/``).
    """
    if directory.is_symlink() or not directory.is_dir():
        return []
    wanted = set(keep)
    on_the_way = {str(parent) for name in wanted for parent in PurePosixPath(name).parents}
    removed: list[str] = []

    def walk(folder: Path, prefix: str) -> None:
        with os.scandir(folder) as entries:
            listing = list(entries)
        for entry in listing:
            name = prefix + entry.name
            if entry.is_dir(follow_symlinks=False):
                if not prefix and entry.name in keep_dirs:
                    continue
                if name in on_the_way:
                    walk(Path(entry.path), name + "/")
                    continue
                shutil.rmtree(entry.path)
                removed.append(name + "/")
            elif not (name in wanted and entry.is_file(follow_symlinks=False)):
                os.unlink(entry.path)
                removed.append(name)

    walk(directory, "")
    return removed
