"""Errors raised while parsing references, inspecting the Hub and building profiles.

Every error a user can cause names the value, the limit it broke and the fix,
because the message is shown verbatim on a ComfyUI node or a CLI line; the
raise site composes it (the Hub's errors: ``_hub_errors``) and the class keeps
the facts a caller reads as attributes, so nobody parses messages. Where a
builtin fits, the class also derives from it (``ValueError`` for bad input,
``LookupError`` for missing repositories, ``PermissionError`` for gated ones)
so generic handlers keep working, and ComfyUI shows that kind.
"""

from __future__ import annotations

from pathlib import Path

from comfy_llm_core import ComfyLLMError, ErrorAction

__all__ = [
    "CuratedRegistryError",
    "DownloadTooLargeError",
    "EngineUnavailableError",
    "GgufRepositoryError",
    "HubAccessError",
    "HubError",
    "HubDataError",
    "HubTimeoutError",
    "HubUnavailableError",
    "OfflineResolutionError",
    "InvalidConfigError",
    "InvalidModelReferenceError",
    "LocalFolderError",
    "ManifestConflictError",
    "ManifestError",
    "MissingConfigError",
    "ModelNotFoundError",
    "ModelRejectedError",
    "ProfileError",
    "ProfileValidationError",
    "RemoteCodeError",
    "SecurityScanError",
    "UnsafeGgufError",
    "UnsafeWeightsError",
    "UnreviewedArchitectureError",
    "UnsupportedArchitectureError",
    "UnsupportedQuantizationError",
]

_GIB = 1024**3


def _gib(size: int) -> str:
    return f"{size / _GIB:.2f} GiB"


class ProfileError(ComfyLLMError):
    """Base class of every error raised by ``comfy_llm_profiles``."""

    # Nearly every profile error asks for another reference, model or setting.
    action = ErrorAction.FIX_INPUT


class InvalidModelReferenceError(ProfileError, ValueError):
    """A model reference is not one of the accepted forms.

    Attributes:
        value: The text that was given.
        reason: What is wrong with it.
    """

    def __init__(self, message: str, *, value: str, reason: str) -> None:
        super().__init__(message)
        self.value = value
        self.reason = reason


class CuratedRegistryError(ProfileError, ValueError):
    """The curated profile list is malformed, or a curated id does not fit the target.

    Attributes:
        entry: The curated id concerned, or None for the file as a whole.
    """

    def __init__(self, message: str, entry: str | None = None) -> None:
        self.entry = entry
        super().__init__(message)


class ProfileValidationError(ProfileError, ValueError):
    """A profile (or its dict/manifest form) breaks the schema.

    Attributes:
        field: The offending field.
        value: The value found.
    """

    def __init__(self, field: str, value: object, expected: str) -> None:
        self.field = field
        self.value = value
        super().__init__(
            f"Profile field {field!r} has value {value!r}; expected {expected}. "
            "Re-resolve the model reference to build a fresh profile."
        )


class ManifestError(ProfileError):
    """A profile manifest file cannot be read or trusted.

    Attributes:
        path: The manifest file.
    """

    # An unusable file in the storage: nothing serves until it is deleted.
    action = ErrorAction.FATAL

    def __init__(self, message: str, *, path: Path) -> None:
        super().__init__(message)
        self.path = path


class ManifestConflictError(ManifestError, FileExistsError):
    """A manifest with this profile id already holds a different profile.

    Attributes:
        path: The existing manifest.
        profile_id: The id both profiles claim.
    """

    def __init__(self, message: str, *, path: Path, profile_id: str) -> None:
        super().__init__(message, path=path)
        self.profile_id = profile_id


class HubError(ProfileError):
    """A Hub request failed or was refused.

    ``comfy_llm_profiles._hub_errors`` is the one place that turns an HTTP answer or a
    transport failure into one of these, and composes the message there;
    callers branch on the class or on ``kind``, never on the text.

    Attributes:
        repository: The repository asked for.
        revision: The revision asked for (None for the default branch).
        kind: ``gated``, ``unauthorized``, ``forbidden`` (:class:`HubAccessError`);
            ``repo_not_found``, ``revision_not_found``, ``entry_not_found``
            (:class:`ModelNotFoundError`); ``unavailable``, ``timeout``
            (:class:`HubUnavailableError`); ``offline``
            (:class:`OfflineResolutionError`); ``data``, ``unsafe_path``
            (:class:`HubDataError`).
        endpoint: The Hub endpoint (or HF_ENDPOINT mirror) asked, when known.
        status: The HTTP status, when the Hub answered one.
        url: The request (without its query), when known.
        token_provided: Whether a token was sent.
    """

    # A failed Hub request; the subclasses say when it is not transient.
    action = ErrorAction.RETRY

    def __init__(
        self,
        message: str,
        *,
        repository: str,
        revision: str | None,
        kind: str,
        endpoint: str | None = None,
        status: int | None = None,
        url: str | None = None,
        token_provided: bool = False,
    ) -> None:
        super().__init__(message)
        self.repository = repository
        self.revision = revision
        self.kind = kind
        self.endpoint = endpoint
        self.status = status
        self.url = url
        self.token_provided = token_provided


class HubAccessError(HubError, PermissionError):
    """The Hub refused access: a gated repository, or a token missing, refused or expired."""

    action = ErrorAction.FIX_INPUT


class ModelNotFoundError(HubError, LookupError):
    """The repository, the revision or a file does not exist (or is private and not visible)."""

    action = ErrorAction.FIX_INPUT


class HubUnavailableError(HubError, ConnectionError):
    """The Hub (or the HF_ENDPOINT mirror) could not be reached, or answered an error."""


class HubTimeoutError(HubUnavailableError, TimeoutError):
    """A Hub request got no connection or no data within COMFY_MODAL_LLM_HUB_TIMEOUT_SECONDS."""


class OfflineResolutionError(HubError, ConnectionError):
    """A reference needs the Hub, and the Hub is off (HF_HUB_OFFLINE) or unreachable."""

    action = ErrorAction.FIX_INPUT


class HubDataError(HubError, ValueError):
    """The Hub's answer (model info, config.json) is malformed, oversized, too deep or unsafe.

    Attributes:
        what: Which answer (``"model info"``, ``"config.json"``).
        field: The field at fault (a JSON path such as ``siblings[3].size``, or ``body``).
        problem: What is wrong with it.
        path: For kind ``unsafe_path``, the file name as sent (it may hold any
            character: quote it with ``ascii()``); else None.
    """

    action = ErrorAction.FIX_INPUT

    def __init__(
        self,
        message: str,
        *,
        repository: str,
        revision: str | None,
        what: str,
        field: str,
        problem: str,
        path: object = None,
    ) -> None:
        kind = "data" if path is None else "unsafe_path"
        super().__init__(message, repository=repository, revision=revision, kind=kind)
        self.what = what
        self.field = field
        self.problem = problem
        self.path = path


class ModelRejectedError(ProfileError):
    """The repository was inspected and is refused before any weight byte is downloaded.

    The raise site composes the message; a subclass's own facts (named on it
    as annotations) are keyword arguments kept as attributes.

    Attributes:
        repository: The repository inspected.
        revision: The pinned 40-hex commit (or the requested revision if not pinned yet).
        target: The execution target the check was made for.
    """

    def __init__(
        self, message: str, *, repository: str, revision: str | None, target: str, **facts: object
    ) -> None:
        super().__init__(message)
        self.repository = repository
        self.revision = revision
        self.target = target
        vars(self).update(facts)


class MissingConfigError(ModelRejectedError):
    """The repository has no top-level config.json, so nothing can be checked."""


class InvalidConfigError(ModelRejectedError):
    """config.json is not a JSON object, or lacks a field the decision needs.

    Attributes:
        problem: What is wrong with it.
    """

    def __init__(self, repository: str, revision: str | None, target: str, problem: str) -> None:
        self.problem = problem
        super().__init__(
            f"{repository!r} cannot be used because of its config.json: {problem}. Pick a "
            f"repository with a standard Transformers config.json (read at commit {revision}).",
            repository=repository,
            revision=revision,
            target=target,
        )


class UnsafeWeightsError(ModelRejectedError):
    """The repository has no *.safetensors weights (pickle formats are never loaded).

    Attributes:
        weight_files: The weight-like files found (pickle formats), possibly empty.
    """

    weight_files: tuple[str, ...]


class DownloadTooLargeError(ModelRejectedError):
    """The safetensors weights exceed the download limit.

    Attributes:
        size_bytes: Total size of the safetensors files.
        limit_bytes: The limit (COMFY_MODAL_LLM_MAX_DOWNLOAD_GB).
    """

    def __init__(
        self, repository: str, revision: str | None, target: str, size_bytes: int, limit_bytes: int
    ) -> None:
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes
        super().__init__(
            f"Model repository {repository!r} at {revision} has {_gib(size_bytes)} of "
            f"safetensors weights, over the download limit of {_gib(limit_bytes)}. Pick a "
            "smaller or quantized model, or raise COMFY_MODAL_LLM_MAX_DOWNLOAD_GB (GiB).",
            repository=repository,
            revision=revision,
            target=target,
        )


class SecurityScanError(ModelRejectedError):
    """The Hub's security scan reported findings for files of the repository.

    Attributes:
        findings: One line per finding (file path and level where known).
    """

    findings: tuple[str, ...]


class RemoteCodeError(ModelRejectedError):
    """config.json asks for custom Python code (trust_remote_code is never enabled).

    Attributes:
        reason: What in config.json asks for it.
    """

    reason: str


class UnreviewedArchitectureError(ModelRejectedError):
    """The architecture is built into Transformers but no reviewed family has it yet.

    Not a remote-code refusal: the engine could load it, nobody has reviewed
    it for comfy-llm (modalities, template, memory, limits).

    Attributes:
        architecture: The architecture from config.json.
        kind: What Transformers builds it as (``image-text-to-text``, ...).
        reason: Why a reviewed-but-refused family is refused, else empty.
    """

    architecture: str
    kind: str
    reason: str


class UnsupportedArchitectureError(ModelRejectedError):
    """The architecture is not in the compatibility registry of the target.

    Attributes:
        architecture: The architecture from config.json.
        supported: The architectures the target's registry accepts.
        other_targets: Targets whose registry does accept it.
        reason: Why the engines of this target cannot run a reviewed family.
    """

    architecture: str
    supported: tuple[str, ...]
    other_targets: tuple[str, ...]
    reason: str


class UnsupportedQuantizationError(ModelRejectedError):
    """The checkpoint's quantization format is not allowed for the target.

    Attributes:
        quantization: The detected format ("fp8", "modelopt_fp4", "mlx", or a
            description of an unknown one).
        allowed: The formats the target accepts for this architecture.
    """

    quantization: str
    allowed: tuple[str, ...]


class LocalFolderError(ModelRejectedError):
    """A local checkpoint folder is missing or fails the gate a Hub repository passes.

    Attributes:
        path: The folder (or the reference as typed when no folder was found).
        problem: What is wrong.
    """

    def __init__(self, path: str, problem: str, fix: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(
            f"Local model folder {path!r} is refused: {problem}. {fix}",
            repository=path,
            revision=None,
            target="",
        )


class UnsafeGgufError(ProfileError, ValueError):
    """A GGUF file was refused before llama.cpp (C++) saw it: checked where it entered.

    Attributes:
        path: The file.
        reason: The broken rule, with the value and the limit.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            f"Refused GGUF file {path}: {reason}. The file was not given to llama.cpp; "
            "download it again or pick another quantization."
        )


class EngineUnavailableError(ModelRejectedError):
    """The only engine that loads this model's format is not installed here.

    Attributes:
        engine: The engine's label (``llama.cpp``).
        install_hint: The command that installs it.
    """

    engine: str
    install_hint: str


class GgufRepositoryError(ModelRejectedError):
    """A GGUF repository offers no file this engine can download and verify.

    Attributes:
        problem: What is missing (named files, the reason).
    """

    problem: str
