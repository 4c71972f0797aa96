"""A reference resolved and staged from the fake Hub, as the node's pipeline would.

Tests that drive a backend directly need what ``resolve_and_stage`` gives the
node (a commit-pinned profile and the folder of its completed snapshot)
without the node; this is that pair, through profiles' and staging's public
calls, in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from comfy_llm_core import ExecutionTarget
from comfy_llm_profiles import ModelProfile, resolve_profile
from comfy_llm_staging import stage_snapshot

__all__ = ["staged_profile"]


def staged_profile(
    reference: str,
    target: ExecutionTarget,
    *,
    storage_root: Path,
    endpoint: str,
    backends: Sequence[str] | None = None,
) -> tuple[ModelProfile, Path]:
    """Resolve ``reference`` for ``target`` and stage its snapshot under ``storage_root``."""
    profile = resolve_profile(
        reference, target, storage_root=storage_root, endpoint=endpoint, backends=backends
    ).profile
    snapshot = stage_snapshot(
        profile.repository,
        profile.revision,
        storage_root=storage_root,
        profile_id=profile.profile_id,
        endpoint=endpoint,
    )
    return profile, Path(snapshot.path)
