"""A PEP 503 simple index on loopback that owns every ``comfy-llm*`` name.

It serves the wheels of one folder (``uv build --all-packages`` output) and
answers for every project name with the owned prefix: a page listing the
files it has, an empty page when it has none. Any other name gets 404, so an
installer with this index first and the usual registry as its default index
takes third-party packages from the registry and ours only from here. uv's
default ``first-index`` strategy stops at the first index that knows a name
(``uv help pip install``, ``--index-strategy``), and this one knows every
``comfy-llm*`` name, so no other index can supply one, not even a name this
folder lacks. Configure an installer with ``UV_INDEX=comfy-llm=<url>`` (or
``--index``); ``index_environment`` gives those variables.

Run it to try a build the way a user would install it (RELEASING.md)::

    uv run --frozen python -m comfy_llm_testworld.wheel_index dist
"""

from __future__ import annotations

import argparse
import hashlib
import html
import re
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from email.parser import HeaderParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

__all__ = ["WheelIndex", "index_environment", "serve_wheels"]

OWNED_PREFIX = "comfy-llm"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _project(filename: str) -> str:
    """The canonical project name of a wheel or sdist file name."""
    stem = filename.removesuffix(".whl").removesuffix(".tar.gz")
    return _canonical(stem.split("-", 1)[0])


def _requires_python(path: Path) -> str | None:
    if path.suffix != ".whl":
        return None
    with zipfile.ZipFile(path) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        headers = HeaderParser().parsestr(archive.read(metadata).decode("utf-8"))
    return headers.get("Requires-Python")


class WheelIndex:
    """The files of one folder, by project, as a simple index serves them."""

    def __init__(self, folder: Path, owned_prefix: str = OWNED_PREFIX) -> None:
        self.folder = folder
        self.owned_prefix = owned_prefix
        self.files: dict[str, list[Path]] = {}
        for path in sorted(folder.iterdir()):
            if path.name.endswith((".whl", ".tar.gz")):
                self.files.setdefault(_project(path.name), []).append(path)
        foreign = [name for name in self.files if not self.owns(name)]
        if foreign:
            raise ValueError(f"{folder} holds files of projects this index does not own: {foreign}")

    def owns(self, project: str) -> bool:
        """Whether this index answers for ``project`` (every name with the owned prefix)."""
        return _canonical(project).startswith(self.owned_prefix)

    def project_page(self, project: str) -> str | None:
        """The PEP 503 page of ``project``, or ``None`` (404) for a name not owned."""
        if not self.owns(project):
            return None
        links = []
        for path in self.files.get(_canonical(project), []):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            requires = _requires_python(path)
            attribute = f' data-requires-python="{html.escape(requires)}"' if requires else ""
            href = f"../../files/{path.name}#sha256={digest}"
            links.append(f'<a href="{href}"{attribute}>{path.name}</a>')
        return "<!DOCTYPE html><html><body>\n" + "<br>\n".join(links) + "\n</body></html>\n"

    def root_page(self) -> str:
        """``/simple/``: the projects it has files for."""
        links = [f'<a href="{name}/">{name}</a>' for name in sorted(self.files)]
        return "<!DOCTYPE html><html><body>\n" + "<br>\n".join(links) + "\n</body></html>\n"

    def file(self, name: str) -> Path | None:
        """A file it serves, by its name."""
        for paths in self.files.values():
            for path in paths:
                if path.name == name:
                    return path
        return None


def _handler(index: WheelIndex) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:  # quiet
            return

        def do_HEAD(self) -> None:  # uv asks first whether a wheel serves byte ranges
            self._answer(head=True)

        def do_GET(self) -> None:
            self._answer(head=False)

        def _answer(self, *, head: bool) -> None:
            parts = [part for part in self.path.split("?", 1)[0].split("/") if part]
            body: bytes | None = None
            kind = "text/html"
            if parts == ["simple"]:
                body = index.root_page().encode()
            elif len(parts) == 2 and parts[0] == "simple":
                page = index.project_page(parts[1])
                body = page.encode() if page is not None else None
            elif len(parts) == 2 and parts[0] == "files":
                path = index.file(parts[1])
                body = path.read_bytes() if path is not None else None
                kind = "application/octet-stream"
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

    return Handler


@contextmanager
def serve_wheels(folder: Path, owned_prefix: str = OWNED_PREFIX) -> Iterator[str]:
    """Serve ``folder`` on loopback for the block; yields the index URL (``.../simple``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(WheelIndex(folder, owned_prefix)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def index_environment(url: str) -> dict[str, str]:
    """The variable that puts this index before uv's default one (pip has no such order)."""
    return {"UV_INDEX": f"comfy-llm={url}"}


def main() -> None:
    """Serve a folder until interrupted, printing how to point uv at it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the wheels (uv build --all-packages output)")
    folder = parser.parse_args().folder
    with serve_wheels(folder) as url:
        print(f"serving {folder} at {url}; in another shell:")
        print(f"  export UV_INDEX=comfy-llm={url}")
        print("then the README's install commands; Ctrl-C stops it")
        threading.Event().wait()


if __name__ == "__main__":
    main()
