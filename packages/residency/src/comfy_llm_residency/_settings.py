"""Every environment variable the residency package reads, in one place.

The names are the seed system's, so users moving over keep their settings.
They are read through ``comfy_llm_core.env_*``: an empty value counts as
unset; an invalid one raises :class:`comfy_llm_core.InvalidSettingError`
naming the variable.
"""

from __future__ import annotations

from comfy_llm_core import ExecutionTarget, InvalidSettingError, defaults, env_float, env_int

LOCAL_MAX_RESIDENT_ENV = "COMFY_MODAL_LOCAL_LLM_MAX_RESIDENT_MODELS"
"""LRU limit for ``local_apple`` and ``local_cpu``."""

MAX_RESIDENT_ENV = "COMFY_MODAL_LLM_MAX_RESIDENT_MODELS"
"""LRU limit for ``local_cuda`` and ``modal``."""

LOCAL_RESERVE_ENV = "COMFY_MODAL_LOCAL_LLM_RESERVE_FREE_GB"
"""Reserve (GiB) for local calls (``local_apple``, ``local_cpu``, ``local_cuda``) that omit one."""

MODAL_RESERVE_ENV = "COMFY_MODAL_LLM_RESERVE_FREE_GB"
"""Reserve (GiB) for ``modal`` calls that omit one."""

RECOVERY_TIMEOUT_ENV = "COMFY_MODAL_LLM_MEMORY_RECOVERY_TIMEOUT_SECONDS"
"""How long admission polls for an evicted model's memory to come back."""

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

    ``reserve_free_vram_gb`` keeps the seed node's meaning, the Modal GPU's
    reserve; every local target, a local NVIDIA GPU included, takes
    ``local_reserve_free_memory_gb``.

    Args:
        target: The execution target.

    Returns:
        ``"local_reserve_free_memory_gb"`` or ``"reserve_free_vram_gb"``.
    """
    return (
        "reserve_free_vram_gb"
        if target is ExecutionTarget.MODAL
        else "local_reserve_free_memory_gb"
    )


def max_resident_models(target: ExecutionTarget | str) -> int:
    """The LRU limit for ``target`` from the environment.

    ``local_apple``/``local_cpu`` read ``COMFY_MODAL_LOCAL_LLM_MAX_RESIDENT_MODELS``;
    ``local_cuda``/``modal`` read ``COMFY_MODAL_LLM_MAX_RESIDENT_MODELS``. The
    defaults are ``comfy_llm_core.defaults.MAX_RESIDENT_MODELS``.

    Args:
        target: The execution target.

    Returns:
        The limit, at least 1.

    Raises:
        InvalidSettingError: When the variable is not an integer >= 1.
    """
    target = coerce_target(target)
    default = defaults.MAX_RESIDENT_MODELS[target.value]
    return env_int(max_resident_env_name(target), default, minimum=1)


def reserve_env_name(target: ExecutionTarget) -> str:
    """The environment variable holding the default reserve for ``target``.

    Args:
        target: The execution target.

    Returns:
        ``COMFY_MODAL_LLM_RESERVE_FREE_GB`` for ``modal``, else
        ``COMFY_MODAL_LOCAL_LLM_RESERVE_FREE_GB``.
    """
    return MODAL_RESERVE_ENV if target == ExecutionTarget.MODAL else LOCAL_RESERVE_ENV


def default_reserve_gb(target: ExecutionTarget | str) -> float:
    """The reserve (GiB) used when a call omits one.

    Read from :func:`reserve_env_name`'s variable; the defaults are
    ``comfy_llm_core.defaults.RESERVE_GB`` (4 GiB locally, 24 GiB on Modal).

    Args:
        target: The execution target.

    Returns:
        The reserve in GiB, at least 0.

    Raises:
        InvalidSettingError: When the variable is not a finite number >= 0.
    """
    target = coerce_target(target)
    default = defaults.RESERVE_GB[target.value]
    return env_float(reserve_env_name(target), default, minimum=0.0)


def memory_recovery_timeout_seconds() -> float:
    """How long admission polls for an evicted model's memory to come back (seconds).

    Returns:
        ``COMFY_MODAL_LLM_MEMORY_RECOVERY_TIMEOUT_SECONDS``, else
        ``comfy_llm_core.defaults.MEMORY_RECOVERY_TIMEOUT_SECONDS``.

    Raises:
        InvalidSettingError: When the variable is not a finite number >= 0.
    """
    return env_float(RECOVERY_TIMEOUT_ENV, defaults.MEMORY_RECOVERY_TIMEOUT_SECONDS, minimum=0.0)
