"""Resolution: from what the user typed to a pinned profile and its manifest.

The one entry point the node, the CLI and the Modal stager share. It never
downloads a weight byte: Hub references cost one model-info request and
config.json; a curated id is an alias of its pinned commit, inspected the
same way the first time and decided from the stored facts (``_pins``)
offline afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from comfy_llm_profiles._curated import CuratedEntry, load_curated_registry
from comfy_llm_profiles._decide import decide
from comfy_llm_profiles._inspect import inspect_repository
from comfy_llm_profiles._manifest import write_manifest
from comfy_llm_profiles._pins import PinnedFacts, load_pinned_facts, save_pinned_facts
from comfy_llm_profiles._profile import ModelProfile
from comfy_llm_profiles._progress import (
    ProgressCallback,
    ProgressEvent,
    ProgressStage,
    ignore_progress,
)
from comfy_llm_profiles._reference import parse_reference
from comfy_llm_profiles._settings import ProfileSettings, read_settings
from comfy_llm_profiles._targets import ExecutionTarget
from comfy_llm_profiles.errors import DownloadTooLargeError, HubUnavailableError

__all__ = ["ResolvedProfile", "resolve_profile"]


@dataclass(frozen=True, slots=True)
class ResolvedProfile:
    """The result of :func:`resolve_profile`.

    Attributes:
        profile: The pinned profile (with this request's ``requested_revision``).
        manifest_path: ``<storage_root>/profiles/<profile_id>.json``.
        created: True when this call wrote the manifest, False when an
            identical-identity one existed (the Modal stager commits its
            Volume only when something was created).
    """

    profile: ModelProfile
    manifest_path: Path
    created: bool


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
) -> ResolvedProfile:
    """Parse, inspect (metadata only), decide, pin and record a profile.

    Args:
        reference: ``owner/model``, ``owner/model@revision`` or a curated id.
        target: The execution target to resolve for.
        storage_root: Root under which ``profiles/<id>.json`` is written.
        token: Hub token; default HF_TOKEN, then HUGGING_FACE_HUB_TOKEN, then
            huggingface_hub's own login.
        endpoint: Hub URL; default HF_ENDPOINT, then https://huggingface.co.
        progress: Receives indeterminate INSPECT events.
        cache_dir: Where config.json is cached; None uses a temporary folder.
        backends: Backends usable by the target here; None asks the
            installation (only ``local_cuda`` depends on it: vLLM is optional).

    Returns:
        The profile, its manifest path, and whether the manifest was created.

    Raises:
        ValueError: ``target`` is not an execution target.
        InvalidModelReferenceError: ``reference`` is not an accepted form.
        CuratedRegistryError: A curated id not reviewed for ``target``.
        InvalidSettingError: A malformed environment variable (comfy_llm_core).
        HubAccessError: Gated, missing repository or revision, or Hub unreachable
            (subclasses: GatedModelError, ModelNotFoundError,
            ModelRevisionNotFoundError, HubUnavailableError).
        ModelRejectedError: A refusal before download (subclasses:
            MissingConfigError, UnsafeWeightsError, DownloadTooLargeError,
            SecurityScanError, RemoteCodeError, InvalidConfigError,
            UnsupportedArchitectureError, UnsupportedQuantizationError).
        ManifestConflictError: A different profile already holds the manifest.
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
    if ref.curated_id is not None:
        entry = curated.get(ref.curated_id)
        entry.check_target(target)
        settings = read_settings(token=token, endpoint=endpoint)
        report(f"Using curated profile {entry.id} ({entry.reference})")
        facts = _pinned_facts(entry, target, Path(storage_root), settings, cache_dir)
        profile = entry.profile(
            target, facts.config, weight_bytes=facts.weight_bytes, backends=usable
        )
    else:
        settings = read_settings(token=token, endpoint=endpoint)
        repository = str(ref.repository)
        report(f"Inspecting {ref} (metadata only)")
        inspection = inspect_repository(
            repository, revision=ref.revision, target=target, settings=settings, cache_dir=cache_dir
        )
        report(f"Checking {repository}@{inspection.revision[:12]} for {target.value}")
        decision = decide(
            target,
            inspection.config,
            weight_bytes=inspection.weight_bytes,
            repository=repository,
            revision=inspection.revision,
            backends=usable,
        )
        profile = decision.to_profile(
            repository, inspection.revision, requested_revision=ref.revision
        )
    path, created = write_manifest(Path(storage_root), profile)
    report(f"Profile {profile.profile_id} ({profile.backend}, {profile.quantization_method})")
    return ResolvedProfile(profile=profile, manifest_path=path, created=created)


def _pinned_facts(
    entry: CuratedEntry,
    target: ExecutionTarget,
    storage_root: Path,
    settings: ProfileSettings,
    cache_dir: Path | None,
) -> PinnedFacts:
    """The pinned commit's facts: from disk when stored, else inspected once and stored."""
    facts = load_pinned_facts(storage_root, entry.repository, entry.revision)
    if facts is None:
        inspection = inspect_repository(
            entry.repository,
            revision=entry.revision,
            target=target,
            settings=settings,
            cache_dir=cache_dir,
        )
        if inspection.revision != entry.revision:
            raise HubUnavailableError(
                entry.repository,
                entry.revision,
                settings.endpoint,
                f"the Hub answered commit {inspection.revision} for pinned {entry.revision}",
            )
        facts = PinnedFacts(
            entry.repository, entry.revision, inspection.weight_bytes, inspection.config
        )
        save_pinned_facts(storage_root, facts)
    elif facts.weight_bytes > settings.max_download_bytes:
        raise DownloadTooLargeError(
            entry.repository,
            entry.revision,
            target.value,
            facts.weight_bytes,
            settings.max_download_bytes,
        )
    return facts
