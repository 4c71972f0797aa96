"""Parsing model references typed into a node or the CLI.

A reference ends up in Hub URLs and on-disk paths, so it is checked strictly
here, once, before anything touches the network: only ``owner/model``,
``owner/model@revision`` and curated ids pass. The rules follow the Hub's own
repository-name rules (letters, digits, ``-``, ``_``, ``.``; no ``--`` or
``..``; at most 96 characters per part), which also rules out URLs, paths
and whitespace.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from comfy_llm_profiles.errors import InvalidModelReferenceError

__all__ = ["MAX_NAME_PART", "MAX_REVISION", "ModelReference", "is_commit", "parse_reference"]

MAX_NAME_PART = 96
"""The Hub's limit on the owner and on the model name, each."""
MAX_REVISION = 255
"""Longest accepted branch or tag name (git's usual ref-name limit)."""

_NAME_PART = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?")
_REVISION = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9._/-]*[A-Za-z0-9_])?")
_CURATED = re.compile(r"[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?")
_COMMIT = re.compile(r"[0-9a-f]{40}")


def is_commit(revision: str | None) -> bool:
    """True when ``revision`` is a full 40-character lowercase hex commit id."""
    return bool(revision) and _COMMIT.fullmatch(revision or "") is not None


@dataclass(frozen=True, slots=True)
class ModelReference:
    """A parsed model reference: either a Hub repository or a curated id.

    Attributes:
        repository: ``owner/model`` for Hub references, None for curated ids.
        revision: The branch, tag or commit after ``@``; None for the default branch.
        curated_id: The curated id, None for Hub references.
    """

    repository: str | None
    revision: str | None = None
    curated_id: str | None = None

    @property
    def is_curated(self) -> bool:
        """True when this refers to an entry of the curated registry."""
        return self.curated_id is not None

    @property
    def is_pinned(self) -> bool:
        """True when the revision is already a 40-hex commit."""
        return is_commit(self.revision)

    def __str__(self) -> str:
        if self.curated_id is not None:
            return self.curated_id
        return f"{self.repository}@{self.revision}" if self.revision else str(self.repository)


def _refuse(value: str, reason: str) -> InvalidModelReferenceError:
    return InvalidModelReferenceError(value, reason)


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
        raise _refuse(value, "URLs are not accepted; give only the owner/model part")
    if ".." in value:
        raise _refuse(value, "it contains '..'")
    if value.startswith(("/", "~", ".", "\\")) or "\\" in value or ":" in value:
        raise _refuse(value, "file paths are not accepted; give a Hub repository id")
    if value.count("@") > 1:
        raise _refuse(value, "it contains more than one '@'")


def parse_reference(text: str, *, curated_ids: Iterable[str] | None = None) -> ModelReference:
    """Parse ``owner/model``, ``owner/model@revision`` or a curated id.

    Args:
        text: What the user typed.
        curated_ids: The ids that count as curated; None reads the curated
            registry shipped with this package.

    Returns:
        The parsed reference.

    Raises:
        InvalidModelReferenceError: ``text`` is not one of the accepted forms
            (URL, path, ``..``, whitespace, empty part, over-long part, bad
            character, unknown curated id, revision on a curated id).
    """
    if not isinstance(text, str):
        raise _refuse(repr(text), f"it is a {type(text).__name__}, not text")
    _check_shape(text)
    name, _, revision = text.partition("@")
    if "@" in text:
        _check_revision(text, revision)
    if "/" not in name:
        return _parse_curated(text, name, revision if "@" in text else None, curated_ids)
    owner, _, model = name.partition("/")
    if "/" in model:
        raise _refuse(text, "it has more than one '/' before the revision (use owner/model)")
    _check_name_part(text, owner, "owner")
    _check_name_part(text, model, "model name")
    return ModelReference(repository=name, revision=revision if "@" in text else None)


def _parse_curated(
    text: str, name: str, revision: str | None, curated_ids: Iterable[str] | None
) -> ModelReference:
    if curated_ids is None:
        from comfy_llm_profiles._curated import load_curated_registry

        curated_ids = load_curated_registry().ids
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
