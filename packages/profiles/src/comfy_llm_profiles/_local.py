"""Checkpoint folders already on this machine: found, checked once, hashed once, used in place.

A local folder goes through the gate a Hub repository goes through, read
from the disk instead of the Hub's metadata::

    find the folder (an absolute path, or models/<folder>/<name> under a
        registered model folder; the named folder itself may be a link)
    walk it without following links: every link must stay inside the folder,
        no *.py file, no pickle weight (.bin .pt .pth .pkl .pickle .ckpt),
        at most MAX_FILES files, config.json at the top (at most 4 MiB),
        *.safetensors present and within COMFY_MODAL_LLM_MAX_DOWNLOAD_GB
    hash every file (sha256 and git blob sha1, one pass), reusing a hash while
        the file keeps its size and mtime (<storage_root>/profiles/local/)
    content pin = sha256 of the canonical JSON of [[path, size, sha256], ...]
        sorted by path

The compatibility registry then judges config.json exactly as for a Hub
commit (``_decide``), so remote code and unreviewed architectures are refused
the same way. Hidden entries (``.git``, ``.cache``) are not part of a
checkpoint and are skipped. Nothing is copied or written into the folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from comfy_llm_core import write_atomically

from comfy_llm_profiles._hf_cache import (
    hf_cache_repository_dir,
    hf_cache_snapshot,
    snapshot_problem,
)
from comfy_llm_profiles._hub import CONFIG_MAX_BYTES
from comfy_llm_profiles._inspect import PICKLE_SUFFIXES
from comfy_llm_profiles._manifest import MANIFEST_DIR
from comfy_llm_profiles._reference import ModelReference
from comfy_llm_profiles.errors import DownloadTooLargeError, LocalFolderError

__all__ = [
    "MAX_FILES",
    "FolderScan",
    "LocalFile",
    "content_pin",
    "find_local_folder",
    "hash_file",
    "hash_files",
    "list_model_folders",
    "scan_folder",
    "scan_hf_cache_snapshot",
]

MAX_FILES = 10_000
"""Most files a checkpoint folder may hold (a Hub checkpoint has a few dozen)."""
_CHUNK_BYTES = 8 * 1024 * 1024
_HASH_CACHE_FORMAT = 1


@dataclass(frozen=True, slots=True)
class LocalFile:
    """One regular file of a scanned folder.

    Attributes:
        path: POSIX path relative to the folder.
        size: Bytes.
        mtime_ns: Modification time (the hash cache's key, with the size).
        target: The resolved file a link points at, else the file itself.
    """

    path: str
    size: int
    mtime_ns: int
    target: Path


@dataclass(frozen=True, slots=True)
class FolderScan:
    """A folder that passed the gate (before hashing).

    Attributes:
        path: The folder, resolved (absolute, links followed).
        files: Every non-hidden regular file, sorted by path.
        config: The parsed config.json.
        weight_bytes: Total bytes of the ``*.safetensors`` files.
    """

    path: Path
    files: tuple[LocalFile, ...]
    config: Mapping[str, Any]
    weight_bytes: int


def find_local_folder(
    reference: ModelReference, model_folders: Mapping[str, Sequence[Path]]
) -> Path:
    """The folder a local reference names (not yet checked).

    Args:
        reference: A local reference (``reference.is_local``).
        model_folders: Registered model folders by name (``LLM`` → its
            folders), as ComfyUI's ``folder_paths`` maps them.

    Raises:
        LocalFolderError: No such folder, or the registered folder is unknown.
    """
    if reference.local_path is not None:
        folder = Path(reference.local_path).expanduser()
        if not folder.is_dir():
            raise LocalFolderError(str(folder), "it is not a folder on this machine", _FIX_PATH)
        return folder.resolve()
    kind, name = str(reference.model_folder), str(reference.local_name)
    bases = _folders_named(kind, model_folders)
    if not bases:
        known = ", ".join(sorted(model_folders)) or "none (ComfyUI is not running)"
        raise LocalFolderError(
            str(reference),
            f"no model folder {kind!r} is registered (registered: {known})",
            "Use one of those, or give the absolute path of the checkpoint folder.",
        )
    for base in bases:
        candidate = Path(base) / name
        if candidate.is_dir():
            return candidate.resolve()
    searched = ", ".join(str(Path(base) / name) for base in bases)
    raise LocalFolderError(str(reference), f"no such folder (looked at {searched})", _FIX_PATH)


_FIX_PATH = "Check the path, or pick a model from the list."


def _folders_named(kind: str, model_folders: Mapping[str, Sequence[Path]]) -> Sequence[Path]:
    # Folder names are matched case-insensitively: models/llm and models/LLM are one folder
    # on macOS and Windows, and packs spell it both ways.
    for name, paths in model_folders.items():
        if name.lower() == kind.lower():
            return paths
    return ()


def list_model_folders(model_folders: Mapping[str, Sequence[Path]]) -> list[tuple[str, Path]]:
    """``(models/<folder>/<name>, path)`` for every folder holding a config.json.

    One level deep, plus one more for ``owner/model`` layouts (a folder
    without config.json whose subfolders have one). No file is read; the
    gate runs when one is resolved.
    """
    found: dict[str, Path] = {}
    for kind, bases in sorted(model_folders.items()):
        for base in bases:
            for child in _subfolders(Path(base)):
                if (child / "config.json").is_file():
                    found.setdefault(f"models/{kind}/{child.name}", child)
                    continue
                for grandchild in _subfolders(child):
                    if (grandchild / "config.json").is_file():
                        label = f"models/{kind}/{child.name}/{grandchild.name}"
                        found.setdefault(label, grandchild)
    return sorted(found.items())


def _subfolders(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if not p.name.startswith(".") and p.is_dir())
    except OSError:
        return []


def scan_folder(
    folder: Path,
    *,
    max_weight_bytes: int,
    target: str,
    link_root: Path | None = None,
) -> FolderScan:
    """Walk ``folder`` and apply the gate (module docstring).

    Args:
        folder: The checkpoint folder (absolute).
        max_weight_bytes: Largest accepted safetensors total.
        target: The execution target (for messages).
        link_root: Where links may point (default: inside ``folder``); the
            Hugging Face cache passes the repository's ``blobs`` folder.

    Raises:
        LocalFolderError: A link out of the folder, a ``.py`` file, a pickle
            weight, too many files, no or an oversized or unreadable config.json,
            or no safetensors.
        DownloadTooLargeError: The safetensors exceed ``max_weight_bytes``.
    """
    folder = Path(folder).resolve()
    allowed = (link_root or folder).resolve()
    files: list[LocalFile] = []
    for relative, entry in _walk(folder):
        suffix = Path(relative).suffix.lower()
        if suffix == ".py":
            raise LocalFolderError(
                str(folder),
                f"it holds Python code ({relative}), which trust_remote_code would run",
                "Use a folder without *.py files (remote code is never run).",
            )
        if suffix in PICKLE_SUFFIXES:
            raise LocalFolderError(
                str(folder),
                f"it holds a pickle-format weight ({relative}), which can run code when loaded",
                "Remove it or convert the weights to *.safetensors.",
            )
        target_path = _checked_target(folder, relative, entry, allowed)
        if target_path is None:
            continue
        info = target_path.stat()
        files.append(LocalFile(relative, info.st_size, info.st_mtime_ns, target_path))
        if len(files) > MAX_FILES:
            raise LocalFolderError(
                str(folder),
                f"it holds more than {MAX_FILES} files",
                "Point at the checkpoint folder itself, not a folder of many models.",
            )
    files.sort(key=lambda f: f.path)
    config = _read_config(folder, {f.path: f for f in files})
    weights = [f for f in files if f.path.endswith(".safetensors")]
    if not weights:
        raise LocalFolderError(
            str(folder),
            "it holds no *.safetensors weights",
            "Use a Hugging Face-format checkpoint (config.json + *.safetensors); GGUF and "
            "pickle folders are not loaded.",
        )
    weight_bytes = sum(f.size for f in weights)
    if weight_bytes > max_weight_bytes:
        raise DownloadTooLargeError(str(folder), None, target, weight_bytes, max_weight_bytes)
    return FolderScan(folder, tuple(files), config, weight_bytes)


def scan_hf_cache_snapshot(
    repository: str, revision: str, *, max_weight_bytes: int, target: str
) -> tuple[Path, FolderScan] | None:
    """A complete Hugging Face cache snapshot of a pinned commit, past the folder gate.

    Resolution reads its facts from it and staging uses it in place, so both
    accept exactly the same snapshots: the folder (as the cache names it) and
    its scan, or None when there is none, it fails the gate (links out of
    ``blobs/``, code, pickles) or a file is missing (:func:`snapshot_problem`).
    Whether each blob matches its name is staging's check.

    Raises:
        DownloadTooLargeError: Its safetensors exceed ``max_weight_bytes``.
    """
    folder = hf_cache_snapshot(repository, revision)
    if folder is None:
        return None
    try:
        scan = scan_folder(
            folder,
            max_weight_bytes=max_weight_bytes,
            target=target,
            link_root=hf_cache_repository_dir(repository) / "blobs",
        )
    except LocalFolderError:
        return None
    by_path = {f.path: f for f in scan.files}

    def read_index() -> object:
        try:
            return json.loads(by_path["model.safetensors.index.json"].target.read_text("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return None

    return None if snapshot_problem(by_path, read_index) is not None else (folder, scan)


def _walk(folder: Path) -> Iterable[tuple[str, os.DirEntry[str]]]:
    """Every non-hidden entry that is a file or a link to one, depth first, links not followed."""
    pending = [(folder, "")]
    while pending:
        directory, prefix = pending.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as error:
            raise LocalFolderError(
                str(folder), f"{directory} cannot be listed ({error.strerror})", _FIX_PATH
            ) from None
        for entry in entries:
            if entry.name.startswith("."):
                continue
            relative = f"{prefix}{entry.name}"
            if entry.is_dir(follow_symlinks=False):
                pending.append((Path(entry.path), f"{relative}/"))
            else:
                yield relative, entry


def _checked_target(
    folder: Path, relative: str, entry: os.DirEntry[str], allowed: Path
) -> Path | None:
    """The regular file an entry stands for, refusing links that leave ``allowed``."""
    path = Path(entry.path)
    if entry.is_symlink():
        resolved = path.resolve()
        if not resolved.is_relative_to(allowed):
            raise LocalFolderError(
                str(folder),
                f"{relative} is a link to {resolved}, outside the folder",
                "Copy that file into the folder, or remove the link.",
            )
        if resolved.is_dir():
            return None  # a linked folder inside the folder: its files are walked there
        path = resolved
    try:
        mode = path.stat().st_mode
    except OSError:
        raise LocalFolderError(
            str(folder), f"{relative} cannot be read (a broken link?)", _FIX_PATH
        ) from None
    return path if stat.S_ISREG(mode) else None


def _read_config(folder: Path, files: Mapping[str, LocalFile]) -> Mapping[str, Any]:
    config = files.get("config.json")
    fix = "Use a Hugging Face-format checkpoint folder (config.json + *.safetensors)."
    if config is None:
        raise LocalFolderError(str(folder), "it has no config.json at its top level", fix)
    if config.size > CONFIG_MAX_BYTES:
        raise LocalFolderError(
            str(folder), f"its config.json has {config.size} bytes, over {CONFIG_MAX_BYTES}", fix
        )
    try:
        data = json.loads(config.target.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise LocalFolderError(
            str(folder), f"its config.json is not readable JSON ({error})", fix
        ) from None
    if not isinstance(data, dict):
        raise LocalFolderError(str(folder), "its config.json is not a JSON object", fix)
    return data


def hash_file(path: Path, on_bytes: Callable[[int], None] | None = None) -> tuple[str, str]:
    """Return (sha256, git blob sha1) of a file, in one pass.

    Raises:
        OSError: The file cannot be read.
    """
    sha256 = hashlib.sha256()
    git_sha1 = hashlib.sha1(usedforsecurity=False)
    git_sha1.update(f"blob {path.stat().st_size}\0".encode())
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK_BYTES):
            sha256.update(chunk)
            git_sha1.update(chunk)
            if on_bytes is not None:
                on_bytes(len(chunk))
    return sha256.hexdigest(), git_sha1.hexdigest()


def _cache_path(storage_root: Path, folder: Path) -> Path:
    key = hashlib.sha256(str(folder).encode("utf-8")).hexdigest()[:32]
    return Path(storage_root) / MANIFEST_DIR / "local" / f"{key}.json"


def _load_cache(path: Path, folder: Path) -> dict[str, list[Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != _HASH_CACHE_FORMAT:
        return {}
    if data.get("folder") != str(folder) or not isinstance(data.get("files"), dict):
        return {}
    return data["files"]


def hash_files(
    scan: FolderScan,
    storage_root: Path,
    on_bytes: Callable[[int], None] | None = None,
) -> dict[str, tuple[str, str]]:
    """``{path: (sha256, git sha1)}`` for every file, reusing hashes of unchanged files.

    A file counts as unchanged while its size and mtime match the cached
    record (``<storage_root>/profiles/local/<key>.json``, written atomically).
    """
    cache_file = _cache_path(storage_root, scan.path)
    cached = _load_cache(cache_file, scan.path)
    digests: dict[str, tuple[str, str]] = {}
    changed = False
    for file in scan.files:
        record = cached.get(file.path)
        if (
            isinstance(record, list)
            and len(record) == 4
            and record[:2] == [file.size, file.mtime_ns]
            and all(isinstance(d, str) for d in record[2:])
        ):
            digests[file.path] = (record[2], record[3])
            continue
        try:
            digests[file.path] = hash_file(file.target, on_bytes)
        except OSError as error:
            raise LocalFolderError(
                str(scan.path), f"{file.path} cannot be read ({error.strerror})", _FIX_PATH
            ) from None
        changed = True
    if changed or len(cached) != len(digests):
        records = {f.path: [f.size, f.mtime_ns, *digests[f.path]] for f in scan.files}
        _write_atomically(
            cache_file,
            {"format": _HASH_CACHE_FORMAT, "folder": str(scan.path), "files": records},
        )
    return digests


def content_pin(scan: FolderScan, digests: Mapping[str, tuple[str, str]]) -> str:
    """sha256 of the canonical JSON of ``[[path, size, sha256], ...]`` sorted by path."""
    listing = [[f.path, f.size, digests[f.path][0]] for f in scan.files]
    text = json.dumps(listing, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _write_atomically(path: Path, data: Mapping[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, json.dumps(data, sort_keys=True))
    except OSError:
        pass  # only a cache: the next resolution hashes again
