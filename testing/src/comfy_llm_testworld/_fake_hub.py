"""A fake Hugging Face Hub: a stdlib HTTP server on 127.0.0.1 for offline tests.

The real ``huggingface_hub`` client talks to it unchanged (pass ``endpoint=``),
so tests exercise the product's actual download, resume and error paths. It
never sends Xet headers or fields, so the client always uses plain HTTP.
"""

from __future__ import annotations

import itertools
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

from ._fake_hub_http import Fault, HubGate, RecordedRequest, Server
from ._fake_hub_repo import Repo, Tamper, validate_repo_id
from ._fake_hub_routes import Response, RouteContext, route

__all__ = ["FakeHub", "RecordedRequest"]


@dataclass
class FakeHub:
    """An in-memory Hub with repos, tokens, a request log and fault injection.

    Create repos with :meth:`add_repo`/:meth:`add_commit`/:meth:`add_tag` (before
    or after :meth:`start`), then point ``huggingface_hub`` at :attr:`endpoint`.
    Gated repos serve metadata to anyone but file content only with a token from
    :attr:`valid_tokens`; private repos need one for everything.

    Attributes:
        valid_tokens: Bearer tokens accepted for gated and private repos.
        tree_page_size: Entries per tree page; lower it to exercise ``Link`` paging.
    """

    valid_tokens: set[str] = field(default_factory=lambda: {"hf_test_token"})
    tree_page_size: int = 1000
    _repos: dict[str, Repo] = field(default_factory=dict, init=False, repr=False)
    _requests: list[RecordedRequest] = field(default_factory=list, init=False, repr=False)
    _faults: list[Fault] = field(default_factory=list, init=False, repr=False)
    _internal_errors: list[str] = field(default_factory=list, init=False, repr=False)
    _lock: threading.Condition = field(default_factory=threading.Condition, init=False, repr=False)
    _seq: itertools.count[int] = field(default_factory=itertools.count, init=False, repr=False)
    _server: Server | None = field(default=None, init=False, repr=False)
    _endpoint: str = field(default="", init=False, repr=False)
    stopping: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> Self:
        """Bind a free port on 127.0.0.1 and serve from a background thread."""
        if self._server is not None:
            raise RuntimeError("FakeHub already started")
        self.stopping.clear()
        self._server = Server(self)
        port = self._server.server_address[1]
        self._endpoint = f"http://127.0.0.1:{port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-hub",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, join every handler thread and close the socket (idempotent)."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None:
            return
        self.stopping.set()  # wake handlers held open by a delay fault
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        """Base URL to pass as ``endpoint=`` (or HF_ENDPOINT), e.g. ``http://127.0.0.1:41234``."""
        if self._server is None:
            raise RuntimeError("FakeHub is not started")
        return self._endpoint

    # -- content -----------------------------------------------------------------------

    def add_repo(
        self,
        repo_id: str,
        files: Mapping[str, bytes],
        *,
        gated: bool | str = False,
        private: bool = False,
        card_data: dict[str, Any] | None = None,
        security_findings: list[str] | None = None,
        branch: str = "main",
        sha: str | None = None,
    ) -> str:
        """Create a model repo whose first commit on ``branch`` holds ``files``.

        Args:
            repo_id: ``owner/name``.
            files: Repo-relative POSIX path to content. Weight-like names and
                files over 1 MiB are stored as LFS, like on the Hub.
            gated: False, ``"auto"`` or ``"manual"`` (True means ``"auto"``).
            private: Whether every request needs a valid token.
            card_data: The model card's YAML metadata, returned as ``cardData``.
            security_findings: Paths the security scan flags as unsafe.
            branch: Branch that receives the first commit.
            sha: The commit's id (e.g. a real repository's pinned commit);
                default: derived from the content.

        Returns:
            The 40-hex sha of the new commit.
        """
        validate_repo_id(repo_id)
        gate = "auto" if gated is True else gated
        if gate not in (False, "auto", "manual"):
            raise ValueError(f"gated must be False, 'auto' or 'manual', not {gated!r}")
        with self._lock:
            if repo_id in self._repos:
                raise ValueError(f"repo {repo_id!r} exists; use add_commit to change it")
            repo = Repo(repo_id, private, gate, card_data, list(security_findings or []))  # type: ignore[arg-type]
            commit = repo.commit(files, branch, next(self._seq), sha)
            self._repos[repo_id] = repo
            return commit.sha

    def add_commit(
        self,
        repo_id: str,
        files: Mapping[str, bytes],
        branch: str = "main",
        *,
        sha: str | None = None,
    ) -> str:
        """Make ``files`` the full new tree of ``branch`` (created if new); return the sha.

        Older commits stay reachable by sha, so a test can move a branch under a
        pinned profile and check that the pin still holds. ``sha`` as in
        :meth:`add_repo`.
        """
        with self._lock:
            return self._repo(repo_id).commit(files, branch, next(self._seq), sha).sha

    def add_tag(self, repo_id: str, tag: str, revision: str) -> None:
        """Point ``tag`` at ``revision`` (a commit sha, branch or existing tag)."""
        with self._lock:
            repo = self._repo(repo_id)
            commit = repo.resolve(revision)
            if commit is None:
                raise ValueError(f"unknown revision {revision!r} in {repo_id!r}")
            repo.tags[tag] = commit.sha

    def tamper(
        self,
        repo_id: str,
        *,
        extra_siblings: list[Any] | None = None,
        extra_tree: list[Any] | None = None,
        hidden_siblings: set[str] | None = None,
        sibling_fields: dict[str, dict[str, Any]] | None = None,
        info_body: bytes | None = None,
        file_bodies: dict[str, bytes] | None = None,
    ) -> None:
        """Make the Hub lie about ``repo_id`` from now on (see :class:`Tamper`).

        Args:
            repo_id: An existing repo.
            extra_siblings: Raw entries (any JSON) appended to the model info's siblings,
                e.g. ``{"rfilename": "../../x.safetensors", "size": 5}``.
            extra_tree: Raw entries appended to every tree listing.
            hidden_siblings: Real paths left out of the siblings (still listed and served).
            sibling_fields: Per real path, fields overriding its sibling entry
                (e.g. ``{"config.json": {"size": "abc"}}``).
            info_body: Raw bytes served as the whole model-info body.
            file_bodies: Per real path, raw bytes served on GET instead of the content
                (the metadata keeps the true size and hashes).
        """
        with self._lock:
            self._repo(repo_id).tamper = Tamper(
                extra_siblings=list(extra_siblings or []),
                extra_tree=list(extra_tree or []),
                hidden_siblings=set(hidden_siblings or ()),
                sibling_fields=dict(sibling_fields or {}),
                info_body=info_body,
                file_bodies=dict(file_bodies or {}),
            )

    def head(self, repo_id: str, branch: str = "main") -> str:
        """Current commit sha of ``branch``."""
        with self._lock:
            return self._repo(repo_id).branches[branch]

    def _repo(self, repo_id: str) -> Repo:
        try:
            return self._repos[repo_id]
        except KeyError:
            raise KeyError(f"no repo {repo_id!r} on this FakeHub") from None

    # -- observation and faults ------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot (copy) of every request answered so far, in order."""
        with self._lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        """Forget the request log, e.g. between the arrange and act parts of a test."""
        with self._lock:
            self._requests.clear()

    def file_requests(self, method: str = "GET", repo_id: str | None = None) -> list[str]:
        """Repo-relative paths requested through ``/{repo}/resolve/{rev}/{path}``."""
        return [
            r.filename
            for r in self.requests
            if r.filename is not None
            and r.method == method.upper()
            and (repo_id is None or r.repo_id == repo_id)
        ]

    def wait_for_request(
        self, predicate: Callable[[RecordedRequest], bool], timeout: float = 10.0
    ) -> RecordedRequest:
        """Block until a logged request satisfies ``predicate`` and return it.

        Lets a test act at a precise moment of another process's download, e.g.
        kill a stager once a delayed, half-sent weight file shows up in the log.

        Raises:
            TimeoutError: When no such request arrives within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                for request in self._requests:
                    if predicate(request):
                        return request
                left = deadline - time.monotonic()
                if left <= 0 or not self._lock.wait(left):
                    raise TimeoutError(f"no matching request within {timeout} s")

    def inject_fault(
        self,
        method: str = "GET",
        path_contains: str = "model.safetensors",
        *,
        status: int | None = None,
        cut_after_bytes: int | None = None,
        times: int = 1,
        delay: float = 0.0,
    ) -> None:
        """Make the next ``times`` matching requests fail or stall.

        Args:
            method: HTTP method to match.
            path_contains: Substring of the decoded URL path to match.
            status: Answer with this status instead (no ``X-Error-Code``, so the
                client raises a plain HfHubHTTPError; 429 is retried, 500 on GET not).
            cut_after_bytes: Send the full headers (with the real Content-Length),
                then only this many body bytes, then close the connection.
            times: How many matching requests the fault applies to.
            delay: Seconds to stall: before answering, or with ``cut_after_bytes``
                after the partial body and before the cut (the request is logged
                already, see :meth:`wait_for_request`). Ends early on ``stop()``.
        """
        if status is not None and cut_after_bytes is not None:
            raise ValueError("give at most one of status= or cut_after_bytes=")
        if status is None and cut_after_bytes is None and delay <= 0:
            raise ValueError("give status=, cut_after_bytes= or a positive delay=")
        if times < 1 or (cut_after_bytes is not None and cut_after_bytes < 0) or delay < 0:
            raise ValueError("times must be >= 1, cut_after_bytes and delay >= 0")
        fault = Fault(method.upper(), path_contains, status, cut_after_bytes, delay, times)
        with self._lock:
            self._faults.append(fault)

    def gate(self, path_contains: str = ".safetensors", method: str = "GET") -> HubGate:
        """Hold every matching request (before it is answered) until the gate's ``release()``.

        Returns:
            The gate: ``reached`` is set when the first matching request waits.
        """
        gate = HubGate()
        fault = Fault(method.upper(), path_contains, None, None, 0.0, 1 << 30, gate)
        with self._lock:
            self._faults.append(fault)
        return gate

    def pending_faults(self) -> int:
        """How many injected fault occurrences have not fired yet."""
        with self._lock:
            return sum(f.remaining for f in self._faults if f.gate is None)

    @property
    def internal_errors(self) -> list[str]:
        """Tracebacks of bugs in the fake Hub itself (each answered as a 500)."""
        with self._lock:
            return list(self._internal_errors)

    # -- HubSide: called by the request handler threads ---------------------------------

    def answer(
        self, method: str, raw_path: str, query: dict[str, list[str]], headers: dict[str, str]
    ) -> Response:
        """Route one request under the lock, so it sees repos in one consistent state."""
        try:
            with self._lock:
                context = RouteContext(
                    endpoint=self._endpoint,
                    repos=self._repos,
                    valid_tokens=frozenset(self.valid_tokens),
                    tree_page_size=max(1, self.tree_page_size),
                )
                return route(context, method, raw_path, query, headers)
        except Exception:
            with self._lock:
                self._internal_errors.append(traceback.format_exc())
            return Response(500, [("Content-Type", "text/plain")], b"fake hub bug")

    def take_fault(self, method: str, path: str) -> Fault | None:
        """Consume one occurrence of the first matching pending fault."""
        with self._lock:
            for fault in self._faults:
                if fault.remaining > 0 and fault.method == method and fault.path_contains in path:
                    fault.remaining -= 1
                    return fault
        return None

    def record(self, request: RecordedRequest) -> None:
        """Append to the request log and wake :meth:`wait_for_request`."""
        with self._lock:
            self._requests.append(request)
            self._lock.notify_all()
