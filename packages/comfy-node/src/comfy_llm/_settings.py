"""Environment variables read by the node and CLI, in one place.

Lower packages read their own variables (profiles: HF_TOKEN, HF_ENDPOINT,
COMFY_MODAL_LLM_MAX_DOWNLOAD_GB; staging: COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT
and the lease timeout; residency: the resident-model limits and reserves).
"""

from __future__ import annotations

from comfy_llm_core import env_str

__all__ = ["TARGET_ENV", "forced_target"]

TARGET_ENV = "COMFY_LLM_EXECUTION_TARGET"
"""Forces the local execution target (``local_apple``, ``local_cuda`` or
``local_cpu``), e.g. to run the MLX-VLM path through ``mlx[cpu]`` on Linux."""


def forced_target() -> str | None:
    """Return the target forced through ``COMFY_LLM_EXECUTION_TARGET``, if any."""
    return env_str(TARGET_ENV)
