"""URL routing of the fake Hub: turns one request into one response, without sockets.

The responses follow what huggingface_hub 1.x/2.x reads: the model-info JSON, the
paginated tree listing, HEAD/GET on ``/resolve`` with ranges, and errors that it
maps to exception classes through the ``X-Error-Code`` header.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlencode

from ._fake_hub_repo import Commit, Repo

__all__ = ["Response", "RouteContext", "route"]

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


@dataclass
class Response:
    """What the handler writes back, plus what the request log wants to know."""

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    repo_id: str | None = None
    revision: str | None = None
    filename: str | None = None


@dataclass(frozen=True)
class RouteContext:
    """A consistent view of the hub's state for one request."""

    endpoint: str
    repos: Mapping[str, Repo]
    valid_tokens: frozenset[str]
    tree_page_size: int


def _json(status: int, payload: Any, extra: list[tuple[str, str]] | None = None) -> Response:
    body = json.dumps(payload).encode()
    headers = [("Content-Type", "application/json; charset=utf-8"), *(extra or [])]
    return Response(status, headers, body)


def _error(status: int, code: str | None, message: str, **extra: str) -> Response:
    headers = [("X-Error-Message", message)]
    if code is not None:
        headers.insert(0, ("X-Error-Code", code))
    headers += list(extra.items())
    return _json(status, {"error": message}, headers)


def _bearer(headers: Mapping[str, str]) -> str | None:
    value = headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _denied(
    ctx: RouteContext, repo: Repo | None, repo_id: str, headers: Mapping[str, str], *, files: bool
) -> Response | None:
    """Apply the Hub's access rules; None means the request may proceed.

    Unknown and private repos look alike (401 without a token, 404 with one) so
    a test cannot learn more than the real Hub would tell. Gating only guards
    file content: the real Hub serves metadata of gated repos to everyone.
    """
    token = _bearer(headers)
    authorized = token is not None and token in ctx.valid_tokens
    if repo is None or (repo.private and not authorized):
        message = "Repository not found"
        return _error(404 if token else 401, "RepoNotFound", message)
    if files and repo.gated and not authorized:
        message = (
            f"Access to model {repo_id} is restricted. You must have access to it and be"
            " authenticated to access it. Please log in."
        )
        return _error(403 if token else 401, "GatedRepo", message)
    return None


def _split_repo(ctx: RouteContext, parts: list[str]) -> tuple[str, list[str]]:
    """Find the repo id at the front of ``parts``: ``owner/name`` or a legacy bare ``name``."""
    if len(parts) >= 2 and "/".join(parts[:2]) in ctx.repos:
        return "/".join(parts[:2]), parts[2:]
    if parts and parts[0] in ctx.repos:
        return parts[0], parts[1:]
    return "/".join(parts[:2]), parts[2:]


def route(
    ctx: RouteContext,
    method: str,
    raw_path: str,
    query: Mapping[str, list[str]],
    headers: Mapping[str, str],
) -> Response:
    """Answer one request; ``raw_path`` is still percent-encoded, segment by segment."""
    parts = [unquote(p) for p in raw_path.split("/")[1:]]
    while parts and parts[-1] == "":
        parts.pop()
    if len(parts) >= 3 and parts[:2] == ["api", "models"]:
        if method != "GET":
            return _error(405, None, f"{method} not allowed here")
        return _api(ctx, parts[2:], query, headers)
    if parts and parts[0] not in ("api", "datasets", "spaces") and "resolve" in parts[1:3]:
        at = parts.index("resolve", 1)
        repo_id, rest = "/".join(parts[:at]), parts[at + 1 :]
        if method not in ("GET", "HEAD"):
            return _error(405, None, f"{method} not allowed here")
        return _resolve(ctx, method, repo_id, rest, headers)
    return _error(404, None, f"Sorry, we can't find the page you are looking for: {raw_path}")


def _api(
    ctx: RouteContext, parts: list[str], query: Mapping[str, list[str]], headers: Mapping[str, str]
) -> Response:
    repo_id, tail = _split_repo(ctx, parts)
    repo = ctx.repos.get(repo_id)
    denied = _denied(ctx, repo, repo_id, headers, files=False)
    if denied is not None:
        denied.repo_id = repo_id
        return denied
    if repo is None:  # unreachable: _denied refuses unknown repos; keeps mypy informed
        return _error(404, "RepoNotFound", "Repository not found")
    if not tail:
        response = _info(repo, "main", query)
    elif tail[0] == "revision" and len(tail) >= 2:
        response = _info(repo, "/".join(tail[1:]), query)
    elif tail[0] == "tree" and len(tail) >= 2:
        response = _tree(ctx, repo, tail[1], "/".join(tail[2:]), query)
    elif tail == ["refs"]:
        response = _json(200, _refs(repo))
    else:
        response = _error(404, None, f"Unknown API route for {repo_id}: {'/'.join(tail)}")
    response.repo_id = repo_id
    return response


def _revision_not_found(revision: str) -> Response:
    return _error(404, "RevisionNotFound", f"Invalid rev id: {revision}")


def _info(repo: Repo, revision: str, query: Mapping[str, list[str]]) -> Response:
    commit = repo.resolve(revision)
    if commit is None:
        response = _revision_not_found(revision)
        response.revision = revision
        return response
    payload: dict[str, Any] = {
        "_id": repo.repo_id,
        "id": repo.repo_id,
        "modelId": repo.repo_id,
        "author": repo.repo_id.split("/")[0] if "/" in repo.repo_id else None,
        "sha": commit.sha,
        "lastModified": commit.date_iso,
        "createdAt": repo.commits[min(repo.commits, key=lambda s: repo.commits[s].date)].date_iso,
        "private": repo.private,
        "gated": repo.gated,
        "disabled": False,
        "downloads": 0,
        "likes": 0,
        "tags": sorted({"safetensors" for p in commit.files if p.endswith(".safetensors")}),
        "cardData": repo.card_data,
        "siblings": [
            {**_sibling(path, commit), **repo.tamper.sibling_fields.get(path, {})}
            for path in commit.files
            if path not in repo.tamper.hidden_siblings
        ]
        + list(repo.tamper.extra_siblings),
    }
    expand = query.get("expand", []) + query.get("expand[]", [])
    if _truthy(query.get("securityStatus")) or "securityRepoStatus" in expand:
        payload["securityRepoStatus"] = {
            "scansDone": True,
            "filesWithIssues": [{"path": p, "level": "unsafe"} for p in repo.security_findings],
        }
    response = _json(200, payload)
    if repo.tamper.info_body is not None:
        response.body = repo.tamper.info_body
    response.revision = revision
    return response


def _sibling(path: str, commit: Commit) -> dict[str, Any]:
    blob = commit.files[path]
    sibling: dict[str, Any] = {"rfilename": path, "size": blob.size, "blobId": blob.oid}
    if blob.lfs:
        sibling["lfs"] = blob.lfs_sibling()
    return sibling


def _truthy(values: list[str] | None) -> bool:
    return values is not None and bool(values) and values[-1].lower() in ("1", "true", "yes")


def _refs(repo: Repo) -> dict[str, Any]:
    def refs(kind: str, table: dict[str, str]) -> list[dict[str, str]]:
        return [
            {"name": name, "ref": f"refs/{kind}/{name}", "targetCommit": sha}
            for name, sha in sorted(table.items())
        ]

    return {
        "branches": refs("heads", repo.branches),
        "tags": refs("tags", repo.tags),
        "converts": [],
    }


def _tree(
    ctx: RouteContext, repo: Repo, revision: str, path: str, query: Mapping[str, list[str]]
) -> Response:
    commit = repo.resolve(revision)
    if commit is None:
        return _revision_not_found(revision)
    recursive = _truthy(query.get("recursive"))
    entries = repo.tree(commit, path, recursive=recursive)
    if entries is not None:
        entries = entries + list(repo.tamper.extra_tree)
    if entries is None:
        message = f"{path} does not exist on {revision}"
        return _error(404, "EntryNotFound", message, **{"X-Repo-Commit": commit.sha})
    try:
        start = max(0, int(query.get("cursor", ["0"])[-1]))
    except ValueError:
        return _error(400, None, "invalid cursor")
    end = start + ctx.tree_page_size
    extra: list[tuple[str, str]] = []
    if end < len(entries):
        params = {"recursive": str(recursive).lower(), "cursor": str(end)}
        if query.get("expand"):
            params["expand"] = query["expand"][-1]
        suffix = f"/{quote(path, safe='')}" if path else ""
        url = (
            f"{ctx.endpoint}/api/models/{repo.repo_id}/tree/{quote(revision, safe='')}{suffix}"
            f"?{urlencode(params)}"
        )
        extra.append(("Link", f'<{url}>; rel="next"'))
    response = _json(200, entries[start:end], extra)
    response.revision = revision
    return response


def _resolve(
    ctx: RouteContext, method: str, repo_id: str, rest: list[str], headers: Mapping[str, str]
) -> Response:
    repo = ctx.repos.get(repo_id)
    revision = rest[0] if rest else ""
    filename = "/".join(rest[1:])
    denied = _denied(ctx, repo, repo_id, headers, files=True)
    if denied is not None or repo is None:
        response = denied or _error(404, "RepoNotFound", "Repository not found")
    else:
        response = _serve_file(method, repo, revision, filename, headers)
    response.repo_id, response.revision, response.filename = repo_id, revision, filename
    return response


def _serve_file(
    method: str, repo: Repo, revision: str, filename: str, headers: Mapping[str, str]
) -> Response:
    commit = repo.resolve(revision)
    if commit is None:
        return _revision_not_found(revision)
    blob = commit.files.get(filename)
    if blob is None:
        message = f"{filename} does not exist on {revision}"
        return _error(404, "EntryNotFound", message, **{"X-Repo-Commit": commit.sha})
    base = [
        ("Content-Type", "application/octet-stream"),
        ("Accept-Ranges", "bytes"),
        ("X-Repo-Commit", commit.sha),
        ("ETag", f'"{blob.etag}"'),
        ("Content-Disposition", f'inline; filename="{filename.rsplit("/", 1)[-1]}"'),
    ]
    if blob.lfs:
        base += [("X-Linked-Etag", f'"{blob.sha256}"'), ("X-Linked-Size", str(blob.size))]
    data = repo.tamper.file_bodies.get(filename, blob.data)
    match = _RANGE.match(headers.get("range", "").strip()) if method == "GET" else None
    if match is None or match.groups() == ("", ""):
        return Response(200, base, data)
    first, last = match.groups()
    if first:
        start, stop = int(first), min(int(last) + 1 if last else len(data), len(data))
    else:  # suffix range: the last N bytes
        start, stop = max(0, len(data) - int(last)), len(data)
    if start >= len(data) or start >= stop:
        return _error(
            416,
            None,
            "Requested range not satisfiable",
            **{"Content-Range": f"bytes */{len(data)}"},
        )
    base.append(("Content-Range", f"bytes {start}-{stop - 1}/{len(data)}"))
    return Response(206, base, data[start:stop])
