"""The ModelStager's body: the only place on the Modal side that downloads.

Runs on a CPU-only container with the weight Volume and the secret (HF_TOKEN).
reload the Volume (see what other containers committed) → resolve the
reference for ``modal`` (manifest on the Volume) → stage the pinned snapshot
(nothing fetched when complete) → commit the Volume only when this call
downloaded weights or wrote a manifest. No GPU is allocated until it returns:
the dispatcher starts the engine after this answer.

Staging is serialized across containers by the app (``max_containers=1`` on
the stager): a file lease cannot work between containers, each of which sees
its own view of the Volume until commit and reload (modal/volume.py:496).
Two overlapping prompts therefore stage one after the other in one
container, and the second finds the first's snapshot complete.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from comfy_llm_core import env_str
from comfy_llm_profiles import ExecutionTarget, ProgressCallback, resolve_profile
from comfy_llm_staging import stage_snapshot

from ._container import ProgressChannel, VolumeStore
from ._settings import FINGERPRINT_ENV
from ._wire import EventSender, StageRequest, StageResult, error_envelope, ok_envelope

__all__ = ["serve_stage", "stage_model"]

logger = logging.getLogger("comfy_llm_modal_remote")


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
    try:
        volume.reload()
    except RuntimeError as error:  # files open under the mount: stage on this view
        logger.warning("Reloading the weight Volume before staging failed: %s", error)
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
        code_fingerprint=env_str(FINGERPRINT_ENV) or "",
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
