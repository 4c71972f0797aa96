"""The Hub's JSON, fetched and checked in one place, trusted only field by field.

Every metadata request comfy-llm makes (model info, a small file such as
config.json) goes through :func:`fetch_bounded`: huggingface_hub's shared HTTP
session (so a user's proxy or client factory still applies), connect and read
timeouts from ``COMFY_MODAL_LLM_HUB_TIMEOUT_SECONDS``, and a byte limit counted
on the bytes actually received (an advertised size is never believed).
:func:`parse_json` refuses nesting deeper than :data:`MAX_JSON_DEPTH` before
the parser sees it; :func:`fetch_model_info` then checks every field it uses:
the commit id, each sibling's name (through ``comfy_llm_core.hub_path_problem``:
one unsafe name refuses the whole repository), size, blob id and LFS record.

:func:`install_hub_timeouts` also bounds every request huggingface_hub itself
makes through that session (file HEAD/GET): a request hook caps each of its
timeouts at the same setting, so no Hub call can wait forever.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from comfy_llm_core import hub_path_problem, quote_untrusted
from huggingface_hub.utils import build_hf_headers, get_session

from comfy_llm_profiles._hub_errors import (
    DEFAULT_HUB_TIMEOUT_SECONDS,
    HUB_TIMEOUT_ENV,
    TOKEN_HINT,
    data_error,
    http_library,
    hub_error,
    hub_request,
    hub_timeout_seconds,
    status_error,
)
from comfy_llm_profiles.errors import HubDataError

__all__ = [
    "CONFIG_MAX_BYTES",
    "DEFAULT_HUB_TIMEOUT_SECONDS",
    "HUB_TIMEOUT_ENV",
    "MAX_JSON_DEPTH",
    "MODEL_INFO_MAX_BYTES",
    "HubFile",
    "HubModelInfo",
    "fetch_bounded",
    "fetch_model_info",
    "hub_timeout_seconds",
    "install_hub_timeouts",
    "parse_json",
]

MODEL_INFO_MAX_BYTES = 16 * 1024**2
CONFIG_MAX_BYTES = 4 * 1024**2
MAX_JSON_DEPTH = 64
MAX_SIBLINGS = 100_000
_MAX_FILE_BYTES = 2**50  # 1 PiB: a larger "size" is a lie
_HEX40 = re.compile(r"[0-9a-fA-F]{40}")
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_TIMEOUT_PARTS = ("connect", "read", "write", "pool")


@dataclass(frozen=True, slots=True)
class HubFile:
    """One file of a repository commit as the model info describes it, checked.

    Attributes:
        path: Repository-relative POSIX path (already proven safe).
        size: Bytes of the real content (the LFS object's for LFS files); None if not given.
        blob_id: The git blob id (40 hex, lower case), if given.
        sha256: The LFS sha256 (64 hex, lower case) for LFS files, else None.
    """

    path: str
    size: int | None
    blob_id: str | None
    sha256: str | None


@dataclass(frozen=True, slots=True)
class HubModelInfo:
    """The checked fields of a model-info answer.

    Attributes:
        repository: ``owner/name`` asked for.
        sha: The 40-hex commit the answer describes (lower case).
        files: Every sibling, in Hub order.
        security_findings: The security scan's flagged files, one line each.
    """

    repository: str
    sha: str
    files: tuple[HubFile, ...]
    security_findings: tuple[str, ...]


def _cap_timeouts(request: Any) -> None:
    """Request hook: no timeout of a Hub request is unset or above the setting."""
    seconds = hub_timeout_seconds()
    current = request.extensions.get("timeout") or {}
    request.extensions["timeout"] = {
        part: seconds if current.get(part) is None else min(float(current[part]), seconds)
        for part in _TIMEOUT_PARTS
    }


def install_hub_timeouts() -> Any:
    """Make huggingface_hub's shared session cap every request's timeouts; return the session.

    Idempotent, and repeated before each use because huggingface_hub recreates
    the session (after a fork, or when a client factory is set).
    """
    session = get_session()
    hooks = session.event_hooks
    if _cap_timeouts not in hooks.get("request", []):
        session.event_hooks = {
            "request": [*hooks.get("request", []), _cap_timeouts],
            "response": list(hooks.get("response", [])),
        }
    return session


def fetch_bounded(
    url: str,
    *,
    repository: str,
    revision: str | None,
    endpoint: str,
    token: str | None,
    what: str,
    max_bytes: int,
    params: Mapping[str, str] | None = None,
    missing: str = "repo_not_found",
    where_token: str = TOKEN_HINT,
    again: str = "try again",
) -> bytes:
    """GET ``url`` with the Hub timeouts, refusing more than ``max_bytes`` of body.

    Args:
        url: The request URL, without query.
        repository: For error messages.
        revision: For error messages.
        endpoint: The Hub endpoint, for error messages.
        token: A Hub token, or None for huggingface_hub's default.
        what: What is fetched ("model info", "config.json").
        max_bytes: The most body bytes accepted.
        params: Query parameters.
        missing: The ``kind`` of a plain 404 (``repo_not_found`` or ``entry_not_found``).
        where_token: Where HF_TOKEN belongs for this caller (a refusal's fix).
        again: How to try again (a transient failure's fix).

    Returns:
        The body.

    Raises:
        HubAccessError: Gated, or a token missing or refused (see ``kind``).
        ModelNotFoundError: No such repository, revision or file (see ``kind``).
        HubTimeoutError: No connection or no data within the timeout.
        HubUnavailableError: The connection failed or broke, or another HTTP error.
        HubDataError: The body is over ``max_bytes``.
    """
    session = install_hub_timeouts()
    http: Any = http_library()
    seconds = hub_timeout_seconds()
    headers = dict(build_hf_headers(token=token))
    headers["Accept-Encoding"] = "identity"
    request = hub_request(
        repository,
        revision,
        endpoint=endpoint,
        what=what,
        token=token,
        where_token=where_token,
        again=again,
        missing=missing,
    )
    received = 0
    chunks: list[bytes] = []
    try:
        with session.stream(
            "GET", url, params=dict(params or {}), headers=headers, timeout=seconds
        ) as response:
            status = int(response.status_code)
            if status >= 400:
                code = response.headers.get("X-Error-Code")
                raise status_error(status, code, url, request)
            for chunk in response.iter_bytes():
                received += len(chunk)
                if received > max_bytes:
                    raise data_error(
                        repository,
                        revision,
                        what=what,
                        field="body",
                        problem=(
                            f"is over the {max_bytes} byte limit (refused after {received} "
                            "bytes received, whatever size the metadata claims)"
                        ),
                    )
                chunks.append(chunk)
    except http.HTTPError as error:  # the transport failed: no answer, or a broken one
        raise hub_error(error, request) or error from None
    return b"".join(chunks)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_json(
    raw: bytes, *, repository: str, revision: str | None, what: str, max_depth: int = MAX_JSON_DEPTH
) -> Any:
    """Parse Hub JSON whose nesting is at most ``max_depth``.

    Raises:
        HubDataError: Not UTF-8, not JSON, or nested too deeply.
    """

    def refuse(problem: str) -> HubDataError:
        return data_error(repository, revision, what=what, field="body", problem=problem)

    brackets = _STRINGS.sub(b"", raw).translate(None, _NOT_BRACKETS)
    depth = deepest = 0
    for byte in brackets:
        depth += 1 if byte in b"[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > max_depth:
                raise refuse(f"is nested more than {max_depth} levels deep")
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except UnicodeDecodeError:
        raise refuse("is not UTF-8 text") from None
    except RecursionError:
        raise refuse(f"is nested more than {max_depth} levels deep") from None
    except ValueError as error:
        raise refuse(f"is not valid JSON ({str(error)[:200]})") from None


class _Fields:
    """Field-by-field checks of one JSON answer, raising errors that name the field."""

    def __init__(self, repository: str, revision: str | None, what: str) -> None:
        self.repository, self.revision, self.what = repository, revision, what

    def fail(self, field: str, problem: str) -> HubDataError:
        return data_error(
            self.repository, self.revision, what=self.what, field=field, problem=problem
        )

    def size(self, value: object, field: str) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(field, f"is {_kind(value)}, not a whole number of bytes")
        if not 0 <= value <= _MAX_FILE_BYTES:
            raise self.fail(field, f"is {value}, outside 0..{_MAX_FILE_BYTES}")
        return value

    def hex_id(self, value: object, field: str, pattern: re.Pattern[str]) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise self.fail(field, f"is {_kind(value)}, not a hexadecimal id")
        return value.lower()


def _kind(value: object) -> str:
    if isinstance(value, str):
        return f"the string {value[:40]!a}"
    return f"a JSON {type(value).__name__}" if value is not None else "null"


def _file(check: _Fields, index: int, sibling: object) -> HubFile:
    where = f"siblings[{index}]"
    if not isinstance(sibling, Mapping):
        raise check.fail(where, f"is {_kind(sibling)}, not an object")
    name = sibling.get("rfilename")
    problem = hub_path_problem(name)
    if problem is not None:
        at = f" at {check.revision}" if check.revision else ""
        raise HubDataError(
            f"Model repository {check.repository!r}{at} lists the file {quote_untrusted(name)}, "
            f"which {problem}: a repository's files must be plain relative paths inside it, "
            "so the whole repository is refused and nothing was downloaded. Pick another "
            "repository.",
            repository=check.repository,
            revision=check.revision,
            what="model info",
            field="siblings[].rfilename",
            problem=problem,
            path=name,
        )
    size = check.size(sibling.get("size"), f"{where}.size")
    blob_id = check.hex_id(sibling.get("blobId"), f"{where}.blobId", _HEX40)
    lfs = sibling.get("lfs")
    sha256 = None
    if lfs is not None:
        if not isinstance(lfs, Mapping):
            raise check.fail(f"{where}.lfs", f"is {_kind(lfs)}, not an object")
        sha256 = check.hex_id(lfs.get("sha256"), f"{where}.lfs.sha256", _HEX64)
        lfs_size = check.size(lfs.get("size"), f"{where}.lfs.size")
        if sha256 is None or lfs_size is None:
            raise check.fail(f"{where}.lfs", "lacks its sha256 or size")
        size = lfs_size
    return HubFile(path=str(name), size=size, blob_id=blob_id, sha256=sha256)


def _file_and_folder(paths: set[str]) -> tuple[str, str] | None:
    """``(x, x/…)`` when a listed file's path is also a folder of another listed file."""
    for path in sorted(paths):
        parts = path.split("/")
        for cut in range(1, len(parts)):
            folder = "/".join(parts[:cut])
            if folder in paths:
                return folder, path
    return None


def _findings(check: _Fields, status: object) -> tuple[str, ...]:
    if status is None:
        return ()
    if not isinstance(status, Mapping):
        raise check.fail("securityRepoStatus", f"is {_kind(status)}, not an object")
    items = status.get("filesWithIssues") or []
    if not isinstance(items, list):
        raise check.fail("securityRepoStatus.filesWithIssues", f"is {_kind(items)}, not a list")
    findings = []
    for item in items[:1000]:
        if isinstance(item, Mapping):
            level = item.get("level") or item.get("status") or "flagged"
            findings.append(
                f"{ascii(item.get('path', '?'))[1:-1][:200]} ({ascii(level)[1:-1][:40]})"
            )
        else:
            findings.append(ascii(item)[:200])
    return tuple(findings)


def fetch_model_info(
    repository: str,
    revision: str | None,
    *,
    endpoint: str,
    token: str | None,
    security: bool = False,
    where_token: str = TOKEN_HINT,
    again: str = "try again",
) -> HubModelInfo:
    """Fetch and check the model info (with file metadata) of ``repository`` at ``revision``.

    Args:
        repository: ``owner/name`` (already validated).
        revision: A branch, tag or commit; None for the default branch.
        endpoint: The Hub endpoint, without a trailing slash.
        token: A Hub token, or None for huggingface_hub's default.
        security: Also ask for the security scan's findings.
        where_token: Where HF_TOKEN belongs for this caller (a refusal's fix).
        again: How to try again (a transient failure's fix).

    Returns:
        The checked answer.

    Raises:
        HubAccessError, ModelNotFoundError: Refused, or missing (see ``kind``).
        HubTimeoutError, HubUnavailableError: The Hub stalled or could not be reached.
        HubDataError: Oversized, too deep, a field of the wrong type or range, or a
            sibling's name that is not a safe relative path (kind ``unsafe_path``).
    """
    what = "model info"
    url = f"{endpoint}/api/models/{repository}"
    if revision is not None:
        url += f"/revision/{quote(revision, safe='')}"
    params = {"blobs": "true"}
    if security:
        params["securityStatus"] = "true"
    raw = fetch_bounded(
        url,
        repository=repository,
        revision=revision,
        endpoint=endpoint,
        token=token,
        what=what,
        max_bytes=MODEL_INFO_MAX_BYTES,
        params=params,
        where_token=where_token,
        again=again,
    )
    payload = parse_json(raw, repository=repository, revision=revision, what=what)
    check = _Fields(repository, revision, what)
    if not isinstance(payload, Mapping):
        raise check.fail("body", f"is {_kind(payload)}, not an object")
    sha = payload.get("sha")
    if not isinstance(sha, str) or not _HEX40.fullmatch(sha):
        raise check.fail("sha", f"is {_kind(sha)}, not a 40-hex commit id")
    siblings = payload.get("siblings")
    if not isinstance(siblings, list):
        raise check.fail("siblings", f"is {_kind(siblings)}, not a list")
    if len(siblings) > MAX_SIBLINGS:
        raise check.fail("siblings", f"lists {len(siblings)} files, over {MAX_SIBLINGS}")
    files = tuple(_file(check, index, sibling) for index, sibling in enumerate(siblings))
    seen: set[str] = set()
    for file in files:
        if file.path in seen:
            raise check.fail("siblings", f"lists {ascii(file.path)[:120]} twice")
        seen.add(file.path)
    clash = _file_and_folder(seen)
    if clash is not None:  # on disk one of them could not be written ([Errno 21] / [Errno 20])
        folder, inside = clash
        problem = (
            f"is also the folder of the file {quote_untrusted(inside)} it lists (a path "
            "cannot be a file and a folder at once)"
        )
        at = f" at {revision}" if revision else ""
        raise HubDataError(
            f"Model repository {repository!r}{at} lists the file {quote_untrusted(folder)}, "
            f"which {problem}: a repository's files must be plain relative paths inside it, "
            "so the whole repository is refused and nothing was downloaded. Pick another "
            "repository.",
            repository=repository,
            revision=revision,
            what="model info",
            field="siblings[].rfilename",
            problem=problem,
            path=folder,
        )
    findings = _findings(check, payload.get("securityRepoStatus")) if security else ()
    return HubModelInfo(
        repository=repository, sha=sha.lower(), files=files, security_findings=findings
    )
