"""A reference resolved and staged from the fake Hub, as the node's pipeline would.

Tests that drive a backend directly need what ``resolve_and_stage`` gives the
node (a commit-pinned profile and the folder of its completed snapshot)
without the node; this is that pair, through profiles' and staging's public
calls, in one place. :func:`hub_online` lets such staging run where the
Hub's offline switch is set (the GPU check sets it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from comfy_llm_core import ExecutionTarget
from comfy_llm_profiles import ModelProfile, resolve_profile
from comfy_llm_staging import stage_snapshot

if TYPE_CHECKING:
    import pytest

__all__ = ["hub_online", "staged_profile"]


def hub_online(patch: pytest.MonkeyPatch) -> None:
    """Turn the Hub's offline switch off under ``patch``, for staging from the fake Hub.

    huggingface_hub reads ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) once,
    on import, into ``constants.HF_HUB_OFFLINE``; profiles reads the variables
    on each call. Both are turned off, so a loopback fake Hub is reachable.
    """
    import huggingface_hub.constants

    patch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        patch.delenv(name, raising=False)


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
