"""One request, start to end: the path the node and ``comfy-llm run`` share.

reference → profile (inspect + pin) → staged snapshot → prepared inputs →
resident manager (admit, load, generate, parse) → response, metadata,
reasoning. ComfyUI specifics (progress bar, interrupt, memory release, model
names) come in as callables, so the CLI runs the very same code.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from comfy_llm_core import (
    ExecutionTarget,
    ProgressCallback,
    ProgressEvent,
    ProgressStage,
    ignore_progress,
    reuse_answer,
)
from comfy_llm_inputs import PreparedInputs, prepare_inputs
from comfy_llm_profiles import (
    LocalFolderError,
    ModelProfile,
    ProfileError,
    RepositoryFile,
    ResolvedProfile,
    gguf_file_names,
    load_curated_registry,
    parse_reference,
    resolve_profile,
)
from comfy_llm_residency import (
    HostFacts,
    HostListener,
    InferenceResult,
    StagingFacts,
    TokenCallback,
    create_backend,
    get_manager,
)
from comfy_llm_staging import (
    StagedSnapshot,
    list_staged_selections,
    stage_local_folder,
    stage_snapshot,
)
from comfy_llm_structured import AnswerSchemaError

from comfy_llm._notes import empty_answer
from comfy_llm._remote import run_on_modal
from comfy_llm._request import LLMRequest
from comfy_llm._storage import model_folders, storage_root
from comfy_llm._targets import detect_target
from comfy_llm._versions import loaded_versions, note_engine
from comfy_llm.errors import TargetUnavailableError

__all__ = [
    "LLMRequest",
    "forget_resolved_profiles",
    "gguf_fetcher",
    "prepare_request_inputs",
    "refuse_local_folder_on_modal",
    "resolve_and_stage",
    "run_request",
    "staged_gguf_lister",
]


_RESOLVED_LOCK = threading.Lock()
_RESOLVED: dict[tuple[str, str, str], tuple[float, ResolvedProfile]] = {}
"""This process's resolutions, reused by ``comfy_llm_core.reuse_answer``'s policy: a
branch or tag reference for ``defaults.BRANCH_REUSE_SECONDS``, a commit or curated
one for the process."""


def _resolve_cached(
    reference: str, target: ExecutionTarget, root: Path, progress: ProgressCallback
) -> ResolvedProfile:
    """Resolve a reference, reusing this process's earlier answer.

    Warm requests then make no Hub request at all (they also work offline),
    which keeps a resident model's per-request overhead to the generation.
    """
    key = (reference, target.value, str(root))
    folders = model_folders()
    fetch = gguf_fetcher(root, progress)
    try:
        parsed = parse_reference(reference, curated_ids=load_curated_registry().ids)
    except ProfileError:  # resolve_profile below raises the user-facing error
        return resolve_profile(
            reference, target, storage_root=root, progress=progress, model_folders=folders
        )
    if parsed.is_local:  # re-checked every time: a stat per file while nothing changed
        return resolve_profile(
            reference, target, storage_root=root, progress=progress, model_folders=folders
        )
    immutable = parsed.is_curated or parsed.is_pinned
    now = time.monotonic()
    with _RESOLVED_LOCK:
        cached = _RESOLVED.get(key)
    fresh = cached is not None and reuse_answer(cached[0], immutable=immutable, now=now)
    if cached is not None and fresh and cached[1].manifest_path.is_file():
        return cached[1]
    resolved = resolve_profile(
        reference,
        target,
        storage_root=root,
        progress=progress,
        model_folders=folders,
        fetch_gguf=fetch,
        staged_gguf=staged_gguf_lister(root),
    )
    with _RESOLVED_LOCK:
        _RESOLVED[key] = (now, resolved)
    return resolved


def gguf_fetcher(
    root: Path, progress: ProgressCallback
) -> Callable[[str, str, tuple[str, ...]], Path]:
    """Profiles' ``fetch_gguf``: stage exactly a GGUF repository's chosen files."""

    def fetch(repository: str, commit: str, files: tuple[str, ...]) -> Path:
        return stage_snapshot(
            repository, commit, storage_root=root, progress=progress, files=files
        ).path

    return fetch


def staged_gguf_lister(root: Path) -> Callable[[str, str], list[tuple[RepositoryFile, ...]]]:
    """Profiles' ``staged_gguf``: the GGUF selections staged for a commit (offline choice)."""

    def staged(repository: str, commit: str) -> list[tuple[RepositoryFile, ...]]:
        return [s.files for s in list_staged_selections(root, repository, commit)]

    return staged


def forget_resolved_profiles() -> None:
    """Drop the in-process resolution cache (tests, or after changing tokens)."""
    with _RESOLVED_LOCK:
        _RESOLVED.clear()


def prepare_request_inputs(
    request: LLMRequest, profile: ModelProfile, progress: ProgressCallback
) -> PreparedInputs:
    """Prepare one request's inputs within the profile's limits (reports PREPARE_INPUTS)."""
    started = time.monotonic()

    def report(message: str, done: int, total: int) -> None:
        progress(
            ProgressEvent(
                stage=ProgressStage.PREPARE_INPUTS,
                message=message,
                value=done,
                maximum=total or None,
                unit="items",
                indeterminate=not total,
                elapsed_seconds=time.monotonic() - started,
            )
        )

    report("Preparing inputs", 0, 0)
    return prepare_inputs(
        request.prompt,
        system_prompt=request.system_prompt or None,
        limits=profile.limits.media,
        progress=report,
        **request.inputs,
    )


def resolve_and_stage(
    reference: str, target: ExecutionTarget, root: Path, progress: ProgressCallback
) -> tuple[ResolvedProfile, StagedSnapshot]:
    """Pin the reference to a profile, then make sure its snapshot is on disk.

    Returns:
        ``(ResolvedProfile, StagedSnapshot)``.

    Raises:
        ProfileError: The reference or repository was refused, or a Hub request
            failed (HubError, while resolving or while downloading).
        StagingError: The snapshot could not be stored or verified.
    """
    resolved = _resolve_cached(reference, target, root, progress)
    profile = resolved.profile
    if profile.is_local:
        snapshot = stage_local_folder(
            Path(str(profile.local_path)),
            repository=profile.repository,
            content_pin=profile.revision,
            storage_root=root,
            profile_id=profile.profile_id,
            progress=progress,
            files=gguf_file_names(dict(profile.backend_options)),
        )
        return resolved, snapshot
    snapshot = stage_snapshot(
        profile.repository,
        profile.revision,
        storage_root=root,
        profile_id=profile.profile_id,
        progress=progress,
        files=gguf_file_names(dict(profile.backend_options)),
    )
    return resolved, snapshot


def run_request(
    request: LLMRequest,
    *,
    progress: ProgressCallback = ignore_progress,
    on_token: TokenCallback | None = None,
    free_host_memory: Callable[[int], None] | None = None,
    comfy_models: Callable[[], Sequence[str]] | None = None,
    prompt_id: str | None = None,
    host_listener: HostListener | None = None,
    on_profile: Callable[[ModelProfile], None] | None = None,
    check_interrupt: Callable[[], None] | None = None,
) -> InferenceResult:
    """Serve one request and return response, reasoning and metadata.

    Args:
        request: The request.
        progress: Receives every typed progress event (may raise to cancel).
        on_token: Called per generated token (may raise to cancel).
        free_host_memory: Asks the host (ComfyUI) to free this many bytes.
        comfy_models: Names of the host's loaded models, for telemetry.
        prompt_id: The host's prompt id, for telemetry (and the Modal worker's
            execution-mode controller).
        check_interrupt: Raises when the host cancelled (polled while a Modal
            call runs).
        host_listener: Mirrors the residents into the host's model manager
            (ComfyUI's), so the host can unload them; first request only.
        on_profile: Called with the resolved ``ModelProfile`` before inputs are
            prepared (the node labels its live text by the reasoning parser).

    Raises:
        TargetUnavailableError: ``run_on_modal`` is set and the Modal extra is
            not installed (ModalUnavailableError: no credentials).
        ProfileError: The model reference or repository was refused, or a Hub
            request failed (HubError, while resolving or while downloading).
        StagingError: The snapshot could not be stored or verified.
        InputError: An input was refused.
        ResidencyError: The model does not fit, or targets mismatch.
    """
    if request.run_on_modal:
        refuse_local_folder_on_modal(request.model)

        def prepare_remote(profile: ModelProfile) -> PreparedInputs:
            if on_profile is not None:
                on_profile(profile)
            return prepare_request_inputs(request, profile, progress)

        result = run_on_modal(
            request,
            prepare=prepare_remote,
            progress=progress,
            check_interrupt=check_interrupt,
            prompt_id=prompt_id,
        )
        return _with_host_facts(result, comfy_models, prompt_id)
    target = detect_target(request.target)
    if target is ExecutionTarget.MODAL:
        raise TargetUnavailableError(
            target.value, "the modal target runs through the node's run_on_modal toggle"
        )
    root = storage_root(request.storage_root)
    resolved, snapshot = resolve_and_stage(request.model, target, root, progress)
    profile = resolved.profile
    if on_profile is not None:
        on_profile(profile)
    prepared = prepare_request_inputs(request, profile, progress)
    manager = get_manager(
        target,
        backend_factory=create_backend,
        free_host_memory=free_host_memory,
        host_listener=host_listener,
    )
    result = manager.run(
        profile,
        snapshot.path,
        prepared,
        request.settings,
        reserve_gb=request.reserve_gb,
        keep_loaded=request.keep_loaded,
        progress=progress,
        on_token=on_token,
        prompt_id=prompt_id,
    )
    note_engine(profile.backend)
    staging = StagingFacts(
        snapshot_downloaded=snapshot.downloaded,
        manifest_created=resolved.created,
        model_source=profile.source,
        snapshot_path=str(snapshot.path),
        resolved_offline=resolved.resolved_offline,
    )
    result = dataclasses.replace(result, metadata=result.metadata.replace(staging=staging))
    return _with_host_facts(result, comfy_models, prompt_id)


def refuse_local_folder_on_modal(model: str) -> None:
    """A folder on this machine is not on the Modal worker: say so before any Modal call."""
    try:
        parsed = parse_reference(model)
    except ProfileError:
        return  # the Modal path reports the refusal as it always did
    if parsed.is_local:
        raise LocalFolderError(
            str(parsed),
            "a folder on this machine is not on the Modal worker",
            "Turn run_on_modal off to run it here, or give its Hub id owner/model@revision.",
        )


def _with_host_facts(
    result: InferenceResult,
    comfy_models: Callable[[], Sequence[str]] | None,
    prompt_id: str | None,
) -> InferenceResult:
    _refuse_invalid_answer(result)
    host = HostFacts(
        comfyui_managed_models=tuple(comfy_models()) if comfy_models else (),
        empty_answer=empty_answer(result.response, result.metadata),
        comfy_llm_versions=loaded_versions(),
    )
    metadata = result.metadata.replace(host=host)
    if prompt_id:
        metadata = metadata.replace(prompt_id=prompt_id)
    return dataclasses.replace(result, metadata=metadata)


def _refuse_invalid_answer(result: InferenceResult) -> None:
    """A ``response_schema`` answer that is still invalid after its retry ends the run.

    Raises:
        AnswerSchemaError: With the validator's reason, whether the token budget
            cut the answer, and the answer's start.
    """
    metadata = result.metadata.to_dict()
    if metadata.get("schema_valid") is not False:
        return
    budget = (metadata.get("generation_settings") or {}).get("max_new_tokens")
    raise AnswerSchemaError(
        str(metadata.get("schema_problem") or "the answer is not valid JSON"),
        retries=int(metadata.get("schema_retries") or 0),
        cut_at_tokens=budget if metadata.get("finish_reason") == "length" else None,
        answer=result.response,
    )
