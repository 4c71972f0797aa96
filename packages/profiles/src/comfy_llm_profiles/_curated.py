"""The curated registry: reviewed, commit-pinned models known by a short id.

Curated entries resolve without a Hub request: each carries its pinned
commit, weight size and the config.json fields the compatibility decision
reads, so a curated profile is decided by exactly the same code as a
resolved one (and, when those fields match the pinned commit, gets the same
profile id as resolving ``owner/model@commit``). That keeps the defaults
usable offline and keeps a curated id from meaning something new when the
upstream repository changes. The file ships inside the package and is
validated on load: a bad entry fails loudly at import of the list, never at
some user's first request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from comfy_llm_profiles._decide import decide
from comfy_llm_profiles._profile import BACKENDS, ModelProfile
from comfy_llm_profiles._reference import is_commit, parse_reference
from comfy_llm_profiles._targets import ExecutionTarget
from comfy_llm_profiles.errors import CuratedRegistryError, ProfileError

__all__ = ["CuratedEntry", "CuratedRegistry", "load_curated_registry"]

_ID = re.compile(r"[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?")
_ENTRY_KEYS = frozenset(
    {
        "id",
        "display_name",
        "repository",
        "revision",
        "revision_verified",
        "targets",
        "weight_bytes",
        "config",
        "notes",
    }
)
_REQUIRED = _ENTRY_KEYS - {"notes", "revision_verified", "display_name"}


@dataclass(frozen=True, slots=True)
class CuratedEntry:
    """One reviewed model.

    Attributes:
        id: The curated id users type.
        display_name: Human label.
        repository: ``owner/model``.
        revision: The pinned 40-hex commit.
        targets: Targets the entry was reviewed for.
        weight_bytes: Total safetensors bytes at that commit.
        config: The config.json fields the decision reads.
        revision_verified: False for a placeholder pin (see the JSON's notes).
        notes: Free text.
    """

    id: str
    display_name: str
    repository: str
    revision: str
    targets: tuple[ExecutionTarget, ...]
    weight_bytes: int
    config: Mapping[str, Any] = field(compare=False, hash=False)
    revision_verified: bool = False
    notes: str = ""

    def profile(
        self, target: ExecutionTarget | str, backends: frozenset[str] | None = None
    ) -> ModelProfile:
        """Build this entry's profile for ``target`` without any network access.

        Args:
            target: The execution target; must be one of :attr:`targets`.
            backends: Backends usable here; None asks the installation.

        Raises:
            CuratedRegistryError: The entry was not reviewed for ``target``.
            ModelRejectedError: The registry no longer accepts the entry here.
        """
        target = ExecutionTarget(target)
        if target not in self.targets:
            reviewed = ", ".join(t.value for t in self.targets)
            raise CuratedRegistryError(
                f"Curated id {self.id!r} is not reviewed for target {target.value!r} (reviewed "
                f"for: {reviewed}). Resolve it as {self.repository}@{self.revision} instead, "
                "or pick a curated id made for this target.",
                entry=self.id,
            )
        decision = decide(
            target,
            self.config,
            weight_bytes=self.weight_bytes,
            repository=self.repository,
            revision=self.revision,
            backends=backends,
        )
        return decision.to_profile(self.repository, self.revision, display_name=self.display_name)


@dataclass(frozen=True, slots=True)
class CuratedRegistry:
    """The validated curated list.

    Attributes:
        version: The list's version string.
        entries: Entries by id.
    """

    version: str
    entries: Mapping[str, CuratedEntry] = field(compare=False, hash=False)

    @property
    def ids(self) -> tuple[str, ...]:
        """Every curated id, sorted."""
        return tuple(sorted(self.entries))

    def get(self, curated_id: str) -> CuratedEntry:
        """Return the entry for ``curated_id``.

        Raises:
            CuratedRegistryError: No such id.
        """
        try:
            return self.entries[curated_id]
        except KeyError:
            raise CuratedRegistryError(
                f"Curated id {curated_id!r} is unknown (known: {', '.join(self.ids)}); use one "
                "of those or an owner/model reference.",
                entry=curated_id,
            ) from None

    def for_target(self, target: ExecutionTarget | str) -> tuple[CuratedEntry, ...]:
        """Entries reviewed for ``target``, in file order."""
        target = ExecutionTarget(target)
        return tuple(e for e in self.entries.values() if target in e.targets)


def _bad(entry: str | None, problem: str) -> CuratedRegistryError:
    where = f"entry {entry!r}" if entry else "the file"
    return CuratedRegistryError(
        f"Curated profile list: {where} {problem}. Fix curated_profiles.json.", entry=entry
    )


def _entry(raw: object, index: int) -> CuratedEntry:
    if not isinstance(raw, Mapping):
        raise _bad(None, f"has entry #{index} that is not an object")
    name = raw.get("id")
    if not isinstance(name, str) or _ID.fullmatch(name) is None:
        raise _bad(None, f"has entry #{index} with id {name!r} (lowercase letters, digits, .-_)")
    missing = sorted(_REQUIRED - set(raw))
    unknown = sorted(set(raw) - _ENTRY_KEYS)
    if missing or unknown:
        raise _bad(name, f"has missing keys {missing} / unknown keys {unknown}")
    repository, revision = raw["repository"], raw["revision"]
    try:
        ref = parse_reference(str(repository), curated_ids=())
    except ProfileError as error:
        raise _bad(name, f"has an invalid repository: {error}") from None
    if ref.repository != repository or ref.revision is not None:
        raise _bad(name, f"has repository {repository!r}; expected plain owner/model")
    if not is_commit(revision):
        raise _bad(name, f"has revision {revision!r}; expected a 40-character hex commit")
    targets = raw["targets"]
    if not isinstance(targets, list) or not targets or len(set(targets)) != len(targets):
        raise _bad(name, f"has targets {targets!r}; expected a non-empty list without repeats")
    try:
        parsed_targets = tuple(ExecutionTarget(t) for t in targets)
    except ValueError:
        raise _bad(
            name, f"has targets {targets!r}; known: {', '.join(t.value for t in ExecutionTarget)}"
        ) from None
    weight = raw["weight_bytes"]
    if isinstance(weight, bool) or not isinstance(weight, int) or weight <= 0:
        raise _bad(name, f"has weight_bytes {weight!r}; expected a positive integer")
    if not isinstance(raw["config"], Mapping):
        raise _bad(name, "has a config that is not an object")
    return CuratedEntry(
        id=name,
        display_name=str(raw.get("display_name") or repository),
        repository=repository,
        revision=revision,
        targets=parsed_targets,
        weight_bytes=weight,
        config=dict(raw["config"]),
        revision_verified=bool(raw.get("revision_verified", False)),
        notes=str(raw.get("notes", "")),
    )


def parse_curated_registry(data: object) -> CuratedRegistry:
    """Validate parsed curated-list JSON, re-checking each entry against the registries.

    Raises:
        CuratedRegistryError: The structure is wrong, an id repeats, or a
            compatibility registry refuses an entry for one of its targets.
    """
    if not isinstance(data, Mapping) or not isinstance(data.get("entries"), list):
        raise _bad(None, "is not an object with an 'entries' list")
    version = data.get("registry_version")
    if not isinstance(version, str) or not version:
        raise _bad(None, "lacks a 'registry_version' string")
    entries: dict[str, CuratedEntry] = {}
    for index, raw in enumerate(data["entries"]):
        entry = _entry(raw, index)
        if entry.id in entries:
            raise _bad(entry.id, "appears twice")
        for target in entry.targets:
            try:
                entry.profile(target, backends=frozenset(BACKENDS))
            except ProfileError as error:
                raise _bad(entry.id, f"is refused for target {target.value!r}: {error}") from None
        entries[entry.id] = entry
    return CuratedRegistry(version=version, entries=entries)


@lru_cache(maxsize=1)
def _default_registry() -> CuratedRegistry:
    text = (
        resources.files("comfy_llm_profiles")
        .joinpath("curated_profiles.json")
        .read_text(encoding="utf-8")
    )
    return parse_curated_registry(json.loads(text))


def load_curated_registry(path: Path | None = None) -> CuratedRegistry:
    """Load and validate the curated list (the shipped one when ``path`` is None).

    Args:
        path: Another curated list file, e.g. in tests or a deployment.

    Returns:
        The validated registry (the shipped one is cached).

    Raises:
        CuratedRegistryError: The file is not valid JSON or fails validation.
    """
    if path is None:
        return _default_registry()
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise _bad(None, f"at {str(path)!r} cannot be read as JSON ({error})") from None
    return parse_curated_registry(data)
