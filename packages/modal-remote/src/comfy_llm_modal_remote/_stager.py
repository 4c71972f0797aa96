"""The ModelStager's body: the only place on the Modal side that downloads.

Runs on a CPU-only container with the weight Volume and the secret (HF_TOKEN).
resolve the reference for ``modal`` (manifest on the Volume) → stage the
pinned snapshot (nothing fetched when complete) → commit the Volume only when
this call downloaded weights or wrote a manifest. No GPU is allocated until
it returns: the dispatcher starts the engine after this answer.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from comfy_llm_profiles import ExecutionTarget, ProgressCallback, resolve_profile
from comfy_llm_staging import stage_snapshot

from ._container import ProgressChannel, VolumeStore
from ._wire import EventSender, StageRequest, StageResult, error_envelope, ok_envelope

__all__ = ["serve_stage", "stage_model"]


def stage_model(
    request: StageRequest,
    *,
    storage_root: Path,
    volume: VolumeStore,
    progress: ProgressCallback,
) -> StageResult:
    """Resolve and stage one reference on the Volume.

    Args:
        request: The reference to stage.
        storage_root: Where the weight Volume is mounted.
        volume: The weight Volume (committed when something changed).
        progress: Receives INSPECT and DOWNLOAD events.

    Returns:
        The profile, the snapshot's relative path and what changed.

    Raises:
        ProfileError: The reference or repository was refused.
        StagingError: The snapshot could not be downloaded or verified.
    """
    started = time.monotonic()
    root = Path(storage_root)
    resolved = resolve_profile(
        request.reference, ExecutionTarget.MODAL, storage_root=root, progress=progress
    )
    profile = resolved.profile
    snapshot = stage_snapshot(
        profile.repository,
        profile.revision,
        storage_root=root,
        profile_id=profile.profile_id,
        progress=progress,
    )
    changed = snapshot.downloaded or resolved.created
    if changed:
        volume.commit()
    return StageResult(
        profile=profile.to_dict(),
        snapshot=snapshot.path.resolve().relative_to(root.resolve()).as_posix(),
        downloaded=snapshot.downloaded,
        manifest_created=resolved.created,
        committed=changed,
        seconds=round(time.monotonic() - started, 3),
        bytes_downloaded=snapshot.bytes_downloaded,
    )


def serve_stage(
    request_wire: Mapping[str, Any],
    channel: ProgressChannel,
    *,
    storage_root: Path,
    volume: VolumeStore,
    event_interval: float = 0.2,
) -> dict[str, Any]:
    """The stager function's body: wire in, envelope out, progress on ``channel``."""
    sender = EventSender(channel, interval=event_interval)
    try:
        result = stage_model(
            StageRequest.from_wire(request_wire),
            storage_root=storage_root,
            volume=volume,
            progress=sender,
        )
    except Exception as error:
        return error_envelope(error)
    finally:
        sender.flush()
    return ok_envelope(result.to_wire())
