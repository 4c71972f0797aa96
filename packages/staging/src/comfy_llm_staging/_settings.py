"""Every environment variable staging reads, read at call time, in one place.

The staging names are the seed system's, so users moving over keep their settings:

- ``COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT``: where snapshots live (wins over the
  ComfyUI models folder and the per-user cache).
- ``COMFY_MODAL_LLM_STAGE_LEASE_TIMEOUT_SECONDS``: how long a stager waits for
  another stager of the same snapshot before giving up (default 3600).
- ``XDG_CACHE_HOME`` (Linux) / ``LOCALAPPDATA`` (Windows): the per-user cache
  folder used when neither of the above applies.
- ``HF_ENDPOINT``: the Hub or mirror to download from. huggingface_hub reads it
  only when first imported, so staging reads it on every call and passes it
  explicitly.
- ``HF_TOKEN`` / ``HUGGING_FACE_HUB_TOKEN``: checked here (a token that cannot
  be a header value is refused without echoing it), then passed explicitly.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

from comfy_llm_core import TOKEN_ENVS, InvalidSettingError, check_token, env_float, env_str

STORAGE_ROOT_ENV = "COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT"
LEASE_TIMEOUT_ENV = "COMFY_MODAL_LLM_STAGE_LEASE_TIMEOUT_SECONDS"
HF_ENDPOINT_ENV = "HF_ENDPOINT"

DEFAULT_LEASE_TIMEOUT_SECONDS = 3600.0
DEFAULT_HUB_ENDPOINT = "https://huggingface.co"

LEASE_HEARTBEAT_SECONDS = 5.0
"""How often a lease holder refreshes its heartbeat."""

LEASE_STALE_AFTER_SECONDS = 90.0
"""A lease whose heartbeat is older than this is abandoned, whatever its pid."""

DISK_MARGIN_BYTES = 256 * 1024**2
"""Free space kept in reserve beyond the files still to download."""


def storage_root_override() -> Path | None:
    """Return the storage root from ``COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT``, if set.

    Returns:
        The expanded path, or None when the variable is unset or blank.
    """
    value = env_str(STORAGE_ROOT_ENV)
    return Path(value).expanduser() if value else None


def lease_timeout_seconds(explicit: float | None = None) -> float:
    """Return how long to wait for another stager's lease.

    Args:
        explicit: A value from the caller; wins over the environment.

    Returns:
        Seconds, positive and finite.

    Raises:
        InvalidSettingError: The value is not a positive finite number.
    """
    if explicit is None:
        return env_float(
            LEASE_TIMEOUT_ENV, DEFAULT_LEASE_TIMEOUT_SECONDS, minimum=0, exclusive_minimum=True
        )
    if not (math.isfinite(explicit) and explicit > 0):
        raise InvalidSettingError(
            "lease_timeout_seconds", explicit, "a positive number of seconds, e.g. 3600"
        )
    return float(explicit)


def hub_endpoint(explicit: str | None = None) -> str:
    """Return the Hub endpoint for this call.

    Args:
        explicit: An endpoint from the caller; wins over ``HF_ENDPOINT``.

    Returns:
        The endpoint URL without a trailing slash.
    """
    value = (explicit or "").strip() or env_str(HF_ENDPOINT_ENV, DEFAULT_HUB_ENDPOINT)
    return str(value).rstrip("/")


def hub_token(explicit: str | None = None) -> str | None:
    """Return the Hub token for this call, checked, or None for none.

    Args:
        explicit: A token from the caller; wins over the environment.

    Raises:
        InvalidTokenError: The token has a line break, a space, a control or a
            non-ASCII character (the message never echoes it).
    """
    if explicit is not None and explicit.strip():
        return check_token(explicit, "the token argument")
    for name in TOKEN_ENVS:
        value = env_str(name)
        if value:
            return check_token(value, name)
    return None


def user_cache_dir() -> Path:
    """Return the platform's per-user cache directory.

    Returns:
        ``$XDG_CACHE_HOME`` (absolute) or ``~/.cache`` on Linux and other
        Unixes, ``~/Library/Caches`` on macOS, ``%LOCALAPPDATA%`` on Windows.
    """
    if sys.platform == "win32":
        local = env_str("LOCALAPPDATA")
        return Path(local) if local else Path.home() / "AppData" / "Local"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches"
    xdg = env_str("XDG_CACHE_HOME")
    return Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
