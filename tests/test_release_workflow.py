"""The release workflow's pieces that run here: the registry version check, the workflow rules."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = REPO_ROOT / ".github" / "workflows"
PROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]


def _script() -> ModuleType:
    path = REPO_ROOT / "scripts" / "registry-version.py"
    spec = importlib.util.spec_from_file_location("registry_version", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["registry_version"] = module
    spec.loader.exec_module(module)
    return module


registry_version = _script()


@contextmanager
def _registry(status: int, versions: list[str]) -> Iterator[tuple[str, list[str]]]:
    """A stand-in for api.comfy.org's ``GET /nodes/<id>/versions`` (a list of objects)."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            return

        def do_GET(self) -> None:
            asked.append(self.path)
            body = json.dumps(
                [{"version": v, "status": "NodeVersionStatusActive"} for v in versions]
            )
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            if status == 200:
                self.wfile.write(body.encode())

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("status", "versions", "publish"),
    [
        (200, ["0.0.9"], "true"),  # a new version
        (200, ["0.0.9", PROJECT["version"]], "false"),  # already there: a re-run publishes nothing
        (404, [], "true"),  # the node's first version
    ],
)
def test_only_a_version_the_registry_lacks_is_published(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    status: int,
    versions: list[str],
    publish: str,
) -> None:
    output = tmp_path / "github_output"
    with _registry(status, versions) as (api, asked):
        assert registry_version.main(["--api", api, "--github-output", str(output)]) == 0
    assert asked == [f"/nodes/{PROJECT['name']}/versions"]
    assert output.read_text() == f"publish={publish}\n"
    assert capsys.readouterr().out == f"publish={publish}\n"


def test_a_registry_that_cannot_answer_stops_the_release(tmp_path: Path) -> None:
    output = tmp_path / "github_output"
    with _registry(500, []) as (api, _):
        assert registry_version.main(["--api", api, "--github-output", str(output)]) == 1
    assert not output.exists()


def _text(name: str) -> str:
    return (WORKFLOWS / name).read_text(encoding="utf-8")


def test_every_action_is_pinned_to_a_commit() -> None:
    import re

    for path in sorted(WORKFLOWS.glob("*.yml")):
        for line in path.read_text().splitlines():
            if "uses:" in line:
                assert re.search(r"uses: [\w.-]+/[\w.-]+@[0-9a-f]{40} # \S", line), (
                    path.name,
                    line,
                )


def test_the_release_publishes_by_trusted_publishing_from_the_projects_own_repository() -> None:
    release = _text("release.yml")
    assert "permissions: {}" in release  # nothing by default; each job asks for its own
    assert release.count("if: github.repository_owner == 'comfy-llm'") == 3
    assert "id-token: write" in release and "--trusted-publishing always" in release
    assert "password" not in release and "secrets.PYPI" not in release.replace(" ", "")
    assert "--check-url https://pypi.org/simple/" in release  # re-runs skip what is there
    assert "scripts/version.py check --tag" in release
    assert "uv build --all-packages --no-sources" in release
    assert "Comfy-Org/publish-node-action@" in release and "steps.node.outputs.publish" in release
