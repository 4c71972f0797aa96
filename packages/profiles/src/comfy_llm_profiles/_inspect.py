"""Inspecting a Hub repository from metadata alone, before any weight byte.

Two requests, both through ``_hub`` (huggingface_hub's session, our timeouts,
byte limits and field checks) with an explicit endpoint: the
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

import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from comfy_llm_core import DISK_FULL_ERRNOS, ExecutionTarget

from comfy_llm_profiles._hub import (
    CONFIG_MAX_BYTES,
    HubModelInfo,
    fetch_bounded,
    fetch_model_info,
    parse_json,
)
from comfy_llm_profiles._hub_errors import hub_request, unavailable_error
from comfy_llm_profiles._reference import is_commit
from comfy_llm_profiles._settings import ProfileSettings
from comfy_llm_profiles.errors import (
    DownloadTooLargeError,
    HubDataError,
    HubUnavailableError,
    InvalidConfigError,
    MissingConfigError,
    ModelNotFoundError,
    SecurityScanError,
    UnsafeWeightsError,
)

__all__ = ["PICKLE_SUFFIXES", "RepositoryFile", "RepositoryInspection", "inspect_repository"]

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
"""Weight formats that can execute code when loaded; never accepted."""
_MAX_CONFIG_BYTES = CONFIG_MAX_BYTES


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


def _unavailable(
    repository: str, revision: str | None, settings: ProfileSettings, detail: str
) -> HubUnavailableError:
    """The Hub answered something unusable for the model info: as if it had failed."""
    request = hub_request(
        repository, revision, endpoint=settings.endpoint, what="model info", token=settings.token
    )
    return unavailable_error(request, detail)


def _missing_config(
    repository: str, revision: str | None, target: ExecutionTarget
) -> MissingConfigError:
    return MissingConfigError(
        f"Model repository {repository!r} at {revision} has no config.json at its top level, "
        "so its architecture cannot be checked. Pick a Transformers-format repository (one "
        "with config.json and *.safetensors).",
        repository=repository,
        revision=revision,
        target=target.value,
    )


def repository_files(info: HubModelInfo) -> tuple[RepositoryFile, ...]:
    return tuple(RepositoryFile(f.path, f.size, f.sha256) for f in info.files)


def check_security_findings(
    repository: str, revision: str, target: ExecutionTarget, findings: Sequence[str]
) -> None:
    """Refuse a commit the Hub's security scan flagged (no finding is tolerated).

    Raises:
        SecurityScanError: One finding or more (the first five named).
    """
    if findings:
        raise SecurityScanError(
            f"The Hugging Face security scan flagged {len(findings)} file(s) in {repository!r} "
            f"at {revision}: {'; '.join(findings[:5])}. No finding is tolerated; pick another "
            "repository or a revision without findings.",
            findings=tuple(findings),
            repository=repository,
            revision=revision,
            target=target.value,
        )


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
    where = {"repository": repository, "revision": revision, "target": target.value}
    at = f"{repository!r} at {revision}"
    if not any(f.path == "config.json" for f in files):
        raise _missing_config(repository, revision, target)
    check_security_findings(repository, revision, target, findings)
    weights = [f for f in files if f.path.endswith(".safetensors")]
    if not weights:
        pickles = [f.path for f in files if f.path.lower().endswith(PICKLE_SUFFIXES)]
        found = (
            f"only pickle-format weights ({', '.join(pickles[:5])})"
            if pickles
            else "no weight files at all"
        )
        raise UnsafeWeightsError(
            f"Model repository {at} has {found}; only *.safetensors weights are accepted "
            "because pickle formats (.bin, .pt, .pth, .pkl, .ckpt) can run code when loaded. "
            "Pick a repository or revision that ships safetensors.",
            weight_files=tuple(pickles),
            **where,
        )
    unsized = [f.path for f in weights if f.size is None]
    if unsized:
        raise _unavailable(repository, revision, settings, f"the Hub gave no size for {unsized[0]}")
    total = sum(f.size or 0 for f in weights)
    if total > settings.max_download_bytes:
        raise DownloadTooLargeError(
            repository, revision, target.value, total, settings.max_download_bytes
        )
    return total


def _read_config(
    repository: str,
    revision: str,
    target: ExecutionTarget,
    settings: ProfileSettings,
    cache_dir: Path | None,
) -> Mapping[str, Any]:
    cached = (
        None
        if cache_dir is None
        else Path(cache_dir) / "config" / repository.replace("/", "--") / revision / "config.json"
    )
    try:
        config = parse_json(
            _fetch_config(repository, revision, target, settings, cached),
            repository=repository,
            revision=revision,
            what="config.json",
        )
    except HubDataError as error:
        raise InvalidConfigError(
            repository, revision, target.value, f"it {error.problem}"
        ) from None
    if not isinstance(config, dict):
        raise InvalidConfigError(repository, revision, target.value, "it is not a JSON object")
    return config


def _fetch_config(
    repository: str,
    revision: str,
    target: ExecutionTarget,
    settings: ProfileSettings,
    cached: Path | None,
) -> bytes:
    raw = _read_cached(cached)
    if raw is None:
        try:
            raw = fetch_bounded(
                f"{settings.endpoint}/{repository}/resolve/{quote(revision, safe='')}/config.json",
                repository=repository,
                revision=revision,
                endpoint=settings.endpoint,
                token=settings.token,
                what="config.json",
                max_bytes=_MAX_CONFIG_BYTES,
                missing="entry_not_found",
                where_token=target.token_location,
            )
        except ModelNotFoundError as error:
            if error.kind != "entry_not_found":
                raise
            raise _missing_config(repository, revision, target) from None
        if cached is not None:
            _write_cached(cached, raw)
    return raw


def _read_cached(path: Path | None) -> bytes | None:
    """A cached config.json, read no further than the size limit (None when absent or too big)."""
    if path is None:
        return None
    try:
        with path.open("rb") as handle:
            raw = handle.read(_MAX_CONFIG_BYTES + 1)
    except OSError:
        return None
    return raw if len(raw) <= _MAX_CONFIG_BYTES else None


def _write_cached(path: Path, raw: bytes) -> None:
    """Keep config.json for next time (only a cache: a full disk is not an error here).

    The facts and the manifest written next report a full disk
    (``make_folder``, ``write_atomically``).
    """
    temporary = path.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_bytes(raw)
        os.replace(temporary, path)
    except OSError as error:
        if error.errno not in DISK_FULL_ERRNOS:
            raise
    finally:
        temporary.unlink(missing_ok=True)


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
        HubAccessError: Gated and no accepted token, or a token missing or refused
            (HTTP 401/403); its message says where HF_TOKEN goes for ``target``.
        ModelNotFoundError: No such repository (or private and not visible), or
            no such revision (see ``kind``).
        MissingConfigError: No top-level config.json.
        SecurityScanError: The Hub's security scan reported findings.
        UnsafeWeightsError: No safetensors weights (pickle only, or none).
        DownloadTooLargeError: Safetensors total over the download limit.
        InvalidConfigError: config.json is not a JSON object, oversized (counted on
            the bytes received) or nested too deeply.
        HubTimeoutError: No answer within COMFY_MODAL_LLM_HUB_TIMEOUT_SECONDS.
        HubDataError: Malformed model info (a field of the wrong type or range), or a
            file name that would leave the repository's folder (kind ``unsafe_path``).
        HubUnavailableError: The Hub could not be reached or failed.
    """
    info = fetch_model_info(
        repository,
        revision,
        endpoint=settings.endpoint,
        token=settings.token,
        security=True,
        where_token=target.token_location,
    )
    if not is_commit(info.sha) or (is_commit(revision) and info.sha != revision):
        raise _unavailable(
            repository,
            revision,
            settings,
            f"the Hub answered for commit {info.sha!r} instead of {revision!r}",
        )
    pinned = info.sha
    files = repository_files(info)
    weight_bytes = _check_files(
        repository,
        pinned,
        target,
        files=files,
        findings=list(info.security_findings),
        settings=settings,
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
