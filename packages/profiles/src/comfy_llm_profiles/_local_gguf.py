"""GGUF files already on disk: a model file and its ``mmproj-*.gguf``, used in place.

llama.cpp users keep ``<name>-<quant>.gguf`` beside ``mmproj-<name>-<type>.gguf``
(llama.cpp ``docs/multimodal.md``), often several quantizations of one model
in one folder (LM Studio's ``<publisher>/<repository>/``). A reference names
either the model file (``models/LLM/<folder>/<file>.gguf``, an absolute path)
or a folder holding exactly one model GGUF and no ``config.json``.

This is where a local GGUF enters, so both files are checked here
(``_gguf_rules``: the bounded reader, then what the engine loads) before a
profile names them; a refused file fails the resolution with its name and
reason, and llama.cpp never sees it. The profile pins the two files' content
(the same content pin as a checkpoint folder, over these two files only) and
names them in its options (``gguf_file``, ``mmproj_file``).

A local reference is resolved again on every request (the files may have
changed), and reading a header in Python costs about half a second of CPU for
a 150k-token vocabulary (measured: the tokenizer arrays). So a pair's check is
kept for this process, keyed by each file's identity: path, device, inode,
size, modification and status-change times (``st_ctime`` moves with any write
and cannot be set back without root). An unchanged pair is not read again; a
changed one is checked again in full. A file changed less than two seconds
before its check is not kept (git's "racily clean" rule: file times are
coarse, so a second write in the same tick could leave the same identity).
The kept result drops the header's long
arrays (the tokenizer): resolution and the picker decide from the header's
facts, and the engine checks the file again itself before loading it.
"""

from __future__ import annotations

import dataclasses
import os
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path

from comfy_llm_profiles._gguf_rules import (
    GgufModel,
    GgufProjector,
    check_model_file,
    check_projector_file,
)
from comfy_llm_profiles._local import FolderScan, LocalFile, _folders_named
from comfy_llm_profiles._reference import ModelReference
from comfy_llm_profiles.errors import DownloadTooLargeError, LocalFolderError

__all__ = [
    "GGUF_SUFFIX",
    "CheckedGguf",
    "check_gguf_pair",
    "find_local_gguf",
    "gguf_file_names",
    "is_projector_name",
    "list_gguf_files",
    "scan_gguf_files",
    "split_gguf_names",
]

GGUF_SUFFIX = ".gguf"
_FIX = "Name the model file (models/LLM/<folder>/<file>.gguf) or pick one from the list."


def is_projector_name(name: str) -> bool:
    """Whether a file name is a vision projector's (``mmproj*.gguf``, llama.cpp's convention)."""
    return name.lower().startswith("mmproj") and name.lower().endswith(GGUF_SUFFIX)


def _is_model_name(name: str) -> bool:
    return name.lower().endswith(GGUF_SUFFIX) and not is_projector_name(name)


def split_gguf_names(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(models, projectors)`` among file names (``*.gguf`` only, sorted)."""
    ggufs = sorted(n for n in names if n.lower().endswith(GGUF_SUFFIX))
    return [n for n in ggufs if not is_projector_name(n)], [
        n for n in ggufs if is_projector_name(n)
    ]


def _path_of(reference: ModelReference, model_folders: Mapping[str, Sequence[Path]]) -> Path | None:
    if reference.local_path is not None:
        path = Path(reference.local_path).expanduser()
        return path if path.exists() else None
    for base in _folders_named(str(reference.model_folder), model_folders):
        candidate = Path(base) / str(reference.local_name)
        if candidate.exists():
            return candidate
    return None


def _files_in(folder: Path) -> list[str]:
    try:
        return [p.name for p in folder.iterdir() if p.is_file()]
    except OSError:
        return []


_LIST_DEPTH = 3  # models/LLM/<file>, <folder>/<file>, LM Studio's <publisher>/<repository>/<file>
_LIST_MAX = 2000


def list_gguf_files(model_folders: Mapping[str, Sequence[Path]]) -> list[tuple[str, Path]]:
    """``(models/<folder>/<path>.gguf, path)`` for every model GGUF (not a projector) found.

    Up to three levels below each registered folder (LM Studio keeps
    ``<publisher>/<repository>/<file>.gguf``), hidden entries skipped, at most
    2000 files. Names only: nothing is read until one is resolved.
    """
    found: dict[str, Path] = {}
    for kind, bases in sorted(model_folders.items()):
        for base in bases:
            pending = [(Path(base), 1)]
            while pending and len(found) < _LIST_MAX:
                folder, depth = pending.pop()
                try:
                    entries = sorted(folder.iterdir())
                except OSError:
                    continue
                for entry in entries:
                    if entry.name.startswith("."):
                        continue
                    if entry.is_dir() and depth < _LIST_DEPTH:
                        pending.append((entry, depth + 1))
                    elif entry.is_file() and _is_model_name(entry.name):
                        relative = entry.relative_to(base).as_posix()
                        found.setdefault(f"models/{kind}/{relative}", entry)
    return sorted(found.items())


def find_local_gguf(
    reference: ModelReference, model_folders: Mapping[str, Sequence[Path]]
) -> tuple[Path, str | None] | None:
    """``(folder, model file name or None)`` when a local reference names GGUF, else None.

    A ``.gguf`` file names itself; a folder counts when it has ``*.gguf``
    files and no ``config.json`` (a Transformers checkpoint may carry a GGUF
    export beside its safetensors: it stays a checkpoint folder).
    """
    path = _path_of(reference, model_folders)
    if path is None:
        return None
    if path.is_file() and path.name.lower().endswith(GGUF_SUFFIX):
        return path.parent.resolve(), path.name
    if path.is_dir():
        names = _files_in(path)
        if "config.json" not in names and any(n.lower().endswith(GGUF_SUFFIX) for n in names):
            return path.resolve(), None
    return None


def _pick(folder: Path, model_name: str | None) -> tuple[str, str | None]:
    models, projectors = split_gguf_names(_files_in(folder))
    if model_name is None:
        if len(models) != 1:
            found = ", ".join(models) or "none"
            raise LocalFolderError(str(folder), f"expected one model .gguf, found {found}", _FIX)
        model_name = models[0]
    elif is_projector_name(model_name):
        raise LocalFolderError(
            str(folder / model_name),
            "it is a vision projector (mmproj), not a model",
            "Name the model .gguf beside it; its projector is found by itself.",
        )
    if len(projectors) > 1:
        raise LocalFolderError(
            str(folder),
            f"it holds more than one projector ({', '.join(projectors)})",
            "Keep one mmproj-*.gguf beside the model (the one made for it).",
        )
    return model_name, projectors[0] if projectors else None


def gguf_file_names(backend_options: Mapping[str, object]) -> tuple[str, ...]:
    """The files a GGUF profile names (model, then projector); empty for other profiles."""
    return tuple(
        value
        for key in ("gguf_file", "mmproj_file")
        if isinstance(value := backend_options.get(key), str)
    )


def scan_gguf_files(folder: Path, names: Sequence[str], *, max_weight_bytes: int) -> FolderScan:
    """The named files of ``folder`` as a scan (regular files only, within the size limit).

    Raises:
        LocalFolderError: A file is missing or not a regular file.
        DownloadTooLargeError: Together they exceed ``max_weight_bytes``.
    """
    folder = Path(folder).resolve()
    files = []
    for name in sorted(names):
        path = (folder / name).resolve()
        try:
            info = path.stat()
        except OSError:
            raise LocalFolderError(str(folder / name), "it cannot be read (gone?)", _FIX) from None
        if not stat.S_ISREG(info.st_mode):
            raise LocalFolderError(str(folder / name), "it is not a regular file", _FIX)
        files.append(LocalFile(name, info.st_size, info.st_mtime_ns, path))
    total = sum(f.size for f in files)
    if total > max_weight_bytes:
        raise DownloadTooLargeError(str(folder), None, "", total, max_weight_bytes)
    return FolderScan(folder, tuple(files), {}, total)


class CheckedGguf:
    """A local model GGUF and its projector, both past the checks, with their scan.

    Attributes:
        scan: The two files (for hashing and the content pin).
        model: The checked model, less its header's long arrays (``tokens``,
            ``token_types`` and the tokenizer's metadata arrays are empty).
        projector: The checked projector, None without one.
    """

    __slots__ = ("model", "projector", "scan")

    def __init__(self, scan: FolderScan, model: GgufModel, projector: GgufProjector | None):
        self.scan = scan
        self.model = model
        self.projector = projector


def check_gguf_pair(folder: Path, model_name: str | None, *, max_weight_bytes: int) -> CheckedGguf:
    """Pick, bound and check a folder's model GGUF (and its projector) where they enter.

    Raises:
        LocalFolderError: No single model, several projectors, a file unreadable.
        DownloadTooLargeError: The two files exceed the size limit.
        UnsafeGgufError: A file failed the GGUF checks (named, with the rule).
    """
    model_name, projector_name = _pick(folder, model_name)
    names = [model_name] + ([projector_name] if projector_name else [])
    scan = scan_gguf_files(folder, names, max_weight_bytes=max_weight_bytes)
    paths = [scan.path / name for name in names]
    started = _clock()
    key = tuple(_identity(path) for path in paths)
    with _CHECKED_LOCK:
        kept = _CHECKED.get(key)
        if kept is not None:
            _CHECKED.move_to_end(key)
    if kept is None:
        model = check_model_file(paths[0])
        projector = check_projector_file(paths[1], model) if projector_name else None
        kept = (_without_long_arrays(model), projector)
        changed = max(max(i[4], i[5]) for i in key)  # st_mtime_ns, st_ctime_ns
        if started - changed > _RACY_NS:
            with _CHECKED_LOCK:
                _CHECKED[key] = kept
                while len(_CHECKED) > _CHECKED_MAX:
                    _CHECKED.popitem(last=False)
    return CheckedGguf(scan, *kept)


_CHECKED_MAX = 64
_RACY_NS = 2_000_000_000
_clock = time.time_ns  # the wall clock file times are read against (a seam for tests)
_CHECKED_LOCK = threading.Lock()
_Identity = tuple[str, int, int, int, int, int]
_CHECKED: OrderedDict[tuple[_Identity, ...], tuple[GgufModel, GgufProjector | None]] = OrderedDict()
_LONG_ARRAY = 64


def _identity(path: Path) -> _Identity:
    """What changes when a file's content may have: see the module docstring."""
    try:
        info = os.stat(path)
    except OSError:
        raise LocalFolderError(str(path), "it cannot be read (gone?)", _FIX) from None
    return (
        str(path),
        info.st_dev,
        info.st_ino,
        info.st_size,
        info.st_mtime_ns,
        info.st_ctime_ns,
    )


def _without_long_arrays(model: GgufModel) -> GgufModel:
    """The checked model less its tokenizer arrays (tens of MB of Python objects)."""
    metadata = {
        key: value
        for key, value in model.file.metadata.items()
        if not (isinstance(value, tuple) and len(value) > _LONG_ARRAY)
    }
    file = dataclasses.replace(model.file, metadata=metadata)
    return dataclasses.replace(model, file=file, tokens=(), token_types=())
