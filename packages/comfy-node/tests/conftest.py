from __future__ import annotations

import http.client
import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from comfy_llm_residency import reset_managers
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.checkpoints import build_checkpoint_files, with_unopened_think
from comfy_llm_testworld.comfyui_standin import installed_standin


@dataclass
class NodeFailure:
    """What a node raised to ComfyUI (``shown``) and the comfy-llm error behind it."""

    shown: BaseException | None = None
    value: BaseException | None = None


@contextmanager
def node_raises(expected: type[BaseException], match: str | None = None) -> Iterator[NodeFailure]:
    """Expect a node's execute to fail with ``expected``, as ComfyUI would get it.

    A comfy-llm error leaves the node as the plain builtin it derives from
    (ComfyUI shows the raised class's module path), chained to the original.
    """
    failure = NodeFailure()
    with pytest.raises(Exception, match=match) as caught:
        yield failure
    failure.shown = caught.value
    assert type(caught.value).__module__ == "builtins", type(caught.value)
    assert isinstance(caught.value.__cause__, expected), repr(caught.value.__cause__)
    failure.value = caught.value.__cause__


# (repository, checkpoint kind, scripted)
REPOS = {
    "tiny/qwen35": ("qwen3_5", False),
    "tiny/qwen35-scripted": ("qwen3_5", True),
    "tiny/smolvlm": ("smolvlm", False),
    "tiny/smolvlm-scripted": ("smolvlm", True),
}


@pytest.fixture
def model_hub(hf_env: FakeHub) -> FakeHub:
    """The fake Hub serving every tiny checkpoint, HF_ENDPOINT pointing at it."""
    for repository, (kind, scripted) in REPOS.items():
        hf_env.add_repo(repository, build_checkpoint_files(kind, scripted=scripted))
    # a template that opens no think block (an instruct, not a thinking, template)
    scripted = build_checkpoint_files("qwen3_5", scripted=True)
    hf_env.add_repo("tiny/qwen35-unopened", with_unopened_think(scripted))
    return hf_env


@pytest.fixture
def storage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "storage"
    monkeypatch.setenv("COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT", str(root))
    return root


@pytest.fixture(autouse=True)
def _fresh_managers() -> Iterator[None]:
    from comfy_llm._pipeline import forget_resolved_profiles

    forget_resolved_profiles()
    reset_managers()
    yield
    reset_managers()
    forget_resolved_profiles()


@pytest.fixture
def comfyui(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("COMFYUI_STANDIN_BASE", str(tmp_path / "ComfyUI"))
    with installed_standin() as path:
        import comfy.model_management

        comfy.model_management.reset()
        yield path


GOOD_TOKEN = "hf_WellFormedSecret42"
"""A well-formed token the echoing proxy below puts into library error text."""


class EchoingProxy:
    """Forwards to the fake Hub, but answers weight downloads (GET) with a 400
    whose body echoes the Authorization header, as a misconfigured mirror might."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.answer(self)

            def do_HEAD(self) -> None:
                outer.answer(self)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.upstream = (host, int(port))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        weights = "/resolve/" in handler.path and handler.path.endswith(".safetensors")
        if weights and handler.command == "GET":
            auth = handler.headers.get("Authorization", "")
            body = json.dumps({"error": f"Bad credentials {auth!s} for this mirror"}).encode()
            status, headers = 400, [("Content-Type", "application/json")]
            headers.append(("X-Error-Message", f"Bad credentials {auth}"))
        else:
            connection = http.client.HTTPConnection(*self.upstream, timeout=30)
            connection.request(handler.command, handler.path, headers=dict(handler.headers))
            reply = connection.getresponse()
            body = reply.read()
            status = reply.status
            hop = {"connection", "transfer-encoding", "keep-alive"}
            headers = [(k, v) for k, v in reply.getheaders() if k.lower() not in hop]
            connection.close()
        if not any(key.lower() == "content-length" for key, _value in headers):
            headers.append(("Content-Length", str(len(body))))
        handler.send_response(status)
        for key, value in headers:
            handler.send_header(key, value)
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(body)

    def __enter__(self) -> EchoingProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def echoing_proxy(model_hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> Iterator[EchoingProxy]:
    """:func:`model_hub` behind an :class:`EchoingProxy`, with HF_ENDPOINT
    pointing at the proxy and HF_TOKEN set to :data:`GOOD_TOKEN`."""
    model_hub.valid_tokens.add(GOOD_TOKEN)
    with EchoingProxy(model_hub.endpoint) as proxy:
        monkeypatch.setenv("HF_ENDPOINT", proxy.endpoint)
        monkeypatch.setenv("HF_TOKEN", GOOD_TOKEN)
        yield proxy
