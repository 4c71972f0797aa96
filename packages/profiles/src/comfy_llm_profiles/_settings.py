"""Environment variables read by this package, in one place.

Everything is read at call time, never at import: huggingface_hub itself
reads HF_ENDPOINT only once, when its constants module first loads, so this
package passes ``endpoint=`` explicitly on every Hub call, taking it from here.
The names are the seed system's, so users keep their settings.
"""

from __future__ import annotations

from dataclasses import dataclass

from comfy_llm_core import InvalidSettingError, check_token, env_float, env_str

__all__ = [
    "DEFAULT_ENDPOINT",
    "DEFAULT_MAX_DOWNLOAD_GB",
    "ENDPOINT_ENV",
    "MAX_DOWNLOAD_ENV",
    "TOKEN_ENVS",
    "ProfileSettings",
    "read_settings",
]

MAX_DOWNLOAD_ENV = "COMFY_MODAL_LLM_MAX_DOWNLOAD_GB"
DEFAULT_MAX_DOWNLOAD_GB = 96.0
TOKEN_ENVS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
ENDPOINT_ENV = "HF_ENDPOINT"
DEFAULT_ENDPOINT = "https://huggingface.co"
_GIB = 1024**3


@dataclass(frozen=True, slots=True)
class ProfileSettings:
    """The settings one resolution uses.

    Attributes:
        max_download_bytes: Largest accepted total of safetensors bytes
            (COMFY_MODAL_LLM_MAX_DOWNLOAD_GB, in GiB, default 96).
        token: The Hub token from HF_TOKEN, else HUGGING_FACE_HUB_TOKEN, else None.
        endpoint: HF_ENDPOINT without a trailing slash, else the public Hub.
    """

    max_download_bytes: int
    token: str | None
    endpoint: str


def _max_download_bytes() -> int:
    gib = env_float(MAX_DOWNLOAD_ENV, DEFAULT_MAX_DOWNLOAD_GB, minimum=0, exclusive_minimum=True)
    return int(gib * _GIB)


def _token() -> str | None:
    for name in TOKEN_ENVS:
        value = env_str(name)
        if value:
            return check_token(value, name)
    return None


def _endpoint() -> str:
    raw = env_str(ENDPOINT_ENV)
    if raw is None:
        return DEFAULT_ENDPOINT
    if not raw.startswith(("http://", "https://")):
        raise InvalidSettingError(
            ENDPOINT_ENV, raw, "an http(s) URL such as https://huggingface.co"
        )
    return raw.rstrip("/")


def read_settings(*, token: str | None = None, endpoint: str | None = None) -> ProfileSettings:
    """Read the settings now, letting explicit arguments win over the environment.

    Args:
        token: A Hub token that overrides HF_TOKEN / HUGGING_FACE_HUB_TOKEN.
        endpoint: A Hub URL that overrides HF_ENDPOINT.

    Returns:
        The settings for one resolution.

    Raises:
        InvalidSettingError: COMFY_MODAL_LLM_MAX_DOWNLOAD_GB is not a positive number,
            or HF_ENDPOINT is not an http(s) URL.
        InvalidTokenError: The token cannot be sent as a header value (a line
            break, a space, a non-ASCII character); its value is never echoed.
    """
    return ProfileSettings(
        max_download_bytes=_max_download_bytes(),
        token=check_token(token, "the token argument") if token and token.strip() else _token(),
        endpoint=endpoint.rstrip("/") if endpoint else _endpoint(),
    )
