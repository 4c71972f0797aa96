"""Every environment variable the residency package reads, in one place.

The names are the seed system's, so users moving over keep their settings.
They are read through ``comfy_llm_core.env_*``: an empty value counts as
unset; an invalid one raises :class:`comfy_llm_core.InvalidSettingError`
naming the variable.
"""

from __future__ import annotations

from comfy_llm_core import InvalidSettingError, env_float, env_int
from comfy_llm_profiles import ExecutionTarget

LOCAL_MAX_RESIDENT_ENV = "COMFY_MODAL_LOCAL_LLM_MAX_RESIDENT_MODELS"
"""LRU limit for ``local_apple`` and ``local_cpu`` (default 1)."""

MAX_RESIDENT_ENV = "COMFY_MODAL_LLM_MAX_RESIDENT_MODELS"
"""LRU limit for ``local_cuda`` and ``modal`` (default 2)."""

LOCAL_RESERVE_ENV = "COMFY_MODAL_LOCAL_LLM_RESERVE_FREE_GB"
"""Default reserve (GiB) for ``local_apple``/``local_cpu`` calls that omit one (default 4)."""

RECOVERY_TIMEOUT_ENV = "COMFY_MODAL_LLM_MEMORY_RECOVERY_TIMEOUT_SECONDS"
"""How long admission polls for memory to come back after freeing (default 15)."""

DEFAULT_LOCAL_MAX_RESIDENT = 1
DEFAULT_MAX_RESIDENT = 2
DEFAULT_LOCAL_RESERVE_GB = 4.0
DEFAULT_VRAM_RESERVE_GB = 2.0
"""Default ``reserve_free_vram_gb`` for ``local_cuda``/``modal`` calls that omit one.

The seed has no environment variable for it; the node passes its own input.
Two GiB leaves room for activations of a following image/video node.
"""
DEFAULT_RECOVERY_TIMEOUT_SECONDS = 15.0

_UNIFIED_MEMORY_TARGETS = frozenset({ExecutionTarget("local_apple"), ExecutionTarget("local_cpu")})


def coerce_target(target: ExecutionTarget | str) -> ExecutionTarget:
    """Return ``target`` as an :class:`ExecutionTarget`.

    Args:
        target: An execution target or its string value.

    Returns:
        The execution target.

    Raises:
        InvalidSettingError: When ``target`` names no known target.
    """
    try:
        return ExecutionTarget(target)
    except ValueError:
        known = ", ".join(t.value for t in ExecutionTarget)
        raise InvalidSettingError("target", target, f"one of {known}") from None


def uses_host_memory(target: ExecutionTarget) -> bool:
    """Whether ``target`` loads into host/unified memory (psutil) rather than VRAM.

    Args:
        target: The execution target.

    Returns:
        True for ``local_apple`` and ``local_cpu``.
    """
    return target in _UNIFIED_MEMORY_TARGETS


def max_resident_env_name(target: ExecutionTarget) -> str:
    """The environment variable holding the LRU limit for ``target``.

    Args:
        target: The execution target.

    Returns:
        The variable name.
    """
    return LOCAL_MAX_RESIDENT_ENV if uses_host_memory(target) else MAX_RESIDENT_ENV


def reserve_input_name(target: ExecutionTarget) -> str:
    """The node input that sets the reserve for ``target`` (used in messages).

    Args:
        target: The execution target.

    Returns:
        ``"local_reserve_free_memory_gb"`` or ``"reserve_free_vram_gb"``.
    """
    return "local_reserve_free_memory_gb" if uses_host_memory(target) else "reserve_free_vram_gb"


def max_resident_models(target: ExecutionTarget) -> int:
    """The LRU limit for ``target`` from the environment.

    ``local_apple``/``local_cpu`` read ``COMFY_MODAL_LOCAL_LLM_MAX_RESIDENT_MODELS``
    (default 1); ``local_cuda``/``modal`` read ``COMFY_MODAL_LLM_MAX_RESIDENT_MODELS``
    (default 2).

    Args:
        target: The execution target.

    Returns:
        The limit, at least 1.

    Raises:
        InvalidSettingError: When the variable is not an integer >= 1.
    """
    if uses_host_memory(target):
        return env_int(LOCAL_MAX_RESIDENT_ENV, DEFAULT_LOCAL_MAX_RESIDENT, minimum=1)
    return env_int(MAX_RESIDENT_ENV, DEFAULT_MAX_RESIDENT, minimum=1)


def default_reserve_gb(target: ExecutionTarget) -> float:
    """The reserve (GiB) used when a call omits one.

    ``local_apple``/``local_cpu``: ``COMFY_MODAL_LOCAL_LLM_RESERVE_FREE_GB``
    (default 4). ``local_cuda``/``modal``: :data:`DEFAULT_VRAM_RESERVE_GB`.

    Args:
        target: The execution target.

    Returns:
        The reserve in GiB, at least 0.

    Raises:
        InvalidSettingError: When the variable is not a finite number >= 0.
    """
    if uses_host_memory(target):
        return env_float(LOCAL_RESERVE_ENV, DEFAULT_LOCAL_RESERVE_GB, minimum=0.0)
    return DEFAULT_VRAM_RESERVE_GB


def memory_recovery_timeout_seconds() -> float:
    """How long admission polls for memory to come back (seconds).

    Returns:
        ``COMFY_MODAL_LLM_MEMORY_RECOVERY_TIMEOUT_SECONDS``, default 15.

    Raises:
        InvalidSettingError: When the variable is not a finite number >= 0.
    """
    return env_float(RECOVERY_TIMEOUT_ENV, DEFAULT_RECOVERY_TIMEOUT_SECONDS, minimum=0.0)
