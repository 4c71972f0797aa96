"""The immutable schema-v2 model profile and its content-addressed id.

A profile is everything a stager, a resident manager and a backend need to
agree on, pinned to one 40-hex commit. Its id is ``hf-`` plus the sha256 of
the canonical JSON (``sort_keys=True``, separators ``(",", ":")``, UTF-8)
of the seed system's identity shape, field for field::

    schema_version (2), compatibility_policy_version (1), repository,
    revision (40 hex), dtype, modalities (sorted), backend, architecture,
    quantization_method, artifact_bytes (sum of .safetensors sizes),
    advertised_context_tokens, max_context_tokens, estimated_vram_gb,
    reasoning_parser, backend_options (object), runtime_requirements (list)

plus ``execution_target`` for every target except ``modal`` (the seed's
Modal ids never hashed their target; a local profile never collides with a
Modal one). ``estimated_vram_gb`` is the seed's coarse figure,
``round(artifact GiB x (1.12 if quantized else 1.08) + overhead, 1)`` with
the engine's overhead (``EngineSpec.vram_overhead_gb``); residency admits loads by
the finer ``estimated_memory_bytes`` instead, which, like the input limits
other than the context, the model type, the registry version, the display
name and the requested revision, is recorded but not hashed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Mapping
from typing import Any, Final

from comfy_llm_core import ExecutionTarget, MediaLimits, Modality

from comfy_llm_profiles._engines import ENGINES, quantization_methods
from comfy_llm_profiles._identity import (
    COMPATIBILITY_POLICY_VERSION,
    PROFILE_ID_PREFIX,
    compute_profile_id,
    estimated_vram_gb,
    identity_of,
)
from comfy_llm_profiles._load_quantization import LOAD_QUANTIZATIONS, LoadQuantization
from comfy_llm_profiles._reference import is_commit, is_content_pin
from comfy_llm_profiles.errors import ProfileValidationError

__all__ = [
    "MODALITIES",
    "COMPATIBILITY_POLICY_VERSION",
    "PROFILE_ID_PREFIX",
    "REASONING_PARSERS",
    "SCHEMA_VERSION",
    "SOURCES",
    "BackendOptionValue",
    "ModelProfile",
    "ProfileLimits",
    "compute_profile_id",
    "estimated_vram_gb",
]

SCHEMA_VERSION: Final = 2
MODALITIES: Final = tuple(modality.value for modality in Modality)
REASONING_PARSERS: Final = ("qwen3", "none")
SOURCES: Final = ("hub", "local")
"""Where a profile's files come from: a Hub commit, or a folder on this machine used in place."""
LOCAL_REPOSITORY_OWNER: Final = "local"
"""A local profile's ``repository`` is ``local/<folder name>`` (a label, never a Hub id)."""

BackendOptionValue = str | int | float | bool
"""Backend option values are JSON scalars so profiles stay hashable and portable."""


def _fail(field: str, value: object, expected: str) -> ProfileValidationError:
    return ProfileValidationError(field, value, expected)


def _non_negative_int(field: str, value: object, *, positive: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < (1 if positive else 0):
        raise _fail(field, value, "a positive integer" if positive else "a non-negative integer")


_LIMIT_KEYS: Final = {
    key: (modality, key)
    for modality, record in MediaLimits.records().items()
    for key in record.profile_bounds
}
"""The profile's flat spelling of each bound (manifests, curated entries): its modality
and field, as each ``comfy_llm_core`` bounds record declares (``profile_bounds``). Bounds
a profile does not carry keep ``MediaLimits``' defaults."""
COUNT_BOUNDS: Final = {
    modality: record.count_bound
    for modality, record in MediaLimits.records().items()
    if record.count_bound
}
"""The bound counting each modality's inputs (``max_images``...): zero for a model
without that modality."""
BOOLEAN_LIMITS: Final = frozenset(
    key
    for key, (modality, _) in _LIMIT_KEYS.items()
    if isinstance(getattr(MediaLimits()[modality], key), bool)
)
LIMIT_KEYS: Final = ("context_tokens", *_LIMIT_KEYS)
"""Every key of :meth:`ProfileLimits.to_dict`, in order."""
_POSITIVE_LIMITS: Final = frozenset(
    {"context_tokens", "max_file_bytes", "max_total_file_bytes", "max_file_characters"}
)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ProfileLimits:
    """Bounds on what one request may carry, per modality, and the context.

    The node prepares each input within its modality's record
    (``limits.media[Modality.IMAGE]`` is ``limits.media.image``); manifests and
    curated entries spell them flat (:meth:`to_dict`, :meth:`of`).

    Attributes:
        context_tokens: Longest prompt plus output the backend is configured for.
        media: The bounds of each modality: ``image.max_images`` (IMAGE inputs
            per request), ``video.max_video_frames`` (frames sampled from one
            VIDEO), ``video.allow_mixed_image_video`` (images and a video in one
            request), ``file.max_file_bytes`` / ``max_total_file_bytes`` (one
            input file / all of them), ``file.max_file_characters`` (extracted
            text per file), ``file.max_pdf_pages``.
    """

    context_tokens: int
    media: MediaLimits

    def __post_init__(self) -> None:
        if not isinstance(self.media, MediaLimits):
            raise _fail("limits.media", self.media, "a MediaLimits")
        _check_limits(self.to_dict())

    @classmethod
    def of(cls, *, context_tokens: int, **bounds: int | bool) -> ProfileLimits:
        """Build limits from the flat spelling (see :meth:`to_dict`).

        Raises:
            ProfileValidationError: A bound is unknown or out of range.
        """
        unknown = sorted(set(bounds) - set(_LIMIT_KEYS))
        if unknown:
            raise _fail("limits", unknown, f"keys among {sorted(_LIMIT_KEYS)}")
        _check_limits({"context_tokens": context_tokens, **bounds})
        records: dict[Modality, dict[str, Any]] = {}
        for key, value in bounds.items():
            modality, field = _LIMIT_KEYS[key]
            records.setdefault(modality, {})[field] = value
        return cls(context_tokens=context_tokens, media=MediaLimits.of(records))

    def for_modalities(self, modalities: Collection[str]) -> ProfileLimits:
        """These limits for a model taking only ``modalities``: other count bounds zero."""
        zero = {bound: 0 for modality, bound in COUNT_BOUNDS.items() if modality not in modalities}
        return ProfileLimits.of(**{**self.to_dict(), **zero}) if zero else self

    def to_dict(self) -> dict[str, Any]:
        """Return the limits as a JSON-ready dict, flat (the manifest's spelling)."""
        values: dict[str, Any] = {"context_tokens": self.context_tokens}
        for key, (modality, field) in _LIMIT_KEYS.items():
            values[key] = getattr(self.media[modality], field)
        return values

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProfileLimits:
        """Rebuild limits from :meth:`to_dict` output.

        Raises:
            ProfileValidationError: A field is missing, unknown or out of range.
        """
        if not isinstance(data, Mapping):
            raise _fail("limits", data, "an object")
        names = set(LIMIT_KEYS)
        if set(data) != names:
            raise _fail("limits", sorted(data), f"exactly the keys {sorted(names)}")
        return cls.of(**data)


def _check_limits(values: Mapping[str, Any]) -> None:
    """Each flat bound is a whole number >= 0 (> 0 where zero fits nothing) or a bool."""
    for name, value in values.items():
        if name in BOOLEAN_LIMITS:
            if not isinstance(value, bool):
                raise _fail(f"limits.{name}", value, "true or false")
        else:
            _non_negative_int(f"limits.{name}", value, positive=name in _POSITIVE_LIMITS)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ModelProfile:
    """An immutable, commit-pinned description of one model on one target.

    Build it through :func:`resolve_profile` or from a curated entry; leave
    ``profile_id`` empty and it is computed, or pass one and it is checked.

    Attributes:
        profile_id: ``hf-`` + sha256 of the canonical identity JSON.
        schema_version: Always 2.
        repository: ``owner/model`` on the Hub.
        revision: The pinned 40-hex commit.
        requested_revision: What the user asked for (branch/tag/commit), or None.
        execution_target: The target this profile was resolved for.
        backend: The engine, a name in ``ENGINES`` (``transformers``, ...).
        architecture: ``architectures[0]`` of config.json.
        model_type: ``model_type`` of config.json.
        dtype: The checkpoint's declared dtype (``bfloat16``, ... or ``auto``).
        quantization_method: ``none`` or a method some engine loads (``fp8``, ...).
        modalities: Accepted inputs, a subset of text/image/video/file.
        limits: Input bounds.
        reasoning_parser: ``qwen3``, ``none``, or None (older profile: the
            reasoning package falls back on the architecture).
        backend_options: Sorted ``(key, value)`` pairs passed to the backend.
        estimated_memory_bytes: Memory the loaded model is expected to need.
        weight_bytes: Total size of the safetensors files (``artifact_bytes``).
        registry_version: The compatibility registry version that decided it.
        display_name: A human label; not part of the identity.
        advertised_context_tokens: ``max_position_embeddings`` of config.json,
            None when it declares none.
        runtime_requirements: Pinned engine requirements, e.g. ``mlx-vlm==0.7.10``.
        source: ``hub`` (``revision`` is a 40-hex commit) or ``local`` (a folder
            used in place: ``revision`` is its 64-hex content pin, ``repository``
            ``local/<folder name>``).
        local_path: The local folder (absolute), None for Hub profiles.
    """

    profile_id: str = ""
    schema_version: int = SCHEMA_VERSION
    repository: str
    revision: str
    requested_revision: str | None = None
    execution_target: ExecutionTarget
    backend: str
    architecture: str
    model_type: str
    dtype: str
    quantization_method: str
    modalities: tuple[str, ...]
    limits: ProfileLimits
    reasoning_parser: str | None
    backend_options: tuple[tuple[str, BackendOptionValue], ...] = ()
    estimated_memory_bytes: int
    weight_bytes: int
    registry_version: str
    display_name: str = ""
    advertised_context_tokens: int | None = None
    runtime_requirements: tuple[str, ...] = ()
    source: str = "hub"
    local_path: str | None = None

    @property
    def load_quantization(self) -> LoadQuantization | None:
        """The quantization the engine applies while loading (``:nf4``), else None.

        Read from the profile, so an engine needs no table of its own.
        """
        return LOAD_QUANTIZATIONS.get(self.quantization_method)

    @property
    def is_local(self) -> bool:
        """True for a local folder used in place (``source == "local"``)."""
        return self.source == "local"

    def __post_init__(self) -> None:
        self._validate()
        expected = compute_profile_id(self._fields_dict())
        if not self.profile_id:
            object.__setattr__(self, "profile_id", expected)
        elif self.profile_id != expected:
            raise _fail("profile_id", self.profile_id, f"{expected} (the digest of its identity)")

    def _validate(self) -> None:
        if self.schema_version != SCHEMA_VERSION:
            raise _fail("schema_version", self.schema_version, f"{SCHEMA_VERSION}")
        if not isinstance(self.repository, str) or self.repository.count("/") != 1:
            raise _fail("repository", self.repository, "'owner/model'")
        self._check_source()
        if not isinstance(self.execution_target, ExecutionTarget):
            try:
                target = ExecutionTarget(self.execution_target)
            except ValueError:
                known = ", ".join(t.value for t in ExecutionTarget)
                raise _fail("execution_target", self.execution_target, f"one of {known}") from None
            object.__setattr__(self, "execution_target", target)
        self._check_choice("backend", self.backend, tuple(ENGINES))
        self._check_choice("quantization_method", self.quantization_method, quantization_methods())
        if self.reasoning_parser is not None:
            self._check_choice("reasoning_parser", self.reasoning_parser, REASONING_PARSERS)
        for name in ("architecture", "model_type", "dtype", "registry_version"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise _fail(name, getattr(self, name), "a non-empty string")
        modalities = tuple(self.modalities)
        if (
            not modalities
            or "text" not in modalities
            or len(set(modalities)) != len(modalities)
            or any(m not in MODALITIES for m in modalities)
        ):
            raise _fail("modalities", self.modalities, f"distinct values of {MODALITIES} with text")
        object.__setattr__(self, "modalities", modalities)
        if not isinstance(self.limits, ProfileLimits):
            raise _fail("limits", self.limits, "a ProfileLimits")
        object.__setattr__(self, "backend_options", _normalize_options(self.backend_options))
        _non_negative_int("estimated_memory_bytes", self.estimated_memory_bytes, positive=True)
        _non_negative_int("weight_bytes", self.weight_bytes)
        if self.requested_revision is not None and not isinstance(self.requested_revision, str):
            raise _fail("requested_revision", self.requested_revision, "a string or null")
        if not isinstance(self.display_name, str):
            raise _fail("display_name", self.display_name, "a string")
        if self.advertised_context_tokens is not None:
            _non_negative_int(
                "advertised_context_tokens", self.advertised_context_tokens, positive=True
            )
        requirements = self.runtime_requirements
        if isinstance(requirements, str) or not all(
            isinstance(r, str) and r for r in (requirements or ())
        ):
            raise _fail("runtime_requirements", requirements, "a list of non-empty strings")
        object.__setattr__(self, "runtime_requirements", tuple(requirements))

    def _check_source(self) -> None:
        self._check_choice("source", self.source, SOURCES)
        if self.source == "hub":
            if not is_commit(self.revision):
                raise _fail("revision", self.revision, "a 40-character lowercase hex commit")
            if self.local_path is not None:
                raise _fail("local_path", self.local_path, "null for a Hub profile")
            return
        if not is_content_pin(self.revision):
            raise _fail("revision", self.revision, "a local folder's 64-hex content pin")
        if not self.repository.startswith(f"{LOCAL_REPOSITORY_OWNER}/"):
            raise _fail("repository", self.repository, f"'{LOCAL_REPOSITORY_OWNER}/<folder name>'")
        path = self.local_path
        if not isinstance(path, str) or not (path.startswith("/") or path[1:3] in (":\\", ":/")):
            raise _fail("local_path", path, "the absolute path of the local folder")

    @staticmethod
    def _check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
        if value not in choices:
            raise _fail(name, value, f"one of {', '.join(choices)}")

    @property
    def options(self) -> dict[str, BackendOptionValue]:
        """The backend options as a dict (a fresh copy)."""
        return dict(self.backend_options)

    @property
    def identity(self) -> dict[str, Any]:
        """The dict whose canonical JSON is hashed into :attr:`profile_id`."""
        return identity_of(self._fields_dict())

    def _fields_dict(self) -> dict[str, Any]:
        target = self.execution_target
        return {
            "schema_version": self.schema_version,
            "profile_id": self.profile_id,
            "repository": self.repository,
            "revision": self.revision,
            "requested_revision": self.requested_revision,
            "execution_target": target.value if isinstance(target, ExecutionTarget) else target,
            "backend": self.backend,
            "architecture": self.architecture,
            "model_type": self.model_type,
            "dtype": self.dtype,
            "quantization_method": self.quantization_method,
            "modalities": list(self.modalities),
            "limits": self.limits.to_dict(),
            "reasoning_parser": self.reasoning_parser,
            "backend_options": dict(self.backend_options),
            "estimated_memory_bytes": self.estimated_memory_bytes,
            "weight_bytes": self.weight_bytes,
            "registry_version": self.registry_version,
            "display_name": self.display_name,
            "advertised_context_tokens": self.advertised_context_tokens,
            "runtime_requirements": list(self.runtime_requirements),
            "source": self.source,
            "local_path": self.local_path,
        }

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready form used by manifests and the Modal wire."""
        return self._fields_dict()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelProfile:
        """Rebuild and validate a profile from :meth:`to_dict` output.

        Args:
            data: The dict, e.g. a parsed manifest.

        Returns:
            The profile.

        Raises:
            ProfileValidationError: Unknown schema version, missing or unknown
                keys, a bad field value (non-40-hex revision, unknown target or
                backend), or a ``profile_id`` that is not the digest of the
                identity fields.
        """
        if not isinstance(data, Mapping):
            raise _fail("profile", data, "an object")
        if data.get("schema_version") != SCHEMA_VERSION:
            raise _fail("schema_version", data.get("schema_version"), f"{SCHEMA_VERSION}")
        names = {f.name for f in dataclasses.fields(cls)}
        required = names - {"requested_revision", "display_name", "source", "local_path"}
        missing = sorted(required - set(data))
        unknown = sorted(set(data) - names)
        if missing or unknown:
            raise _fail("profile", f"missing {missing}, unknown {unknown}", "exactly the v2 keys")
        if not isinstance(data["profile_id"], str) or not data["profile_id"]:
            raise _fail("profile_id", data["profile_id"], "an 'hf-<sha256>' string")
        values = dict(data)
        values["limits"] = ProfileLimits.from_dict(data["limits"])
        if not isinstance(data["modalities"], list | tuple):
            raise _fail("modalities", data["modalities"], "a list")
        values["modalities"] = tuple(data["modalities"])
        options = data["backend_options"]
        if not isinstance(options, Mapping):
            raise _fail("backend_options", options, "an object of scalar values")
        values["backend_options"] = tuple(options.items())
        if not isinstance(data["runtime_requirements"], list | tuple):
            raise _fail("runtime_requirements", data["runtime_requirements"], "a list")
        values["runtime_requirements"] = tuple(data["runtime_requirements"])
        return cls(**values)


def _normalize_options(options: object) -> tuple[tuple[str, BackendOptionValue], ...]:
    items: Any = options.items() if isinstance(options, Mapping) else options
    try:
        pairs = [(key, value) for key, value in items]
    except (TypeError, ValueError):
        raise _fail("backend_options", options, "(key, value) pairs") from None
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys) or not all(isinstance(k, str) and k for k in keys):
        raise _fail("backend_options", options, "distinct non-empty string keys")
    for key, value in pairs:
        if not isinstance(value, str | int | float | bool) or (
            isinstance(value, float) and not math.isfinite(value)
        ):
            raise _fail(f"backend_options.{key}", value, "a string, finite number or boolean")
    return tuple(sorted(pairs))
