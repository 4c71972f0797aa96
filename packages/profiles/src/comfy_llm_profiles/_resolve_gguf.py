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

Offline (``HF_HUB_OFFLINE=1``, or the Hub unreachable) the model info is not
there to choose from, so the choice is rebuilt from what was staged: the
commit (a pinned reference's, else the one this branch last resolved to
here), then the caller's ``staged`` lister (staging's selections of that
commit, each its model file and projector with the sha256 they were
verified against). The reference's quantization, or the default
``Q4_K_M``, must be among them; an unstaged one is refused naming the
reference, what is staged and the fix. No "only one on offer" fallback:
offline the Hub's offer is unknown, and the quantization a reference means
must not depend on what happens to be on disk.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

from comfy_llm_core import ExecutionTarget

from comfy_llm_profiles._decide_gguf import decide_gguf
from comfy_llm_profiles._engines import ENGINES
from comfy_llm_profiles._gguf_rules import FILE_TYPES, check_model_file, check_projector_file
from comfy_llm_profiles._hf_cache import OFFLINE_ENV, hf_cache_ref, hub_offline
from comfy_llm_profiles._hub import fetch_model_info
from comfy_llm_profiles._hub_errors import (
    hub_request,
    offline_error,
    offline_gguf_error,
    unavailable_error,
)
from comfy_llm_profiles._hub_gguf import (
    DEFAULT_GGUF_QUANTIZATION,
    HubGgufChoice,
    choose_hub_gguf,
    hub_gguf_quantizations,
)
from comfy_llm_profiles._inspect import (
    RepositoryFile,
    check_security_findings,
    repository_files,
)
from comfy_llm_profiles._load_quantization import load_quantization_for_tag
from comfy_llm_profiles._local_gguf import is_projector_name, scan_gguf_files
from comfy_llm_profiles._pins import load_branch_pin, save_branch_pin
from comfy_llm_profiles._profile import ModelProfile
from comfy_llm_profiles._reference import ModelReference, is_commit
from comfy_llm_profiles._refusals import unusable_gguf_repository
from comfy_llm_profiles._settings import ProfileSettings
from comfy_llm_profiles.errors import (
    DownloadTooLargeError,
    HubUnavailableError,
    OfflineResolutionError,
    UnsafeGgufError,
)

__all__ = [
    "GGUF_REPOSITORY_SUFFIX",
    "GgufFetcher",
    "StagedGguf",
    "is_hub_gguf",
    "resolve_hub_gguf",
]

GgufFetcher = Callable[[str, str, tuple[str, ...]], Path]
"""``(repository, commit, file paths) -> folder`` holding exactly those files, each
verified against the Hub's sha256 (``comfy_llm_staging.stage_snapshot(files=...)``)."""

StagedGguf = Callable[[str, str], Sequence[Sequence[RepositoryFile]]]
"""``(repository, commit) -> selections``: the files of each selection of that commit
already staged complete, with the sizes and sha256 they were verified against
(``comfy_llm_staging.list_staged_selections``); read offline, no request."""

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
    staged: StagedGguf | None = None,
) -> tuple[ModelProfile, bool]:
    """Pin, choose, fetch (through ``fetch``), check and decide a GGUF repository's files.

    Returns:
        The profile, and whether a branch reference took, offline (the Hub
        off or unreachable), the commit it last resolved to here.

    Raises:
        GgufRepositoryError: No GGUF engine on ``target``, no ``fetch`` given, no
            single-file model GGUF, or a chosen file without its LFS sha256.
        UnsupportedQuantizationError: The quantization is not offered (lists the offer).
        DownloadTooLargeError: The two files exceed the download limit.
        UnsafeGgufError: A fetched file failed the GGUF checks, or its header's
            file type is not the quantization its name says.
        SecurityScanError: The Hub's scan flagged the commit.
        HubError: A Hub request failed and nothing usable is staged; offline
            (OfflineResolutionError), the reference or its quantization never staged.
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
    stale = not is_commit(revision)  # a branch offline takes the commit it last resolved to
    if hub_offline():
        reason = f"{OFFLINE_ENV}=1 forbids asking the Hub"
        commit, choice = _staged_choice(ref, storage_root, settings, staged, reason)
        return _decide_files(
            ref, target, commit, choice, settings=settings, fetch=fetch, backends=backends
        ), stale
    try:
        info = fetch_model_info(
            repository,
            revision,
            endpoint=settings.endpoint,
            token=settings.token,
            security=True,
            where_token=target.token_location,
        )
    except HubUnavailableError as error:
        try:  # the Hub unreachable: a staged choice runs, else the Hub's own error
            commit, choice = _staged_choice(ref, storage_root, settings, staged, "")
        except OfflineResolutionError:
            raise error from None
        return _decide_files(
            ref, target, commit, choice, settings=settings, fetch=fetch, backends=backends
        ), stale
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
    profile = _decide_files(
        ref, target, commit, choice, settings=settings, fetch=fetch, backends=backends
    )
    if not is_commit(revision):
        save_branch_pin(storage_root, repository, revision, commit)
    return profile, False


def _decide_files(
    ref: ModelReference,
    target: ExecutionTarget,
    commit: str,
    choice: HubGgufChoice,
    *,
    settings: ProfileSettings,
    fetch: GgufFetcher,
    backends: frozenset[str] | None,
) -> ModelProfile:
    """The download limit, the fetch, both files checked, then the decision."""
    repository = str(ref.repository)
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
    return decision.to_profile(repository, commit, requested_revision=ref.revision)


def _staged_commit(ref: ModelReference, storage_root: Path) -> str | None:
    """The commit a reference means without the Hub: its own, else its branch's last pin."""
    repository, revision = str(ref.repository), ref.revision
    if revision is not None and is_commit(revision):
        return revision
    return load_branch_pin(storage_root, repository, revision) or hf_cache_ref(repository, revision)


def _staged_choice(
    ref: ModelReference,
    storage_root: Path,
    settings: ProfileSettings,
    staged: StagedGguf | None,
    reason: str,
) -> tuple[str, HubGgufChoice]:
    """The commit and the choice rebuilt from the staged selections (module docstring)."""
    repository = str(ref.repository)
    commit = _staged_commit(ref, storage_root)
    if commit is None or staged is None:
        raise offline_error(repository, ref.revision, settings.endpoint, reason)
    offered: dict[str, HubGgufChoice] = {}
    for files in staged(repository, commit):
        models = hub_gguf_quantizations(files)
        projectors = [f for f in files if is_projector_name(f.path.rsplit("/", 1)[-1])]
        if len(models) != 1 or len(files) != len(models) + len(projectors) or len(projectors) > 1:
            continue  # not a selection this module chose: one model file, at most one projector
        ((quantization, model),) = models.items()
        projector = projectors[0] if projectors else None
        offered.setdefault(quantization, HubGgufChoice(quantization, model, projector, ()))
    wanted = (ref.quantization or DEFAULT_GGUF_QUANTIZATION).upper()
    if wanted not in offered:
        raise offline_gguf_error(
            str(ref),
            repository,
            commit,
            quantization=wanted if ref.quantization else f"{wanted} (the default)",
            staged=sorted(offered),
            endpoint=settings.endpoint,
            reason=reason,
        )
    return commit, dataclasses.replace(offered[wanted], offered=tuple(sorted(offered)))


def _file_options(names: Sequence[str]) -> dict[str, str | int | float | bool]:
    """The profile names the files by repository path (they may sit in a folder)."""
    options: dict[str, str | int | float | bool] = {"gguf_file": names[0]}
    if len(names) > 1:
        options["mmproj_file"] = names[1]
    return options
