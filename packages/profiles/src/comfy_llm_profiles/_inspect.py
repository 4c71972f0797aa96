"""Inspecting a Hub repository from metadata alone, before any weight byte.

Two requests, both through the real ``huggingface_hub`` client with an
explicit ``endpoint=`` (it reads HF_ENDPOINT only once, at import): the
model info with file metadata and security status (which also pins the
commit: its ``sha``), then config.json alone, fetched at that pinned
commit. Everything a refusal needs is in those two answers, so a refused
model costs a few kilobytes and no accelerator time.

Checks, in order: config.json exists; the security scan has no findings;
safetensors weights exist (pickle-only repositories are refused); their
total is within COMFY_MODAL_LLM_MAX_DOWNLOAD_GB. The config itself is
judged afterwards by the compatibility registry.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from comfy_llm_profiles._reference import is_commit
from comfy_llm_profiles._settings import ProfileSettings
from comfy_llm_profiles._targets import ExecutionTarget
from comfy_llm_profiles.errors import (
    DownloadTooLargeError,
    GatedModelError,
    HubUnavailableError,
    InvalidConfigError,
    MissingConfigError,
    ModelNotFoundError,
    ModelRevisionNotFoundError,
    SecurityScanError,
    UnsafeWeightsError,
)

__all__ = ["PICKLE_SUFFIXES", "RepositoryFile", "RepositoryInspection", "inspect_repository"]

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
"""Weight formats that can execute code when loaded; never accepted."""
_MAX_CONFIG_BYTES = 4 * 1024**2
# The HTTP library's base error (httpx in huggingface_hub 1.x, httpx2 in 2.x),
# taken from the client's own hierarchy so either major version works.
_NETWORK_ERRORS: tuple[type[Exception], ...] = (
    *(base for base in HfHubHTTPError.__mro__[1:] if base.__name__ == "HTTPError"),
    HfHubHTTPError,
    OSError,
)


@dataclass(frozen=True, slots=True)
class RepositoryFile:
    """One file of the inspected commit.

    Attributes:
        path: Repo-relative path.
        size: Size in bytes, None when the Hub did not say.
        sha256: The LFS sha256, None for non-LFS files.
    """

    path: str
    size: int | None
    sha256: str | None


@dataclass(frozen=True, slots=True)
class RepositoryInspection:
    """What the metadata requests established about one repository commit.

    Attributes:
        repository: ``owner/model``.
        revision: The pinned 40-hex commit.
        requested_revision: What was asked for (None for the default branch).
        files: Every file of the commit, in Hub order.
        weight_bytes: Total size of the ``*.safetensors`` files.
        config: The parsed config.json.
    """

    repository: str
    revision: str
    requested_revision: str | None
    files: tuple[RepositoryFile, ...]
    weight_bytes: int
    config: Mapping[str, Any]


@contextmanager
def _hub_errors(
    repository: str, revision: str | None, target: ExecutionTarget, settings: ProfileSettings
) -> Iterator[None]:
    """Translate huggingface_hub errors into this package's, naming the fix."""
    token_sent = settings.token is not None
    try:
        yield
    except GatedRepoError:  # a subclass of RepositoryNotFoundError: first
        raise GatedModelError(
            repository, revision, target.value, target.token_location, token_sent
        ) from None
    except RepositoryNotFoundError:
        raise ModelNotFoundError(
            repository, revision, target.value, target.token_location, token_sent
        ) from None
    except RevisionNotFoundError:
        raise ModelRevisionNotFoundError(repository, revision) from None
    except RemoteEntryNotFoundError:
        raise MissingConfigError(repository, revision, target.value) from None
    except LocalEntryNotFoundError as error:
        raise HubUnavailableError(
            repository, revision, settings.endpoint, _first_line(error)
        ) from None
    except _NETWORK_ERRORS as error:
        raise HubUnavailableError(
            repository, revision, settings.endpoint, _first_line(error)
        ) from None


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else 'no detail'}"


def _findings(status: object) -> list[str]:
    """Findings of the Hub's security scan, one line each."""
    if not isinstance(status, Mapping):
        return []
    findings = []
    for item in status.get("filesWithIssues") or []:
        if isinstance(item, Mapping):
            level = item.get("level") or item.get("status") or "flagged"
            findings.append(f"{item.get('path', '?')} ({level})")
        else:
            findings.append(str(item))
    return findings


def _files(info: Any) -> tuple[RepositoryFile, ...]:
    files = []
    for sibling in info.siblings or []:
        lfs = sibling.lfs
        size = sibling.size if sibling.size is not None else (lfs.size if lfs else None)
        files.append(RepositoryFile(sibling.rfilename, size, lfs.sha256 if lfs else None))
    return tuple(files)


def _check_files(
    repository: str,
    revision: str,
    target: ExecutionTarget,
    *,
    files: tuple[RepositoryFile, ...],
    findings: list[str],
    settings: ProfileSettings,
) -> int:
    """Apply the file-level refusals; return the safetensors total."""
    where = (repository, revision, target.value)
    if not any(f.path == "config.json" for f in files):
        raise MissingConfigError(*where)
    if findings:
        raise SecurityScanError(*where, findings)
    weights = [f for f in files if f.path.endswith(".safetensors")]
    if not weights:
        pickles = [f.path for f in files if f.path.lower().endswith(PICKLE_SUFFIXES)]
        raise UnsafeWeightsError(*where, pickles)
    unsized = [f.path for f in weights if f.size is None]
    if unsized:
        raise HubUnavailableError(
            repository, revision, settings.endpoint, f"the Hub gave no size for {unsized[0]}"
        )
    total = sum(f.size or 0 for f in weights)
    if total > settings.max_download_bytes:
        raise DownloadTooLargeError(*where, total, settings.max_download_bytes)
    return total


def _read_config(
    repository: str,
    revision: str,
    target: ExecutionTarget,
    settings: ProfileSettings,
    cache_dir: Path | None,
) -> Mapping[str, Any]:
    def fetch(folder: Path) -> bytes:
        with _hub_errors(repository, revision, target, settings):
            path = hf_hub_download(
                repository,
                "config.json",
                revision=revision,
                endpoint=settings.endpoint,
                token=settings.token,
                cache_dir=folder,
            )
        return Path(str(path)).read_bytes()

    if cache_dir is None:
        with tempfile.TemporaryDirectory(prefix="comfy-llm-config-") as folder:
            raw = fetch(Path(folder))
    else:
        raw = fetch(cache_dir)
    try:
        config = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise InvalidConfigError(
            repository, revision, target.value, f"it is not valid JSON ({error})"
        ) from None
    if not isinstance(config, dict):
        raise InvalidConfigError(repository, revision, target.value, "it is not a JSON object")
    return config


def inspect_repository(
    repository: str,
    *,
    revision: str | None,
    target: ExecutionTarget,
    settings: ProfileSettings,
    cache_dir: Path | None = None,
) -> RepositoryInspection:
    """Inspect ``repository`` at ``revision`` from metadata only and pin its commit.

    Args:
        repository: ``owner/model`` (already validated by :func:`parse_reference`).
        revision: Branch, tag or commit; None for the default branch.
        target: The target, for error messages (where HF_TOKEN goes).
        settings: Endpoint, token and download limit.
        cache_dir: Where config.json is cached; None uses a temporary folder.

    Returns:
        The pinned inspection, with the parsed config.json.

    Raises:
        GatedModelError: Gated and no accepted token.
        ModelNotFoundError: No such repository (or private and not visible).
        ModelRevisionNotFoundError: The repository exists, the revision not.
        MissingConfigError: No top-level config.json.
        SecurityScanError: The Hub's security scan reported findings.
        UnsafeWeightsError: No safetensors weights (pickle only, or none).
        DownloadTooLargeError: Safetensors total over the download limit.
        InvalidConfigError: config.json is not a JSON object or is oversized.
        HubUnavailableError: The Hub could not be reached or failed.
    """
    api = HfApi(endpoint=settings.endpoint, token=settings.token)
    with _hub_errors(repository, revision, target, settings):
        info = api.model_info(
            repository,
            revision=revision,
            files_metadata=True,
            securityStatus=True,
            token=settings.token,
        )
    sha = getattr(info, "sha", None)
    if not is_commit(sha):
        raise HubUnavailableError(
            repository,
            revision,
            settings.endpoint,
            f"the Hub answered without a 40-hex commit id (sha={sha!r})",
        )
    pinned = str(sha)
    files = _files(info)
    findings = _findings(getattr(info, "security_repo_status", None))
    weight_bytes = _check_files(
        repository, pinned, target, files=files, findings=findings, settings=settings
    )
    config_size = next((f.size for f in files if f.path == "config.json"), None)
    if config_size is not None and config_size > _MAX_CONFIG_BYTES:
        raise InvalidConfigError(
            repository,
            pinned,
            target.value,
            f"it is {config_size} bytes, over the {_MAX_CONFIG_BYTES} limit",
        )
    config = _read_config(repository, pinned, target, settings, cache_dir)
    return RepositoryInspection(
        repository=repository,
        revision=pinned,
        requested_revision=revision,
        files=files,
        weight_bytes=weight_bytes,
        config=config,
    )
