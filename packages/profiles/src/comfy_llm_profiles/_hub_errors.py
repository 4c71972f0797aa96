"""Every failed Hub request becomes one :class:`~comfy_llm_profiles.errors.HubError`, here.

An HTTP error answer (its status and the Hub's ``X-Error-Code``), a transport
failure of huggingface_hub's HTTP library (a timeout anywhere in the chain of
causes is a timeout) and huggingface_hub's own HTTP errors are turned into the
family's classes by :func:`hub_error` and :func:`status_error`, which compose
the message: it names the repository, what was asked, the limit and the fix.
The caller only says what its request was for (:class:`HubRequest`): where a
token belongs for it and how to try again. Nobody translates these errors
again, and nobody reads their text.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from comfy_llm_core import env_float
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.utils import build_hf_headers, get_session

from comfy_llm_profiles.errors import (
    HubAccessError,
    HubDataError,
    HubError,
    HubTimeoutError,
    HubUnavailableError,
    ModelNotFoundError,
    OfflineResolutionError,
)

__all__ = [
    "DEFAULT_HUB_TIMEOUT_SECONDS",
    "HUB_TIMEOUT_ENV",
    "TOKEN_HINT",
    "HubRequest",
    "data_error",
    "http_library",
    "hub_error",
    "hub_request",
    "hub_timeout_seconds",
    "offline_error",
    "offline_gguf_error",
    "status_error",
    "timeout_error",
    "unavailable_error",
]

HUB_TIMEOUT_ENV = "COMFY_MODAL_LLM_HUB_TIMEOUT_SECONDS"
DEFAULT_HUB_TIMEOUT_SECONDS = 30.0
TOKEN_HINT = (
    "make HF_TOKEN (a read token of an account with access) visible to the stager: "
    "ComfyUI's environment for local runs, the Modal secret for remote runs"
)
"""Where HF_TOKEN belongs when the caller does not know the execution target."""

_CODES = {
    "GatedRepo": "gated",
    "RepoNotFound": "repo_not_found",
    "RevisionNotFound": "revision_not_found",
    "EntryNotFound": "entry_not_found",
}


def hub_timeout_seconds() -> float:
    """The connect/read timeout of every Hub request (``COMFY_MODAL_LLM_HUB_TIMEOUT_SECONDS``).

    Raises:
        InvalidSettingError: Not a number above 0 and at most 3600.
    """
    return env_float(
        HUB_TIMEOUT_ENV,
        DEFAULT_HUB_TIMEOUT_SECONDS,
        minimum=0.0,
        maximum=3600.0,
        exclusive_minimum=True,
    )


@dataclass(frozen=True, slots=True)
class HubRequest:
    """What one Hub request was for: the facts every error about it names.

    Attributes:
        repository: ``owner/name``.
        revision: The revision asked for (None for the default branch).
        endpoint: The Hub endpoint.
        what: What was asked (``"model info"``, ``"config.json"``, ``"files"``).
        token_provided: Whether a token was sent.
        where_token: The fix for a refusal: where HF_TOKEN belongs for this caller.
        again: The fix for a transient failure: how to try again.
        missing: The ``kind`` of a 404, and of a Hub ``EntryNotFound``, for this
            request (``repo_not_found``, ``entry_not_found``, or ``unavailable``
            for a file the Hub's own listing named).
    """

    repository: str
    revision: str | None
    endpoint: str
    what: str
    token_provided: bool
    where_token: str = TOKEN_HINT
    again: str = "try again"
    missing: str = "repo_not_found"


def hub_request(
    repository: str,
    revision: str | None,
    *,
    endpoint: str,
    what: str,
    token: str | None,
    where_token: str = TOKEN_HINT,
    again: str = "try again",
    missing: str = "repo_not_found",
) -> HubRequest:
    """A :class:`HubRequest`; ``token_provided`` as huggingface_hub sends ``token``."""
    sent = "authorization" in build_hf_headers(token=token)
    return HubRequest(repository, revision, endpoint, what, sent, where_token, again, missing)


def http_library() -> Any:
    """The HTTP library behind huggingface_hub's session (httpx in 1.x, httpx2 in 2.x)."""
    return importlib.import_module(type(get_session()).__module__.split(".")[0])


def _at(request: HubRequest) -> str:
    return f" at {request.revision}" if request.revision else ""


def status_error(status: int, code: str | None, url: str, request: HubRequest) -> HubError:
    """The error for an HTTP error answer, by its status and the Hub's ``X-Error-Code``."""
    kind = _CODES.get(code or "") or {401: "unauthorized", 403: "forbidden"}.get(status)
    if kind is None:
        kind = request.missing if status == 404 else "unavailable"
    if kind == "entry_not_found" and request.missing == "unavailable":
        kind = "unavailable"  # a file the Hub's own listing named: the Hub's fault
    repo, sent, where = repr(request.repository), request.token_provided, request.where_token
    cls: type[HubError] = ModelNotFoundError
    if kind == "gated":
        cls = HubAccessError
        fix = (
            "the token that was sent has no access: accept the model's terms on its Hub page "
            f"with the token's account, or use another token ({where})"
            if sent
            else f"accept the model's terms on its Hub page, then {where}"
        )
        message = (
            f"Model repository {repo} is gated on the Hugging Face Hub and needs an access "
            f"token: {fix}."
        )
    elif kind in ("unauthorized", "forbidden"):
        cls = HubAccessError
        fix = (
            "the token in HF_TOKEN was refused: it may be expired, revoked or lack read "
            "access; create a new read token at https://huggingface.co/settings/tokens"
            if sent
            else f"no token was sent: {where}"
        )
        message = f"The Hub refused access to {repo} (HTTP {status}): {fix}."
    elif kind == "repo_not_found":
        hint = "the token that was sent cannot see it" if sent else f"a token must be sent: {where}"
        message = (
            f"Model repository {repo} was not found or is private on the Hugging Face Hub. "
            f"Check the spelling (owner/model, case-sensitive); if it is private, {hint}."
        )
    elif kind == "revision_not_found":
        message = (
            f"Revision {request.revision!r} was not found in model repository {repo}: it does "
            "not exist there (the repository itself exists; a force-push can remove a commit). "
            "Use an existing branch, tag or 40-character commit (resolving a branch again pins "
            f"its current commit), or drop '@{request.revision}' to use the default branch."
        )
    elif kind == "entry_not_found":
        message = (
            f"Model repository {repo}{_at(request)} has no {request.what} on the Hub. Pick a "
            "repository or revision that has it."
        )
    else:
        return unavailable_error(request, f"HTTP {status} for {url}", status=status, url=url)
    return cls(
        message,
        repository=request.repository,
        revision=request.revision,
        kind=kind,
        endpoint=request.endpoint,
        status=status,
        url=url,
        token_provided=sent,
    )


def unavailable_error(
    request: HubRequest, detail: str, *, status: int | None = None, url: str | None = None
) -> HubUnavailableError:
    """The Hub could not be reached, failed, or answered something unusable: try again."""
    return HubUnavailableError(
        f"Could not get the {request.what} of {request.repository!r}{_at(request)} from "
        f"{request.endpoint}: {detail}. Check the network, or set HF_ENDPOINT to a reachable "
        f"Hugging Face mirror, then {request.again}.",
        repository=request.repository,
        revision=request.revision,
        kind="unavailable",
        endpoint=request.endpoint,
        status=status,
        url=url,
        token_provided=request.token_provided,
    )


def timeout_error(request: HubRequest, url: str, seconds: float) -> HubTimeoutError:
    """A request that got no connection or no data within the Hub timeout."""
    return HubTimeoutError(
        f"The Hub at {request.endpoint} did not answer {url} within {seconds:g} s "
        f"(connect/read timeout {HUB_TIMEOUT_ENV}). Check the network or HF_ENDPOINT "
        f"(mirror), then {request.again}; on a slow link raise {HUB_TIMEOUT_ENV}.",
        repository=request.repository,
        revision=request.revision,
        kind="timeout",
        endpoint=request.endpoint,
        url=url,
        token_provided=request.token_provided,
    )


def data_error(
    repository: str, revision: str | None, *, what: str, field: str, problem: str
) -> HubDataError:
    """The Hub's answer cannot be used: ``field`` (a JSON path, or ``body``) ``problem``."""
    at = f" at {revision}" if revision else ""
    return HubDataError(
        f"The Hub's {what} for {repository!r}{at} cannot be used: {field} {problem}. The "
        "repository (or the HF_ENDPOINT mirror) serves malformed metadata; pick another "
        "repository or revision.",
        repository=repository,
        revision=revision,
        what=what,
        field=field,
        problem=problem,
    )


def offline_error(
    repository: str, revision: str | None, endpoint: str, reason: str
) -> OfflineResolutionError:
    """A reference never resolved here, while ``reason`` (HF_HUB_OFFLINE, no network) holds."""
    shown = f"{repository}@{revision}" if revision else repository
    return OfflineResolutionError(
        f"{shown} was never resolved on this machine and {reason}, so its files cannot be "
        "found: unset HF_HUB_OFFLINE (or reconnect) once to resolve it, or pick a model "
        "already staged or a local folder.",
        repository=repository,
        revision=revision,
        kind="offline",
        endpoint=endpoint,
    )


def offline_gguf_error(
    reference: str,
    repository: str,
    commit: str,
    *,
    quantization: str,
    staged: Sequence[str],
    endpoint: str,
    reason: str,
) -> OfflineResolutionError:
    """A GGUF quantization not staged here, while ``reason`` keeps the Hub out of reach."""
    if staged:
        others = ", ".join(f"{repository}@{commit}:{name}" for name in staged)
        have = f"staged here: {', '.join(staged)}; or run a staged one ({others})"
    else:
        have = "no quantization of it is staged here"
    return OfflineResolutionError(
        f"{reference} needs quantization {quantization} of commit {commit[:12]}, which was "
        f"never downloaded here, and {reason}: unset HF_HUB_OFFLINE (or reconnect) once "
        f"to download it ({have}).",
        repository=repository,
        revision=commit,
        kind="offline",
        endpoint=endpoint,
    )


def _chain(error: BaseException) -> list[BaseException]:
    """``error`` and the errors it was raised from, innermost last."""
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen and len(seen) < 16:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _url(failed: object) -> str | None:
    """The URL (without its query) of the request an error or a response was about, if known."""
    try:
        return str(failed.request.url.copy_with(query=None))  # type: ignore[attr-defined]
    except Exception:  # the library did not record the request
        return None


def hub_error(error: BaseException, request: HubRequest) -> HubError | None:
    """The :class:`HubError` for a failed Hub request, or None when ``error`` is not one.

    A local disk error (an ``OSError`` with an errno), a progress callback's
    cancellation or a programming error is not a Hub failure: None, and the
    caller lets it through unchanged.
    """
    if isinstance(error, HubError):
        return error
    http = http_library()
    stalled = next((e for e in _chain(error) if isinstance(e, http.TimeoutException)), None)
    if stalled is not None:
        return timeout_error(request, _url(stalled) or request.endpoint, hub_timeout_seconds())
    if isinstance(error, HfHubHTTPError):
        response = error.response
        url = _url(response) or request.endpoint
        return status_error(
            int(response.status_code), response.headers.get("X-Error-Code"), url, request
        )
    if isinstance(error, OSError) and error.errno:
        return None  # a local disk error: the caller decides (ENOSPC is a full disk)
    if isinstance(error, OSError | http.HTTPError):
        lines = " ".join(str(error).split()) or "no detail"
        detail = f"{type(error).__name__}: {lines[:500]}"
        return unavailable_error(
            request, f"the connection for the {request.what} failed ({detail})"
        )
    return None
