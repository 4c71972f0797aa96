"""The one Hub error translation: huggingface_hub's own failures become one HubError family.

The errors here are the real library's: answers built with huggingface_hub's
HTTP library and raised by its ``hf_raise_for_status``, the way
``hf_hub_download`` raises them (huggingface_hub/utils/_http.py).
"""

from __future__ import annotations

import errno
import pickle
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import ErrorAction
from comfy_llm_profiles import hub_error, hub_request
from comfy_llm_profiles._hub_errors import http_library
from comfy_llm_profiles.errors import (
    HubAccessError,
    HubTimeoutError,
    HubUnavailableError,
    ModelNotFoundError,
)
from huggingface_hub import constants
from huggingface_hub.utils import hf_raise_for_status

URL = "https://hub.example/acme/tiny/resolve/" + "a" * 40 + "/model.safetensors"
SECRET = "hf_EchoedByAMirror123"


@pytest.fixture(autouse=True)
def _no_stored_token(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No token but the one a test passes (huggingface_hub/utils/_auth.py get_token)."""
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))


def _request(**kwargs: Any) -> Any:
    kwargs.setdefault("token", None)
    kwargs.setdefault("what", "files")
    return hub_request("acme/tiny", "a" * 40, endpoint="https://hub.example", **kwargs)


def _library_error(status: int, code: str | None = None) -> Exception:
    http = http_library()
    headers = {"X-Error-Code": code} if code else {}
    headers["X-Error-Message"] = f"Bad credentials Bearer {SECRET}"
    answer = http.Response(status, headers=headers, request=http.Request("GET", URL + "?x=1"))
    with pytest.raises(Exception) as raised:
        hf_raise_for_status(answer)
    return raised.value


@pytest.mark.parametrize(
    ("status", "code", "cls", "kind", "action"),
    [
        (403, "GatedRepo", HubAccessError, "gated", ErrorAction.FIX_INPUT),
        (401, None, HubAccessError, "unauthorized", ErrorAction.FIX_INPUT),
        (403, None, HubAccessError, "forbidden", ErrorAction.FIX_INPUT),
        (404, "RepoNotFound", ModelNotFoundError, "repo_not_found", ErrorAction.FIX_INPUT),
        (404, "RevisionNotFound", ModelNotFoundError, "revision_not_found", ErrorAction.FIX_INPUT),
        (500, None, HubUnavailableError, "unavailable", ErrorAction.RETRY),
        (429, None, HubUnavailableError, "unavailable", ErrorAction.RETRY),
    ],
)
def test_library_http_errors_become_the_family(
    status: int, code: str | None, cls: type, kind: str, action: ErrorAction
) -> None:
    original = _library_error(status, code)
    error = hub_error(original, _request(again="run it again"))
    assert type(error) is cls
    assert (error.kind, error.status, error.action) == (kind, status, action)
    assert error.url == URL  # without the query
    assert (error.repository, error.revision) == ("acme/tiny", "a" * 40)
    text = str(error)
    assert "acme/tiny" in text and "\n" not in text
    assert SECRET not in text  # composed from facts, never from the library's text
    assert pickle.loads(pickle.dumps(error)).kind == kind


def test_refusals_say_where_the_token_goes_and_failures_how_to_try_again() -> None:
    where = "put HF_TOKEN in the Modal secret"
    gated = hub_error(_library_error(403, "GatedRepo"), _request(where_token=where))
    assert gated is not None and where in str(gated)
    assert "accept the model's terms" in str(gated)
    failed = hub_error(_library_error(502), _request(again="stage again to resume"))
    assert failed is not None and str(failed).endswith("then stage again to resume.")
    assert "HTTP 502" in str(failed) and "HF_ENDPOINT" in str(failed)


def test_a_token_that_was_sent_changes_the_fix() -> None:
    refused = hub_error(_library_error(401), _request(token="hf_sent"))
    assert refused is not None and refused.token_provided
    assert "was refused" in str(refused) and "hf_sent" not in str(refused)
    unsent = hub_error(_library_error(401), _request())
    assert unsent is not None and not unsent.token_provided
    assert "no token was sent" in str(unsent)


def test_a_missing_file_the_listing_named_is_the_hubs_fault() -> None:
    error = hub_error(_library_error(404, "EntryNotFound"), _request(missing="unavailable"))
    assert isinstance(error, HubUnavailableError) and error.action is ErrorAction.RETRY
    plain = hub_error(_library_error(404), _request(missing="unavailable"))
    assert isinstance(plain, HubUnavailableError)


def test_a_timeout_anywhere_in_the_chain_is_a_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMFY_MODAL_LLM_HUB_TIMEOUT_SECONDS", "7")
    http = http_library()
    stalled = http.ReadTimeout("timed out", request=http.Request("GET", URL + "?x=1"))
    try:
        try:
            raise stalled
        except Exception as inner:
            raise OSError("An error happened while trying to locate the file") from inner
    except OSError as wrapped:
        error = hub_error(wrapped, _request(again="try once more"))
    assert isinstance(error, HubTimeoutError) and isinstance(error, TimeoutError)
    assert (error.kind, error.url) == ("timeout", URL)
    text = str(error)
    assert "7 s" in text and "COMFY_MODAL_LLM_HUB_TIMEOUT_SECONDS" in text
    assert "try once more" in text


def test_a_broken_connection_is_one_line() -> None:
    http = http_library()
    cut = http.RemoteProtocolError("peer closed\nconnection without response")
    error = hub_error(cut, _request())
    assert isinstance(error, HubUnavailableError)
    assert "RemoteProtocolError: peer closed connection without response" in str(error)
    assert "\n" not in str(error)


@pytest.mark.parametrize(
    "error",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        KeyError("a programming error"),
        RuntimeError("a progress callback cancelled"),
    ],
)
def test_what_is_not_a_hub_failure_is_left_alone(error: Exception) -> None:
    assert hub_error(error, _request()) is None


def test_a_hub_error_is_never_translated_again() -> None:
    first = hub_error(_library_error(500), _request())
    assert first is not None
    assert hub_error(first, _request(what="config.json")) is first
