"""The fake Hub's HTTP layer: request handler, server, request log entries, faults.

One request per connection (every response says ``Connection: close``), so no
idle keep-alive thread outlives a test and stopping the server can join all of
its threads: pytest runs with warnings as errors and would report a leak.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, unquote, urlsplit

from ._fake_hub_routes import Response

__all__ = ["Fault", "HubGate", "HubSide", "RecordedRequest", "Server"]


class _Headers(dict[str, str]):
    """A plain dict of request headers whose lookups ignore case, as HTTP does."""

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(key.lower())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(key.lower())

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        """Case-insensitive ``dict.get``."""
        return super().get(key.lower(), default)


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw and answered it.

    ``path`` is percent-decoded and without the query; ``headers`` has lower-case
    keys but case-insensitive lookups. ``bytes_sent`` counts body bytes written
    (fewer than the file's size when a fault cut the connection). The trailing
    fields are filled for ``/resolve`` (and, except ``filename``, API) requests,
    so tests can assert on *what* was fetched without parsing URLs.
    """

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    status: int
    bytes_sent: int
    repo_id: str | None = None
    revision: str | None = None
    filename: str | None = None


class HubGate:
    """Holds matching requests before they are answered until :meth:`release`.

    ``reached`` is set when the first one arrives, so a test acts while a
    download is known to be in flight, without a sleep.
    """

    def __init__(self) -> None:
        self.reached = threading.Event()
        self._open = threading.Event()

    def release(self) -> None:
        """Let held and later matching requests through."""
        self._open.set()

    def wait(self, stopping: threading.Event) -> None:
        self.reached.set()
        while not self._open.wait(0.05) and not stopping.is_set():
            pass


@dataclass
class Fault:
    """An injected failure for the next ``remaining`` matching requests."""

    method: str
    path_contains: str
    status: int | None
    cut_after_bytes: int | None
    delay: float
    remaining: int
    gate: HubGate | None = None


class HubSide(Protocol):
    """What the handler needs from the hub; keeps this module free of FakeHub."""

    stopping: threading.Event

    def answer(
        self, method: str, raw_path: str, query: dict[str, list[str]], headers: dict[str, str]
    ) -> Response:
        """Route one request (capturing the hub's own bugs as 500s)."""
        ...

    def take_fault(self, method: str, path: str) -> Fault | None:
        """Consume one occurrence of the first matching fault."""
        ...

    def record(self, request: RecordedRequest) -> None:
        """Append to the request log."""
        ...


class _Handler(BaseHTTPRequestHandler):
    """Parses, routes, applies faults, writes and records one request."""

    protocol_version = "HTTP/1.1"
    timeout = 10  # a silent client cannot hold a thread (and stop()) forever
    server: Server

    def do_GET(self) -> None:
        """Serve a GET."""
        self._handle()

    def do_HEAD(self) -> None:
        """Serve a HEAD."""
        self._handle()

    def do_POST(self) -> None:
        """Refuse writes with 405, recorded, so a test sees an unexpected upload."""
        self._handle()

    do_PUT = do_DELETE = do_POST

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output clean; the request log is ``FakeHub.requests``."""

    def _handle(self) -> None:
        hub = self.server.hub
        self.close_connection = True
        url = urlsplit(self.path)
        path = unquote(url.path)
        query = parse_qs(url.query, keep_blank_values=True)
        headers = _Headers({k.lower(): v for k, v in self.headers.items()})
        response = hub.answer(self.command, url.path, query, headers)
        fault = hub.take_fault(self.command, path)
        cut: int | None = None
        if fault is not None and fault.gate is not None:
            fault.gate.wait(hub.stopping)
            fault = None
        if fault is not None:
            cut = fault.cut_after_bytes
            if cut is None and fault.delay and hub.stopping.wait(fault.delay):
                return  # the hub is stopping: just drop the connection
            if fault.status is not None:
                message = f"injected fault {fault.status}"
                response = Response(
                    fault.status,
                    [("X-Error-Message", message), ("Content-Type", "application/json")],
                    b'{"error": "%s"}' % message.encode(),
                    response.repo_id,
                    response.revision,
                    response.filename,
                )
        record = RecordedRequest(
            method=self.command,
            path=path,
            query=query,
            headers=headers,
            status=response.status,
            bytes_sent=0,
            repo_id=response.repo_id,
            revision=response.revision,
            filename=response.filename,
        )
        self._write(response, cut, record)
        if cut is not None and fault is not None and fault.delay:
            hub.stopping.wait(fault.delay)  # hold the half-sent response open, then cut

    def _write(self, response: Response, cut: int | None, record: RecordedRequest) -> None:
        """Send the response and log it *before* its last byte leaves.

        A client may act on a complete response at once (e.g. a test asserting on
        the log right after a call returns), so the log entry must exist by the
        time the final byte can be read. An error is logged before its first
        byte: a client may give up on the status line alone, without reading
        the body (a 500 made the resolver fall back to the staged choice and
        return while this thread had not logged it yet).
        """
        body = b"" if self.command == "HEAD" else response.body
        payload = memoryview(body)[: len(body) if cut is None else cut]
        try:
            phrase = HTTPStatus(response.status).phrase
        except ValueError:
            phrase = ""
        lines = [
            f"HTTP/1.1 {response.status} {phrase}",
            "Server: comfy-llm-fake-hub",
            f"Date: {self.date_time_string()}",
            *(f"{name}: {value}" for name, value in response.headers),
            f"Content-Length: {len(response.body)}",
            "Connection: close",
        ]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "backslashreplace")
        hub = self.server.hub
        logged = response.status >= 400
        if logged:
            hub.record(replace(record, bytes_sent=len(payload)))
        try:
            if payload:
                self.wfile.write(head)
                self.wfile.write(payload[:-1])
                last = payload[-1:]
            else:
                self.wfile.write(head[:-1])
                last = memoryview(head)[-1:]
            self.wfile.flush()
            if not logged:
                hub.record(replace(record, bytes_sent=len(payload)))
                logged = True
            self.wfile.write(last)
            self.wfile.flush()
        except OSError:  # the client went away; log what it may have seen
            if not logged:
                hub.record(replace(record, bytes_sent=0))


class Server(ThreadingHTTPServer):
    """A threading server bound to a free port on 127.0.0.1 only."""

    daemon_threads = False  # join every handler on close: no thread outlives stop()
    block_on_close = True

    def __init__(self, hub: HubSide) -> None:
        self.hub = hub
        super().__init__(("127.0.0.1", 0), _Handler)
