"""The ModelStager's body: the only place on the Modal side that downloads.

Runs on a CPU-only container with the weight Volume and the secret (HF_TOKEN).
reload the Volume (see what other containers committed) → resolve the
reference for ``modal`` (manifest on the Volume) → stage the pinned snapshot
(nothing fetched when complete) → commit the Volume only when this call
downloaded weights or wrote a manifest. No GPU is allocated until it returns:
the dispatcher starts the engine after this answer.

A file lease cannot work between containers, each of which sees its own
view of the Volume until commit and reload (modal/volume.py:496): a snapshot
not yet complete is staged under a lease in a Dict named after the Volume
(``_stage_lease``), whichever container or installation stages it, committed
before the lease is released, and whoever claims it reloads the Volume first
(always: another installation may have staged and released between this
stager's first reload and its claim), so it finds the snapshot complete. The
app runs up to ``STAGER_MAX_CONTAINERS`` stagers, so a stage waiting on
another installation's lease does not hold up the stage of a model that is
already complete.
Under that lease staging's own lease file is a leftover (a killed stager's
background commit publishes one, fresh-looking from another host for 90 s),
so it is removed before staging.
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path

from comfy_llm_core import ExecutionTarget, ProgressCallback, env_str
from comfy_llm_profiles import resolve_profile
from comfy_llm_staging import break_lease, find_completed_snapshot, snapshot_path, stage_snapshot

from ..wire._channel import ProgressChannel
from ..wire._plain import WireDict, WireMapping
from ..wire._settings import FINGERPRINT_ENV
from ..wire._wire import (
    EventSender,
    StageRequest,
    StageResult,
)
from ._container import VolumeStore
from ._serve import serve_input
from ._stage_lease import StageLeases, snapshot_lease

__all__ = ["serve_stage", "stage_model"]

logger = logging.getLogger("comfy_llm_modal_remote")


def stage_model(
    request: StageRequest,
    *,
    storage_root: Path,
    volume: VolumeStore,
    leases: StageLeases,
    progress: ProgressCallback,
) -> StageResult:
    """Resolve and stage one reference on the Volume.

    Args:
        request: The reference to stage.
        storage_root: Where the weight Volume is mounted.
        volume: The weight Volume (committed when something changed).
        leases: The stage leases shared by every installation on the Volume.
        progress: Receives INSPECT and DOWNLOAD events (and "waiting" ones
            while another installation stages the snapshot).

    Returns:
        The profile, the snapshot's relative path and what changed.

    Raises:
        ProfileError: The reference or repository was refused.
        StagingError: The snapshot could not be downloaded or verified.
    """
    started = time.monotonic()
    root = Path(storage_root)
    _reload(volume)
    resolved = resolve_profile(
        request.reference, ExecutionTarget.MODAL, storage_root=root, progress=progress
    )
    profile = resolved.profile
    complete = find_completed_snapshot(
        root, profile.repository, profile.revision, legacy_profile_id=profile.profile_id
    )
    lease = (
        contextlib.nullcontext(None)
        if complete is not None  # nothing to download: no lease needed
        else snapshot_lease(leases, profile.repository, profile.revision, progress=progress)
    )
    with lease as held:
        if held is not None:
            # What another installation committed before this claim: it may have staged
            # and released between this stager's first reload and the claim (no wait).
            _reload(volume)
            if find_completed_snapshot(
                root, profile.repository, profile.revision, legacy_profile_id=profile.profile_id
            ):
                logger.info("Another installation staged %s meanwhile", profile.repository)
        if held is not None and break_lease(
            snapshot_path(root, profile.repository, profile.revision)
        ):  # every stager takes the Dict lease first: a lease file is a leftover
            logger.warning("Removed a leftover staging lease file for %s", profile.repository)
        snapshot = stage_snapshot(
            profile.repository,
            profile.revision,
            storage_root=root,
            profile_id=profile.profile_id,
            progress=progress,
        )
        changed = snapshot.downloaded or resolved.created
        if changed:
            volume.commit()  # before the lease is released: the next holder must see it
    return StageResult(
        profile=profile.to_dict(),
        snapshot=snapshot.path.resolve().relative_to(root.resolve()).as_posix(),
        downloaded=snapshot.downloaded,
        manifest_created=resolved.created,
        committed=changed,
        seconds=round(time.monotonic() - started, 3),
        bytes_downloaded=snapshot.bytes_downloaded,
        code_fingerprint=env_str(FINGERPRINT_ENV) or "",
    )


def _reload(volume: VolumeStore) -> None:
    try:
        volume.reload()
    except RuntimeError as error:  # files open under the mount: stage on this view
        logger.warning("Reloading the weight Volume before staging failed: %s", error)


def serve_stage(
    request_wire: WireMapping,
    channel: ProgressChannel,
    *,
    storage_root: Path,
    volume: VolumeStore,
    leases: StageLeases,
    event_interval: float = 0.2,
) -> WireDict:
    """The stager function's body: wire in, envelope out, progress on ``channel``."""
    sender = EventSender(channel, interval=event_interval)
    try:
        return serve_input(
            lambda: stage_model(
                StageRequest.from_wire(request_wire),
                storage_root=storage_root,
                volume=volume,
                leases=leases,
                progress=sender,
            ).to_wire(),
            channel,
            what="Staging",
            container="staging",
            before_preempted=sender.flush,
        )
    finally:
        sender.flush()
