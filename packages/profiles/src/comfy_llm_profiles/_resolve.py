"""Resolution: from what the user typed to a pinned profile and its manifest.

The one entry point the node, the CLI and the Modal stager share. It never
downloads a weight byte. Where the facts of a commit (config.json and the
safetensors total) come from, first found first::

    stored facts  <storage_root>/profiles/pinned/<owner>/<model>/<commit>.json
    the Hugging Face cache: a complete snapshot of that commit (no request)
    the Hub: model info + config.json, stored for next time

A branch (``owner/model``, ``@main``) needs the Hub to say which commit it is
now; offline (``HF_HUB_OFFLINE=1``) or when the Hub cannot be reached, the
commit it last resolved to here (``_pins``), else the Hugging Face cache's
``refs/<branch>``, is used and the result says ``resolved_offline``. A local
folder is checked and hashed on disk (``_local``) and never touches the Hub.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from comfy_llm_core import (
    ExecutionTarget,
    ProgressCallback,
    ProgressEvent,
    ProgressStage,
    ignore_progress,
)

from comfy_llm_profiles._curated import load_curated_registry, parse_reference
from comfy_llm_profiles._decide import decide
from comfy_llm_profiles._decide_gguf import decide_gguf
from comfy_llm_profiles._hf_cache import (
    OFFLINE_ENV,
    hf_cache_ref,
    hub_offline,
)
from comfy_llm_profiles._hub_errors import hub_request, offline_error, unavailable_error
from comfy_llm_profiles._inspect import inspect_repository
from comfy_llm_profiles._load_quantization import load_quantization_for_tag
from comfy_llm_profiles._local import (
    FolderScan,
    content_pin,
    find_local_folder,
    hash_files,
    scan_folder,
    scan_hf_cache_snapshot,
)
from comfy_llm_profiles._local_gguf import check_gguf_pair, find_local_gguf
from comfy_llm_profiles._manifest import write_manifest
from comfy_llm_profiles._pins import (
    PinnedFacts,
    load_branch_pin,
    load_pinned_facts,
    save_branch_pin,
    save_pinned_facts,
)
from comfy_llm_profiles._profile import LOCAL_REPOSITORY_OWNER, ModelProfile
from comfy_llm_profiles._reference import ModelReference, is_commit
from comfy_llm_profiles._resolve_gguf import (
    GgufFetcher,
    StagedGguf,
    is_hub_gguf,
    resolve_hub_gguf,
)
from comfy_llm_profiles._settings import ProfileSettings, read_settings
from comfy_llm_profiles.errors import (
    DownloadTooLargeError,
    HubUnavailableError,
    LocalFolderError,
)

__all__ = ["ResolvedProfile", "resolve_profile"]

_OFFLINE = f"{OFFLINE_ENV}=1 forbids asking the Hub"


@dataclass(frozen=True, slots=True)
class ResolvedProfile:
    """The result of :func:`resolve_profile`.

    Attributes:
        profile: The pinned profile (with this request's ``requested_revision``).
        manifest_path: ``<storage_root>/profiles/<profile_id>.json``.
        created: True when this call wrote the manifest, False when an
            identical-identity one existed (the Modal stager commits its
            Volume only when something was created).
        resolved_offline: True when a branch reference took the commit it last
            resolved to, because the Hub was off or unreachable.
    """

    profile: ModelProfile
    manifest_path: Path
    created: bool
    resolved_offline: bool = False


def resolve_profile(
    reference: str,
    target: ExecutionTarget | str,
    *,
    storage_root: Path,
    token: str | None = None,
    endpoint: str | None = None,
    progress: ProgressCallback = ignore_progress,
    cache_dir: Path | None = None,
    backends: Collection[str] | None = None,
    model_folders: Mapping[str, Sequence[Path]] | None = None,
    fetch_gguf: GgufFetcher | None = None,
    staged_gguf: StagedGguf | None = None,
) -> ResolvedProfile:
    """Parse, inspect (metadata only), decide, pin and record a profile.

    Args:
        reference: ``owner/model``, ``owner/model@revision`` or a curated id;
            ``:nf4``/``:int8`` after a Hub reference or curated id quantizes it at load.
        target: The execution target to resolve for.
        storage_root: Root under which ``profiles/<id>.json`` is written.
        token: Hub token; default HF_TOKEN, then HUGGING_FACE_HUB_TOKEN, then
            huggingface_hub's own login.
        endpoint: Hub URL; default HF_ENDPOINT, then https://huggingface.co.
        progress: Receives indeterminate INSPECT events.
        cache_dir: Where config.json is cached; None uses a temporary folder.
        backends: Backends usable by the target here; None asks the
            installation (only ``local_cuda`` depends on it: vLLM is optional).
        model_folders: Registered model folders by name (``LLM`` → folders),
            for ``models/<folder>/<name>`` references.
        fetch_gguf: Downloads a GGUF repository's chosen files (staging's
            ``stage_snapshot(files=...)``); a GGUF repository (``owner/m-GGUF``,
            ``owner/m:Q8_0``) is decided from their headers (``_resolve_gguf``).
        staged_gguf: Lists the GGUF selections already staged for a commit
            (staging's ``list_staged_selections``): offline, or with the Hub
            unreachable, a staged quantization is chosen from them.

    Returns:
        The profile, its manifest path, and whether the manifest was created.

    Raises:
        ValueError: ``target`` is not an execution target.
        InvalidModelReferenceError: ``reference`` is not an accepted form.
        CuratedRegistryError: A curated id not reviewed for ``target``.
        InvalidSettingError: A malformed environment variable (comfy_llm_core).
        HubError: Gated or refused (HubAccessError), missing repository or
            revision (ModelNotFoundError), Hub unreachable (HubUnavailableError),
            malformed metadata (HubDataError), offline and never resolved here
            (OfflineResolutionError); ``kind`` says which.
        LocalFolderError: A local folder is missing or fails the gate.
        ModelRejectedError: A refusal before download (subclasses:
            MissingConfigError, UnsafeWeightsError, DownloadTooLargeError,
            SecurityScanError, RemoteCodeError, InvalidConfigError,
            UnsupportedArchitectureError, UnsupportedQuantizationError).
        ManifestConflictError: A different profile already holds the manifest.
        GgufRepositoryError: A GGUF repository without a usable file, or no
            ``fetch_gguf`` (also UnsafeGgufError: a fetched file refused).
    """
    started = time.monotonic()
    target = ExecutionTarget(target)

    def report(message: str) -> None:
        progress(
            ProgressEvent(
                stage=ProgressStage.INSPECT,
                message=message,
                indeterminate=True,
                elapsed_seconds=time.monotonic() - started,
            )
        )

    curated = load_curated_registry()
    ref = parse_reference(reference, curated_ids=curated.ids)
    usable = frozenset(backends) if backends is not None else None
    root = Path(storage_root)
    settings = read_settings(token=token, endpoint=endpoint)
    offline = False
    if ref.is_local:
        report(f"Checking local folder {ref}")
        profile = _local_profile(
            ref,
            target,
            root,
            settings,
            model_folders=model_folders or {},
            usable=usable,
            progress=progress,
        )
    elif ref.curated_id is not None:
        entry = curated.get(ref.curated_id)
        entry.check_target(target)
        report(f"Using curated profile {entry.id} ({entry.reference})")
        facts = _commit_facts(
            entry.repository, entry.revision, target, root, settings, cache_dir=cache_dir
        )
        profile = entry.profile(
            target,
            facts.config,
            weight_bytes=facts.weight_bytes,
            backends=usable,
            load_quantization=_load_quantization(ref),
        )
    elif is_hub_gguf(ref):
        report(f"Inspecting GGUF repository {ref} (metadata, then the chosen files)")
        profile, offline = resolve_hub_gguf(
            ref, target, root, settings, fetch=fetch_gguf, backends=usable, staged=staged_gguf
        )
    else:
        repository = str(ref.repository)
        report(f"Inspecting {ref} (metadata only)")
        commit, offline = _pin_commit(ref, target, root, settings, cache_dir)
        facts = _commit_facts(repository, commit, target, root, settings, cache_dir=cache_dir)
        report(f"Checking {repository}@{commit[:12]} for {target.value}")
        decision = decide(
            target,
            facts.config,
            weight_bytes=facts.weight_bytes,
            repository=repository,
            revision=commit,
            backends=usable,
            load_quantization=_load_quantization(ref),
        )
        profile = decision.to_profile(repository, commit, requested_revision=ref.revision)
    path, created = write_manifest(root, profile)
    report(f"Profile {profile.profile_id} ({profile.backend}, {profile.quantization_method})")
    return ResolvedProfile(
        profile=profile, manifest_path=path, created=created, resolved_offline=offline
    )


def _load_quantization(ref: ModelReference) -> str | None:
    """The quantization a reference's ``:nf4``/``:int8`` asks to apply at load, if any."""
    found = load_quantization_for_tag(ref.quantization)
    return found.name if found is not None else None


_LABEL_CHARACTERS = re.compile(r"[^A-Za-z0-9._-]+")


def _local_profile(
    ref: ModelReference,
    target: ExecutionTarget,
    storage_root: Path,
    settings: ProfileSettings,
    *,
    model_folders: Mapping[str, Sequence[Path]],
    usable: frozenset[str] | None,
    progress: ProgressCallback,
) -> ModelProfile:
    """Gate, hash and decide a local folder; the profile names it and its content pin.

    The first resolution hashes every file (GBs: seconds to minutes), reported
    as INSPECT bytes; later ones reuse the hashes while sizes and mtimes hold.
    """
    if target is ExecutionTarget.MODAL:
        raise LocalFolderError(
            str(ref),
            "a folder on this machine is not on the Modal worker",
            "Run it locally (turn run_on_modal off), or give its Hub id owner/model@revision.",
        )
    gguf = find_local_gguf(ref, model_folders)
    if gguf is not None:
        return _local_gguf_profile(
            gguf, target, storage_root, settings=settings, usable=usable, progress=progress
        )
    folder = find_local_folder(ref, model_folders)
    scan = scan_folder(folder, max_weight_bytes=settings.max_download_bytes, target=target.value)
    pin = content_pin(scan, hash_files(scan, storage_root, _hash_progress(scan, progress)))
    decision = decide(
        target,
        scan.config,
        weight_bytes=scan.weight_bytes,
        repository=str(folder),
        revision=None,
        backends=usable,
    )
    label = _LABEL_CHARACTERS.sub("-", folder.name).strip("-._")[:96] or "folder"
    return decision.to_profile(
        f"{LOCAL_REPOSITORY_OWNER}/{label}",
        pin,
        display_name=folder.name,
        local_path=str(folder),
    )


def _local_gguf_profile(
    found: tuple[Path, str | None],
    target: ExecutionTarget,
    storage_root: Path,
    *,
    settings: ProfileSettings,
    usable: frozenset[str] | None,
    progress: ProgressCallback,
) -> ModelProfile:
    """Check (where the files enter), hash and decide a local GGUF model and its projector."""
    folder, model_name = found
    checked = check_gguf_pair(folder, model_name, max_weight_bytes=settings.max_download_bytes)
    scan = checked.scan
    pin = content_pin(scan, hash_files(scan, storage_root, _hash_progress(scan, progress)))
    decision = decide_gguf(
        target, checked.model, checked.projector, repository=str(folder), backends=usable
    )
    name = checked.model.path.name
    label = _LABEL_CHARACTERS.sub("-", name.removesuffix(".gguf")).strip("-._")[:96] or "gguf"
    return decision.to_profile(
        f"{LOCAL_REPOSITORY_OWNER}/{label}", pin, display_name=name, local_path=str(scan.path)
    )


def _hash_progress(scan: FolderScan, progress: ProgressCallback) -> Callable[[int], None]:
    """An ``on_bytes`` for hashing that reports INSPECT bytes at most four times a second."""
    total = float(sum(f.size for f in scan.files))
    started = time.monotonic()
    state = {"done": 0.0, "last": 0.0}

    def on_bytes(count: int) -> None:
        state["done"] += count
        now = time.monotonic()
        if now - state["last"] >= 0.25 or state["done"] >= total:
            state["last"] = now
            progress(
                ProgressEvent(
                    stage=ProgressStage.INSPECT,
                    message=f"Hashing {scan.path.name} (first use of this folder)",
                    value=state["done"],
                    maximum=total,
                    unit="bytes",
                    elapsed_seconds=now - started,
                )
            )

    return on_bytes


def _pin_commit(
    ref: ModelReference,
    target: ExecutionTarget,
    storage_root: Path,
    settings: ProfileSettings,
    cache_dir: Path | None,
) -> tuple[str, bool]:
    """The commit a Hub reference means now, and whether it was taken offline."""
    repository, revision = str(ref.repository), ref.revision
    if revision is not None and is_commit(revision):
        return revision, False
    if not hub_offline():
        try:
            inspection = inspect_repository(
                repository, revision=revision, target=target, settings=settings, cache_dir=cache_dir
            )
        except HubUnavailableError:
            known = _last_pin(storage_root, repository, revision)
            if known is None:
                raise
            return known, True
        save_pinned_facts(
            storage_root,
            PinnedFacts(
                repository, inspection.revision, inspection.weight_bytes, inspection.config
            ),
        )
        save_branch_pin(storage_root, repository, revision, inspection.revision)
        return inspection.revision, False
    known = _last_pin(storage_root, repository, revision)
    if known is None:
        raise offline_error(repository, revision, settings.endpoint, _OFFLINE)
    return known, True


def _last_pin(storage_root: Path, repository: str, branch: str | None) -> str | None:
    return load_branch_pin(storage_root, repository, branch) or hf_cache_ref(repository, branch)


def _commit_facts(
    repository: str,
    revision: str,
    target: ExecutionTarget,
    storage_root: Path,
    settings: ProfileSettings,
    *,
    cache_dir: Path | None,
) -> PinnedFacts:
    """A commit's facts: stored, else from a complete HF-cache snapshot, else from the Hub."""
    facts = load_pinned_facts(storage_root, repository, revision)
    if facts is None:
        facts = _hf_cache_facts(repository, revision, target, settings)
        if facts is None and hub_offline():
            raise offline_error(repository, revision, settings.endpoint, _OFFLINE)
        if facts is None:
            facts = _hub_facts(repository, revision, target, settings, cache_dir)
        save_pinned_facts(storage_root, facts)
    elif facts.weight_bytes > settings.max_download_bytes:
        raise DownloadTooLargeError(
            repository, revision, target.value, facts.weight_bytes, settings.max_download_bytes
        )
    return facts


def _hf_cache_facts(
    repository: str, revision: str, target: ExecutionTarget, settings: ProfileSettings
) -> PinnedFacts | None:
    """config.json and the safetensors total of a complete cached snapshot.

    No hashing here: staging verifies every blob before a backend may load it.
    """
    found = scan_hf_cache_snapshot(
        repository, revision, max_weight_bytes=settings.max_download_bytes, target=target.value
    )
    if found is None:
        return None  # absent, not usable in place (e.g. holds .py) or partial: the Hub decides
    scan = found[1]
    return PinnedFacts(repository, revision, scan.weight_bytes, scan.config)


def _hub_facts(
    repository: str,
    revision: str,
    target: ExecutionTarget,
    settings: ProfileSettings,
    cache_dir: Path | None,
) -> PinnedFacts:
    inspection = inspect_repository(
        repository, revision=revision, target=target, settings=settings, cache_dir=cache_dir
    )
    if inspection.revision != revision:
        request = hub_request(
            repository,
            revision,
            endpoint=settings.endpoint,
            what="model info",
            token=settings.token,
        )
        raise unavailable_error(
            request, f"the Hub answered commit {inspection.revision} for pinned {revision}"
        )
    return PinnedFacts(repository, revision, inspection.weight_bytes, inspection.config)
