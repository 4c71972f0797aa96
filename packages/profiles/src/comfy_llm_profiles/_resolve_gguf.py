"""Resolving a GGUF repository on the Hub: one quantization's two files, pinned and decided.

``owner/model-GGUF[:Q8_0]`` (or any Hub reference with ``:<quantization>``)
names a repository with no config.json, one model file per quantization and
a vision projector. Unlike a Transformers repository, what the decision
needs (architecture, layers, context, projector type) is in the files'
own headers, not in a small JSON file, so resolution goes:

    model info at the reference (pins the commit; hostile metadata is
        checked field by field where it enters, ``_hub``; security findings refuse)
    choose the quantization's model file and projector (``_hub_gguf``: names,
        sizes and LFS sha256 from that model info only)
    the download limit, before a byte of weight
    the caller's ``fetch`` downloads exactly those two files, pinned to the
        commit and verified against their sha256 (staging, above this package)
    both files checked (``_gguf_rules``) before anything reads them further,
        the name's quantization against the header's file type
    decide (``decide_gguf``), the profile naming the files by repository path

Profiles never imports staging: the node and the CLI pass ``fetch`` (a
staging call), and a caller without one is told to use them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

from comfy_llm_core import ExecutionTarget

from comfy_llm_profiles._decide_gguf import decide_gguf
from comfy_llm_profiles._engines import ENGINES
from comfy_llm_profiles._gguf_rules import FILE_TYPES, check_model_file, check_projector_file
from comfy_llm_profiles._hf_cache import OFFLINE_ENV, hub_offline
from comfy_llm_profiles._hub import fetch_model_info
from comfy_llm_profiles._hub_errors import hub_request, offline_error, unavailable_error
from comfy_llm_profiles._hub_gguf import choose_hub_gguf
from comfy_llm_profiles._inspect import check_security_findings, repository_files
from comfy_llm_profiles._load_quantization import load_quantization_for_tag
from comfy_llm_profiles._local_gguf import scan_gguf_files
from comfy_llm_profiles._pins import save_branch_pin
from comfy_llm_profiles._profile import ModelProfile
from comfy_llm_profiles._reference import ModelReference, is_commit
from comfy_llm_profiles._refusals import unusable_gguf_repository
from comfy_llm_profiles._settings import ProfileSettings
from comfy_llm_profiles.errors import (
    DownloadTooLargeError,
    UnsafeGgufError,
)

__all__ = ["GGUF_REPOSITORY_SUFFIX", "GgufFetcher", "is_hub_gguf", "resolve_hub_gguf"]

GgufFetcher = Callable[[str, str, tuple[str, ...]], Path]
"""``(repository, commit, file paths) -> folder`` holding exactly those files, each
verified against the Hub's sha256 (``comfy_llm_staging.stage_snapshot(files=...)``)."""

GGUF_REPOSITORY_SUFFIX = "-gguf"
"""The Hub's convention for a GGUF repository's name (ggml-org, unsloth, bartowski,
lmstudio-community): such a reference without ``:<quantization>`` takes the default."""


def is_hub_gguf(ref: ModelReference) -> bool:
    """Whether a Hub reference names a GGUF repository (a ``:`` tag or a ``-GGUF`` name).

    ``:nf4`` and ``:int8`` quantize a safetensors repository as it loads
    (``_load_quantization``), so they name one only with a ``-GGUF`` name.
    """
    repository = ref.repository or ""
    if repository.lower().endswith(GGUF_REPOSITORY_SUFFIX):
        return True
    return ref.quantization is not None and load_quantization_for_tag(ref.quantization) is None


def resolve_hub_gguf(
    ref: ModelReference,
    target: ExecutionTarget,
    storage_root: Path,
    settings: ProfileSettings,
    *,
    fetch: GgufFetcher | None,
    backends: frozenset[str] | None,
) -> ModelProfile:
    """Pin, choose, fetch (through ``fetch``), check and decide a GGUF repository's files.

    Raises:
        GgufRepositoryError: No GGUF engine on ``target``, no ``fetch`` given, no
            single-file model GGUF, or a chosen file without its LFS sha256.
        UnsupportedQuantizationError: The quantization is not offered (lists the offer).
        DownloadTooLargeError: The two files exceed the download limit.
        UnsafeGgufError: A fetched file failed the GGUF checks, or its header's
            file type is not the quantization its name says.
        SecurityScanError: The Hub's scan flagged the commit.
        HubError: A Hub request failed, or HF_HUB_OFFLINE is set.
        ModelRejectedError: What ``decide_gguf`` refuses (architecture, engine).
    """
    repository, revision = str(ref.repository), ref.revision
    where = (repository, revision, target.value)
    if not any(e.weight_format == "gguf" and target in e.targets for e in ENGINES.values()):
        raise unusable_gguf_repository(where, f"no GGUF engine runs on target {target.value!r}")
    if fetch is None:
        raise unusable_gguf_repository(
            where,
            "a GGUF model is decided from its files' headers, and this caller cannot "
            "download them; run it through the node or `comfy-llm run`",
        )
    if hub_offline():
        raise offline_error(
            repository, revision, settings.endpoint, f"{OFFLINE_ENV}=1 forbids asking the Hub"
        )
    info = fetch_model_info(
        repository,
        revision,
        endpoint=settings.endpoint,
        token=settings.token,
        security=True,
        where_token=target.token_location,
    )
    if not is_commit(info.sha) or (is_commit(revision) and info.sha != revision):
        request = hub_request(
            repository,
            revision,
            endpoint=settings.endpoint,
            what="model info",
            token=settings.token,
        )
        raise unavailable_error(
            request, f"the Hub answered for commit {info.sha!r} instead of {revision!r}"
        )
    commit = info.sha
    check_security_findings(repository, commit, target, info.security_findings)
    choice = choose_hub_gguf(
        repository, commit, target.value, repository_files(info), ref.quantization
    )
    if choice.download_bytes > settings.max_download_bytes:
        raise DownloadTooLargeError(
            repository, commit, target.value, choice.download_bytes, settings.max_download_bytes
        )
    names = tuple(f.path for f in choice.files)
    folder = Path(fetch(repository, commit, names))
    scan_gguf_files(folder, names, max_weight_bytes=settings.max_download_bytes)
    model = check_model_file(folder / choice.model.path)
    if choice.quantization in FILE_TYPES.values() and model.quantization != choice.quantization:
        raise UnsafeGgufError(
            str(model.path),
            f"its name says {choice.quantization} but its header's file type is "
            f"{model.quantization or 'missing'}",
        )
    projector = None
    if choice.projector is not None:
        projector = check_projector_file(folder / choice.projector.path, model)
    decision = decide_gguf(
        target, model, projector, repository=repository, revision=commit, backends=backends
    )
    options = dict(decision.backend_options) | _file_options(names)
    decision = dataclasses.replace(decision, backend_options=tuple(sorted(options.items())))
    if not is_commit(revision):
        save_branch_pin(storage_root, repository, revision, commit)
    return decision.to_profile(repository, commit, requested_revision=revision)


def _file_options(names: Sequence[str]) -> dict[str, str | int | float | bool]:
    """The profile names the files by repository path (they may sit in a folder)."""
    options: dict[str, str | int | float | bool] = {"gguf_file": names[0]}
    if len(names) > 1:
        options["mmproj_file"] = names[1]
    return options
