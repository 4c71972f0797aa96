r"""Parsing model references typed into a node or the CLI.

A reference ends up in Hub URLs and on-disk paths, so it is checked strictly
here, once, before anything touches the network or the disk. Four forms pass:

* ``owner/model`` and ``owner/model@revision``: the Hub's own repository-name
  rules (letters, digits, ``-``, ``_``, ``.``; no ``--`` or ``..``; at most 96
  characters per part), which also rule out URLs and whitespace; either may
  end in ``:<quantization>`` (``owner/model-GGUF:Q8_0``, the form llama.cpp's
  ``-hf`` and Ollama use) to pick one file of a GGUF repository, or in
  ``:nf4`` / ``:int8`` to quantize a safetensors checkpoint as it loads
  (``_load_quantization``; a curated id takes those two as well); a model
  page's address pasted from the browser (``https://huggingface.co/owner/model``,
  ``…/tree/<revision>``, with or without the scheme and trailing slashes) is
  read as that reference, every other URL is refused;
* a curated id (lowercase, no ``/``), checked against the ids the caller
  passes (``_curated.parse_reference`` passes the shipped list);
* an absolute folder path (``/…``, ``~/…``, ``C:\…``): a local checkpoint;
* ``models/<folder>/<name>``: a checkpoint folder under a registered model
  folder (``models/LLM``, ``models/VLM``, ``models/modal_llm`` and what
  ``extra_model_paths.yaml`` maps to them). It has two ``/`` at least, so it is
  never a Hub id.

Local forms are only parsed here (no ``..``, no control characters, bounded
length); finding and checking the folder is ``_local``'s job.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote

from comfy_llm_profiles._load_quantization import load_quantization_for_tag
from comfy_llm_profiles.errors import InvalidModelReferenceError

__all__ = [
    "ACCEPTED_REFERENCE_FORMS",
    "LOCAL_NAME_PREFIX",
    "MAX_NAME_PART",
    "MAX_PATH_CHARACTERS",
    "MAX_REVISION",
    "ModelReference",
    "is_commit",
    "is_content_pin",
    "parse_model_reference",
]

MAX_NAME_PART = 96
"""The Hub's limit on the owner and on the model name, each."""
MAX_REVISION = 255
"""Longest accepted branch or tag name (git's usual ref-name limit)."""

_NAME_PART = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?")
_REVISION = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9._/-]*[A-Za-z0-9_])?")
_CURATED = re.compile(r"[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_CONTENT_PIN = re.compile(r"[0-9a-f]{64}")
_QUANTIZATION_TAG = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_-]{0,30}[A-Za-z0-9])?")
_WINDOWS_ABSOLUTE = re.compile(r"(?:[A-Za-z]:[\\/]|\\\\)")
_FOLDER_KIND = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")

_HUB_URL = re.compile(
    r"(?:https?://)?(?:www\.)?(?:huggingface\.co|hf\.co)/"
    r"(?P<owner>[^/?#\s]+)/(?P<model>[^/?#\s]+)"
    r"(?:/tree/(?P<revision>[^?#\s]+?))?/*(?:[?#][^\s]*)?"
)
_HUB_PAGES = frozenset({"datasets", "spaces", "docs", "blog", "collections", "papers", "api"})
"""First path parts of Hub pages that are not a model (``_HUB_URL`` leaves them alone)."""

LOCAL_NAME_PREFIX = "models/"
"""``models/<folder>/<name>`` names a checkpoint under a registered model folder."""
MAX_PATH_CHARACTERS = 1024
"""Longest accepted local path or folder name."""


def is_commit(revision: str | None) -> bool:
    """True when ``revision`` is a full 40-character lowercase hex commit id."""
    return bool(revision) and _COMMIT.fullmatch(revision or "") is not None


def is_content_pin(revision: str | None) -> bool:
    """True when ``revision`` is a local folder's content pin (64 lowercase hex)."""
    return bool(revision) and _CONTENT_PIN.fullmatch(revision or "") is not None


@dataclass(frozen=True, slots=True)
class ModelReference:
    """A parsed model reference: a Hub repository, a curated id or a local folder.

    Attributes:
        repository: ``owner/model`` for Hub references, None otherwise.
        revision: The branch, tag or commit after ``@``; None for the default branch.
        curated_id: The curated id, None otherwise.
        local_path: An absolute folder path as typed (``~`` not yet expanded).
        model_folder: The registered folder of ``models/<folder>/<name>``.
        local_name: ``<name>`` of ``models/<folder>/<name>`` (may hold ``/``).
        quantization: The ``:<quantization>`` of a Hub reference or curated id
            (a GGUF repository's file, e.g. ``Q8_0``; or ``nf4``/``int8``, quantized
            at load), None when not given.
    """

    repository: str | None
    revision: str | None = None
    curated_id: str | None = None
    local_path: str | None = None
    model_folder: str | None = None
    local_name: str | None = None
    quantization: str | None = None

    @property
    def is_local(self) -> bool:
        """True for a folder on this machine (a path or a registered-folder name)."""
        return self.local_path is not None or self.model_folder is not None

    @property
    def is_curated(self) -> bool:
        """True when this refers to an entry of the curated registry."""
        return self.curated_id is not None

    @property
    def is_pinned(self) -> bool:
        """True when the revision is already a 40-hex commit."""
        return is_commit(self.revision)

    def __str__(self) -> str:
        if self.local_path is not None:
            return self.local_path
        if self.model_folder is not None:
            return f"{LOCAL_NAME_PREFIX}{self.model_folder}/{self.local_name}"
        if self.curated_id is not None:
            return (
                f"{self.curated_id}:{self.quantization}" if self.quantization else self.curated_id
            )
        name = f"{self.repository}@{self.revision}" if self.revision else str(self.repository)
        return f"{name}:{self.quantization}" if self.quantization else name


ACCEPTED_REFERENCE_FORMS = (
    "owner/model (e.g. HuggingFaceTB/SmolVLM-256M-Instruct), "
    "owner/model@revision (a branch, tag or 40-character commit, e.g. owner/model@main), "
    "either with :<quantization> for a GGUF repository (e.g. owner/model-GGUF:Q8_0) or "
    ":nf4 / :int8 to quantize a safetensors model as it loads (bitsandbytes), "
    "a curated id (e.g. smolvlm-256m-instruct, or smolvlm-256m-instruct:nf4), "
    "an absolute path to a checkpoint folder, "
    "or models/<folder>/<name> for one under ComfyUI's models (e.g. models/LLM/Qwen3-VL-2B)"
)
"""The reference forms every parsing error shows."""


def _refuse(value: str, reason: str) -> InvalidModelReferenceError:
    return InvalidModelReferenceError(
        f"Model reference {value!r} is not accepted: {reason}. Use {ACCEPTED_REFERENCE_FORMS}.",
        value=value,
        reason=reason,
    )


def _check_name_part(value: str, part: str, label: str) -> None:
    if not part:
        raise _refuse(value, f"the {label} is empty")
    if len(part) > MAX_NAME_PART:
        raise _refuse(
            value,
            f"the {label} has {len(part)} characters, over the Hub's limit of {MAX_NAME_PART}",
        )
    if "--" in part:
        raise _refuse(value, f"the {label} {part!r} contains '--', which the Hub does not allow")
    if _NAME_PART.fullmatch(part) is None:
        raise _refuse(
            value,
            f"the {label} {part!r} may hold only letters, digits, '-', '_' and '.', and must "
            "start and end with a letter or digit",
        )


def _check_revision(value: str, revision: str) -> None:
    if not revision:
        raise _refuse(value, "the revision after '@' is empty")
    if len(revision) > MAX_REVISION:
        raise _refuse(
            value, f"the revision has {len(revision)} characters, over the limit of {MAX_REVISION}"
        )
    if "//" in revision or revision.endswith(".lock") or _REVISION.fullmatch(revision) is None:
        raise _refuse(
            value,
            f"the revision {revision!r} may hold only letters, digits, '-', '_', '.' and '/' "
            "(a branch, tag or 40-character commit)",
        )


def _check_shape(value: str) -> None:
    """Refuse URLs, paths, traversal and whitespace with a reason naming the problem."""
    if not value:
        raise _refuse(value, "it is empty")
    if any(ch.isspace() for ch in value):
        raise _refuse(value, "it contains whitespace")
    if "://" in value or value.lower().startswith(("http:", "https:", "hf:", "www.")):
        raise _refuse(
            value,
            "this URL is not a model page; give owner/model, or paste the model page's "
            "address (https://huggingface.co/owner/model or …/tree/<revision>)",
        )
    if ".." in value:
        raise _refuse(value, "it contains '..'")
    if value.startswith(("/", "~", ".", "\\")) or "\\" in value or ":" in value:
        raise _refuse(
            value,
            "a relative path is not accepted; give an absolute folder path or "
            f"{LOCAL_NAME_PREFIX}<folder>/<name>",
        )
    if value.count("@") > 1:
        raise _refuse(value, "it contains more than one '@'")


def _check_local_text(value: str) -> None:
    if len(value) > MAX_PATH_CHARACTERS:
        raise _refuse(
            value[:80] + "…",
            f"it has {len(value)} characters, over the limit of {MAX_PATH_CHARACTERS}",
        )
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise _refuse(value, "it contains a control character (a line break, a tab, NUL)")
    parts = re.split(r"[\\/]", value)
    if ".." in parts:
        raise _refuse(value, "it contains a '..' folder; give the folder's own path")


def _parse_local(text: str) -> ModelReference | None:
    """The local forms, or None when ``text`` is not one of them."""
    if text.startswith(("/", "~")) or _WINDOWS_ABSOLUTE.match(text):
        _check_local_text(text)
        if text.startswith("~") and not text.startswith(("~/", "~\\")) and text != "~":
            raise _refuse(text, "only '~/' (your home folder) may start a path, not '~user'")
        return ModelReference(repository=None, local_path=text)
    if text.startswith(LOCAL_NAME_PREFIX) and text.count("/") >= 2:
        _check_local_text(text)
        kind, _, name = text.removeprefix(LOCAL_NAME_PREFIX).partition("/")
        if _FOLDER_KIND.fullmatch(kind) is None:
            raise _refuse(text, f"model folder {kind!r} is not a folder name such as LLM or VLM")
        parts = name.split("/")
        if "\\" in name or any(not p or p == "." or p != p.strip() for p in parts):
            raise _refuse(
                text, "the folder name after models/<folder>/ has an empty, '.' or padded part"
            )
        return ModelReference(repository=None, model_folder=kind, local_name=name)
    return None


def parse_model_reference(text: str, *, curated_ids: Iterable[str]) -> ModelReference:
    """Parse a Hub reference, a curated id (one of ``curated_ids``) or a local folder.

    Args:
        text: What the user typed.
        curated_ids: The ids that count as curated.

    Returns:
        The parsed reference.

    Raises:
        InvalidModelReferenceError: ``text`` is not one of the accepted forms
            (URL, relative path, ``..``, whitespace in a Hub id, empty part,
            over-long part, bad character, unknown curated id, revision on a
            curated id, a control character in a path).
    """
    if not isinstance(text, str):
        raise _refuse(repr(text), f"it is a {type(text).__name__}, not text")
    trimmed = _from_hub_url(text)
    if trimmed != text:
        try:
            return parse_model_reference(trimmed, curated_ids=curated_ids)
        except InvalidModelReferenceError as error:
            raise _refuse(text, f"it reads as {trimmed!r}, and {error.reason}") from None
    local = _parse_local(text)
    if local is not None:
        return local
    try:
        return _parse(text, curated_ids)
    except InvalidModelReferenceError as error:
        if "/" in text.partition("@")[0]:
            raise
        closest = closest_curated_ids(text, curated_ids)
        if not closest:
            raise
        raise _refuse(text, f"{error.reason}; closest curated ids: {', '.join(closest)}") from None


def _from_hub_url(text: str) -> str:
    """``owner/model[@revision]`` for a pasted model page address, else ``text`` unchanged."""
    found = _HUB_URL.fullmatch(text)
    if found is None or found["owner"] in _HUB_PAGES:
        return text
    reference = f"{found['owner']}/{found['model']}"
    revision = found["revision"]
    return f"{reference}@{unquote(revision)}" if revision else reference


def closest_curated_ids(text: str, known: Iterable[str], *, limit: int = 3) -> list[str]:
    """The curated ids a mistyped reference most likely meant ("qwen 3.5" → qwen3.5-*)."""
    ids = sorted(known)
    typed = re.sub(r"[\s_]+", "", text.strip().lower())
    if not typed:
        return []
    starts = [known_id for known_id in ids if known_id.startswith(typed)]
    close = difflib.get_close_matches(typed, ids, n=limit, cutoff=0.6)
    return list(dict.fromkeys([*starts, *close]))[:limit]


def _split_quantization(text: str) -> tuple[str, str | None]:
    """``owner/model[@revision]`` and the quantization after its last ``:``, if any."""
    if "://" in text or text.lower().startswith(("http:", "https:", "hf:", "www.")):
        return text, None  # refused as a URL by _check_shape
    name, colon, tag = text.rpartition(":")
    curated = load_quantization_for_tag(tag) is not None and "@" not in name
    if not colon or ("/" not in name.partition("@")[0] and not curated) or ":" in name:
        return text, None  # not owner/model...:tag or id:nf4: _check_shape names the problem
    if _QUANTIZATION_TAG.fullmatch(tag) is None:
        raise _refuse(
            text,
            f"the quantization {tag!r} after ':' may hold only letters, digits, '_' and '-' "
            "(at most 32, e.g. Q4_K_M or Q8_0)",
        )
    return name, tag


def _parse(text: str, curated_ids: Iterable[str]) -> ModelReference:
    name, quantization = _split_quantization(text)
    if quantization is not None:
        found = _parse(name, curated_ids)
        return ModelReference(
            repository=found.repository,
            revision=found.revision,
            curated_id=found.curated_id,
            quantization=quantization,
        )
    _check_shape(text)
    name, _, revision = text.partition("@")
    if "@" in text:
        _check_revision(text, revision)
    if "/" not in name:
        return _parse_curated(text, name, revision if "@" in text else None, curated_ids)
    owner, _, model = name.partition("/")
    if "/" in model:
        raise _refuse(
            text,
            "it has more than one '/' before the revision (use owner/model, or "
            f"{LOCAL_NAME_PREFIX}<folder>/<name> for a folder under ComfyUI's models)",
        )
    _check_name_part(text, owner, "owner")
    _check_name_part(text, model, "model name")
    return ModelReference(repository=name, revision=revision if "@" in text else None)


def _parse_curated(
    text: str, name: str, revision: str | None, curated_ids: Iterable[str]
) -> ModelReference:
    known = sorted(curated_ids)
    listing = ", ".join(known) if known else "none are installed"
    if _CURATED.fullmatch(name) is None or name not in known:
        raise _refuse(
            text,
            f"{name!r} is neither owner/model nor a known curated id (curated ids: {listing})",
        )
    if revision is not None:
        raise _refuse(text, f"curated id {name!r} is already pinned; drop '@{revision}'")
    return ModelReference(repository=None, revision=None, curated_id=name)
