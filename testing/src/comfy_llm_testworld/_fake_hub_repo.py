"""In-memory repositories of the fake Hub: blobs, commits, branches and tags.

Kept apart from the HTTP layer so the data model (what a repository *is*) can be
reasoned about without sockets, and so the route handlers stay small.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, Literal

__all__ = [
    "LFS_MIN_SIZE",
    "LFS_SUFFIXES",
    "Blob",
    "Commit",
    "Gated",
    "Repo",
    "Tamper",
    "validate_repo_id",
]

LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".pkl", ".ckpt", ".gguf", ".npz")
"""File endings the Hub stores through LFS (what real repos' .gitattributes say)."""

LFS_MIN_SIZE = 1024 * 1024
"""Any file larger than this is stored through LFS too, whatever its name."""

Gated = Literal[False, "auto", "manual"]

_REPO_ID = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9._-]{0,95}/)?[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def validate_repo_id(repo_id: str) -> str:
    """Refuse ids the real Hub would refuse, so tests cannot rely on impossible names."""
    if not _REPO_ID.match(repo_id) or ".." in repo_id:
        raise ValueError(f"invalid repo id {repo_id!r}: expected 'owner/name'")
    return repo_id


def _validate_path(path: str) -> str:
    parts = path.split("/")
    if not path or path.startswith("/") or "\\" in path or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"invalid file path {path!r}: expected a relative POSIX path")
    return path


def _git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


@dataclass(frozen=True)
class Blob:
    """One file's content plus the identifiers the Hub reports for it.

    For LFS files the git blob id is that of the pointer file, exactly as on the
    real Hub; the sha256 is what clients use as the ETag and to verify downloads.
    """

    data: bytes
    lfs: bool
    oid: str
    sha256: str
    pointer_size: int

    @classmethod
    def build(cls, path: str, data: bytes) -> Blob:
        """Classify ``data`` as LFS or plain git blob the way the Hub's defaults would."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"content of {path!r} must be bytes, not {type(data).__name__}")
        data = bytes(data)
        sha256 = hashlib.sha256(data).hexdigest()
        lfs = path.lower().endswith(LFS_SUFFIXES) or len(data) > LFS_MIN_SIZE
        if lfs:
            pointer = (
                "version https://git-lfs.github.com/spec/v1\n"
                f"oid sha256:{sha256}\nsize {len(data)}\n"
            ).encode()
            return cls(data, True, _git_blob_id(pointer), sha256, len(pointer))
        return cls(data, False, _git_blob_id(data), sha256, 0)

    @property
    def size(self) -> int:
        """Size of the real content (not of the LFS pointer)."""
        return len(self.data)

    @property
    def etag(self) -> str:
        """The value clients compare: sha256 for LFS files, git blob id otherwise."""
        return self.sha256 if self.lfs else self.oid

    def lfs_sibling(self) -> dict[str, Any] | None:
        """The ``lfs`` object of a model-info sibling."""
        if not self.lfs:
            return None
        return {"sha256": self.sha256, "size": self.size, "pointerSize": self.pointer_size}

    def lfs_tree(self) -> dict[str, Any] | None:
        """The ``lfs`` object of a tree entry (the Hub names the hash ``oid`` there)."""
        if not self.lfs:
            return None
        return {"oid": self.sha256, "size": self.size, "pointerSize": self.pointer_size}


@dataclass(frozen=True)
class Commit:
    """An immutable full tree; older commits stay reachable by sha like on the Hub."""

    sha: str
    files: Mapping[str, Blob]
    parent: str | None
    date: datetime

    @property
    def date_iso(self) -> str:
        """The timestamp in the one format huggingface_hub's parser accepts."""
        return self.date.strftime("%Y-%m-%dT%H:%M:%S.000Z")


@dataclass
class Tamper:
    """What a hostile or broken Hub serves for a repository instead of the truth.

    Lets tests play an attacker's repository without the fake Hub ever storing
    an invalid path: the lies exist only in the answers.

    Attributes:
        extra_siblings: Raw entries appended to the model info's ``siblings``.
        extra_tree: Raw entries appended to every tree listing.
        hidden_siblings: Real files left out of ``siblings`` (still in the tree).
        sibling_fields: Per real path, fields merged into its sibling entry.
        info_body: Raw bytes served as the whole model-info answer.
        file_bodies: Per real path, raw bytes served instead of its content on GET.
    """

    extra_siblings: list[Any] = field(default_factory=list)
    extra_tree: list[Any] = field(default_factory=list)
    hidden_siblings: set[str] = field(default_factory=set)
    sibling_fields: dict[str, dict[str, Any]] = field(default_factory=dict)
    info_body: bytes | None = None
    file_bodies: dict[str, bytes] = field(default_factory=dict)


@dataclass
class Repo:
    """One model repository: settings, all commits, branch heads and tags."""

    repo_id: str
    private: bool = False
    gated: Gated = False
    card_data: dict[str, Any] | None = None
    security_findings: list[str] = field(default_factory=list)
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    tamper: Tamper = field(default_factory=Tamper)

    def commit(
        self, files: Mapping[str, bytes], branch: str, seq: int, sha: str | None = None
    ) -> Commit:
        """Record a new full tree as the head of ``branch`` and return the commit.

        ``sha`` gives the commit a chosen id (a real repository's pinned commit,
        so a test can serve ``owner/model@<that commit>``); default: derived.
        """
        if not branch or branch.startswith("/") or ".." in branch:
            raise ValueError(f"invalid branch name {branch!r}")
        if sha is not None and (not _HEX40.match(sha) or sha in self.commits):
            raise ValueError(f"commit id {sha!r} is not 40 lowercase hex or already exists")
        blobs = {_validate_path(p): Blob.build(p, d) for p, d in sorted(files.items())}
        parent = self.branches.get(branch)
        digest = hashlib.sha1(usedforsecurity=False)
        digest.update(f"commit\n{self.repo_id}\n{branch}\n{parent}\n{seq}\n".encode())
        for path, blob in blobs.items():
            digest.update(f"{path}\0{blob.oid}\n".encode())
        commit = Commit(
            sha=sha or digest.hexdigest(),
            files=MappingProxyType(blobs),
            parent=parent,
            date=_EPOCH + timedelta(minutes=seq),
        )
        self.commits[commit.sha] = commit
        self.branches[branch] = commit.sha
        return commit

    def resolve(self, revision: str) -> Commit | None:
        """Map a branch, tag or full commit sha to a commit (None when unknown)."""
        for prefix, refs in (("refs/heads/", self.branches), ("refs/tags/", self.tags)):
            if revision.startswith(prefix) and revision[len(prefix) :] in refs:
                return self.commits[refs[revision[len(prefix) :]]]
        if revision in self.branches:
            return self.commits[self.branches[revision]]
        if revision in self.tags:
            return self.commits[self.tags[revision]]
        if _HEX40.match(revision):
            return self.commits.get(revision)
        return None

    def tree(self, commit: Commit, path: str, *, recursive: bool) -> list[dict[str, Any]] | None:
        """List ``path`` in ``commit`` as the tree API does (None when it is not a folder).

        Directories come first at each level, then files, both sorted, which is
        the stable order pagination relies on.
        """
        prefix = f"{path.strip('/')}/" if path.strip("/") else ""
        dirs: set[str] = set()
        files: list[str] = []
        for name in commit.files:
            if not name.startswith(prefix):
                continue
            rest = name[len(prefix) :].split("/")
            if not recursive:
                if len(rest) > 1:
                    dirs.add(prefix + rest[0])
                else:
                    files.append(name)
                continue
            files.append(name)
            for depth in range(1, len(rest)):
                dirs.add(prefix + "/".join(rest[:depth]))
        if prefix and not files and not dirs:
            return None
        entries: list[dict[str, Any]] = []
        for folder in sorted(dirs):
            tree_id = hashlib.sha1(
                f"tree\0{commit.sha}\0{folder}".encode(), usedforsecurity=False
            ).hexdigest()
            entries.append({"type": "directory", "oid": tree_id, "size": 0, "path": folder})
        for name in sorted(files):
            blob = commit.files[name]
            entry: dict[str, Any] = {
                "type": "file",
                "oid": blob.oid,
                "size": blob.size,
                "path": name,
            }
            if blob.lfs:
                entry["lfs"] = blob.lfs_tree()
            entries.append(entry)
        return entries
