"""The curated registry: reviewed short ids that are aliases of pinned references.

A curated entry names ``owner/model@<40-hex commit>`` and the reviewed
overrides (display name, input limits, notes), and says which family it was
reviewed as. Nothing about the model itself is copied here: the profile is
decided from the repository's own config.json and file sizes at the pinned
commit, inspected exactly like any other reference (the first resolution
costs one model-info and one config.json request; ``_pins`` keeps those
facts beside the manifests so every later run is offline). A curated id
therefore never means something new when upstream moves, and never says
anything the checkpoint does not. The file ships inside the package and is
validated on load: a bad entry fails loudly at import of the list, never at
some user's first request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from comfy_llm_core import ExecutionTarget

from comfy_llm_profiles._decide import decide
from comfy_llm_profiles._families import FAMILIES
from comfy_llm_profiles._profile import BOOLEAN_LIMITS, COUNT_BOUNDS, LIMIT_KEYS, ModelProfile
from comfy_llm_profiles._reference import ModelReference, is_commit, parse_model_reference
from comfy_llm_profiles._registry import registry_for
from comfy_llm_profiles.errors import CuratedRegistryError, ProfileError

__all__ = ["CuratedEntry", "CuratedRegistry", "load_curated_registry", "parse_reference"]

_ID = re.compile(r"[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?")
_ENTRY_KEYS = frozenset(
    {"id", "display_name", "repository", "revision", "family", "targets", "limits", "notes"}
)
_REQUIRED = _ENTRY_KEYS - {"notes", "display_name", "limits"}
_LIMIT_FIELDS = frozenset(LIMIT_KEYS)


@dataclass(frozen=True, slots=True)
class CuratedEntry:
    """One reviewed model: an alias of ``repository@revision`` plus reviewed overrides.

    Attributes:
        id: The curated id users type.
        display_name: Human label.
        repository: ``owner/model``.
        revision: The pinned 40-hex commit.
        family: The registry family it was reviewed as (``_families``).
        targets: Targets the entry was reviewed for.
        limits: Reviewed :class:`ProfileLimits` values replacing the target's.
        notes: Free text.
    """

    id: str
    display_name: str
    repository: str
    revision: str
    family: str
    targets: tuple[ExecutionTarget, ...]
    limits: Mapping[str, int | bool] = field(default_factory=dict, compare=False, hash=False)
    notes: str = ""

    @property
    def reference(self) -> str:
        """``owner/model@commit``: what this id is an alias of."""
        return f"{self.repository}@{self.revision}"

    def check_target(self, target: ExecutionTarget | str) -> ExecutionTarget:
        """Return ``target`` if the entry was reviewed for it.

        Raises:
            CuratedRegistryError: It was not.
        """
        target = ExecutionTarget(target)
        if target not in self.targets:
            reviewed = ", ".join(t.value for t in self.targets)
            raise CuratedRegistryError(
                f"Curated id {self.id!r} is not reviewed for target {target.value!r} (reviewed "
                f"for: {reviewed}). Resolve it as {self.reference} instead, "
                "or pick a curated id made for this target.",
                entry=self.id,
            )
        return target

    def profile(
        self,
        target: ExecutionTarget | str,
        config: Mapping[str, Any],
        *,
        weight_bytes: int,
        backends: frozenset[str] | None = None,
        load_quantization: str | None = None,
    ) -> ModelProfile:
        """Decide this entry's profile from the pinned commit's own metadata.

        Args:
            target: The execution target; must be one of :attr:`targets`.
            config: config.json at :attr:`revision`.
            weight_bytes: Total safetensors bytes at :attr:`revision`.
            backends: Backends usable here; None asks the installation.
            load_quantization: A quantization applied at load (``bnb_nf4``), or None.

        Raises:
            CuratedRegistryError: Not reviewed for ``target``, or the commit is
                not of the reviewed family.
            ModelRejectedError: The registry does not accept the checkpoint here.
        """
        target = self.check_target(target)
        decision = decide(
            target,
            config,
            weight_bytes=weight_bytes,
            repository=self.repository,
            revision=self.revision,
            backends=backends,
            limit_overrides=self.limits,
            load_quantization=load_quantization,
        )
        if decision.family != self.family:
            raise CuratedRegistryError(
                f"Curated id {self.id!r} was reviewed as family {self.family!r}, but "
                f"{self.reference} declares {decision.architecture} ({decision.family!r}). "
                "Resolve the repository directly, or fix curated_profiles.json.",
                entry=self.id,
            )
        return decision.to_profile(self.repository, self.revision, display_name=self.display_name)


@dataclass(frozen=True, slots=True)
class CuratedRegistry:
    """The validated curated list.

    Attributes:
        version: The list's version string.
        entries: Entries by id.
        defaults: The default curated id per target.
    """

    version: str
    entries: Mapping[str, CuratedEntry] = field(compare=False, hash=False)
    defaults: Mapping[ExecutionTarget, str] = field(default_factory=dict, compare=False, hash=False)

    def default_for(self, target: ExecutionTarget | str) -> CuratedEntry:
        """The curated entry used when no model is named, for ``target``.

        Raises:
            CuratedRegistryError: The list names no default for ``target``.
        """
        target = ExecutionTarget(target)
        if target not in self.defaults:
            raise CuratedRegistryError(
                f"The curated list names no default model for target {target.value!r}; "
                "name a model explicitly.",
            )
        return self.entries[self.defaults[target]]

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


def _targets(name: str, targets: object) -> tuple[ExecutionTarget, ...]:
    if not isinstance(targets, list) or not targets or len(set(targets)) != len(targets):
        raise _bad(name, f"has targets {targets!r}; expected a non-empty list without repeats")
    try:
        return tuple(ExecutionTarget(t) for t in targets)
    except ValueError:
        raise _bad(
            name, f"has targets {targets!r}; known: {', '.join(t.value for t in ExecutionTarget)}"
        ) from None


def _limits(name: str, family: str, raw: object) -> dict[str, int | bool]:
    if not isinstance(raw, Mapping):
        raise _bad(name, "has limits that are not an object")
    unknown = sorted(set(raw) - set(_LIMIT_FIELDS))
    if unknown:
        raise _bad(name, f"has unknown limits {unknown} (known: {sorted(_LIMIT_FIELDS)})")
    limits: dict[str, int | bool] = {}
    for key, value in raw.items():
        if key in BOOLEAN_LIMITS:
            if not isinstance(value, bool):
                raise _bad(name, f"has limits.{key} {value!r}; expected true or false")
        elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _bad(name, f"has limits.{key} {value!r}; expected a positive integer")
        limits[key] = value
    modalities = FAMILIES[family].modalities
    for modality, bound in COUNT_BOUNDS.items():
        if limits.get(bound) and modality not in modalities:
            raise _bad(name, f"sets {bound}, but family {family!r} takes no {modality}")
    return limits


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
        ref = parse_model_reference(str(repository), curated_ids=())
    except ProfileError as error:
        raise _bad(name, f"has an invalid repository: {error}") from None
    if ref.repository != repository or ref.revision is not None:
        raise _bad(name, f"has repository {repository!r}; expected plain owner/model")
    if not is_commit(revision):
        raise _bad(name, f"has revision {revision!r}; expected a 40-character hex commit")
    family = raw["family"]
    if family not in FAMILIES:
        raise _bad(name, f"has family {family!r}; known: {', '.join(sorted(FAMILIES))}")
    targets = _targets(name, raw["targets"])
    for target in targets:
        if not any(rule.family == family for rule in registry_for(target).rules):
            raise _bad(name, f"is of family {family!r}, which target {target.value!r} lacks")
    return CuratedEntry(
        id=name,
        display_name=str(raw.get("display_name") or repository),
        repository=repository,
        revision=revision,
        family=family,
        targets=targets,
        limits=_limits(name, family, raw.get("limits", {})),
        notes=str(raw.get("notes", "")),
    )


def _defaults(raw: object, entries: Mapping[str, CuratedEntry]) -> dict[ExecutionTarget, str]:
    if not isinstance(raw, Mapping):
        raise _bad(None, "has 'defaults' that is not an object of target -> curated id")
    defaults: dict[ExecutionTarget, str] = {}
    for key, name in raw.items():
        try:
            target = ExecutionTarget(key)
        except ValueError:
            raise _bad(None, f"names a default for unknown target {key!r}") from None
        if name not in entries or target not in entries[name].targets:
            raise _bad(None, f"has default {name!r} for {key!r}, not an entry reviewed for it")
        defaults[target] = name
    return defaults


def parse_curated_registry(data: object) -> CuratedRegistry:
    """Validate parsed curated-list JSON, checking each entry against the registries.

    Raises:
        CuratedRegistryError: The structure is wrong, an id repeats, a family
            is unknown or missing from one of the entry's targets, or a
            default names an entry not reviewed for its target.
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
        entries[entry.id] = entry
    defaults = _defaults(data.get("defaults", {}), entries)
    return CuratedRegistry(version=version, entries=entries, defaults=defaults)


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


def parse_reference(text: str, *, curated_ids: Iterable[str] | None = None) -> ModelReference:
    """Parse ``owner/model[@revision]``, a curated id or a local folder reference.

    Args:
        text: What the user typed.
        curated_ids: The ids that count as curated; None reads the shipped list.

    Raises:
        InvalidModelReferenceError: ``text`` is not one of the accepted forms
            (see ``_reference``).
    """
    known = load_curated_registry().ids if curated_ids is None else curated_ids
    return parse_model_reference(text, curated_ids=known)
