"""A real ComfyUI server for tests, driven over HTTP and the websocket as the frontend drives it.

:func:`find_comfyui` locates a ComfyUI source tree (``$COMFYUI_DIR``, else
``../shared/comfyui`` next to the repository). :class:`ComfyUIServer` copies
it to a temporary folder (the source is only read), installs this repository
as the Comfy registry does (the files ``comfy node pack`` ships, unpacked in
``custom_nodes/``, plus its ``requirements.txt`` into ComfyUI's interpreter;
a clone, the README's way 1, holds a superset of them), starts ``main.py --cpu`` headless on a free
loopback port and stops it. :class:`ComfyUIClient` speaks the frontend's
protocol: ``/object_info``, ``/upload/image``, POST ``/prompt`` with an
API-format workflow while listening on ``/ws?clientId=...``, POST
``/interrupt`` and POST ``/free``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .registry_pack import packed_files

__all__ = ["ComfyUIClient", "ComfyUIServer", "PromptRun", "find_comfyui"]

_TEXT_EVENT = 3  # protocol.BinaryEventTypes.TEXT: progress_text
_ENDS = ("execution_success", "execution_error", "execution_interrupted")


def find_comfyui(repo_root: Path) -> Path | None:
    """The ComfyUI source tree to test against, or None when there is none.

    ``$COMFYUI_DIR`` first, then ``<repo_root>/../shared/comfyui``. A folder
    counts only when it holds ``main.py``.
    """
    configured = os.environ.get("COMFYUI_DIR", "").strip()
    candidates = [Path(configured)] if configured else []
    candidates.append(repo_root.parent / "shared" / "comfyui")
    for candidate in candidates:
        if (candidate / "main.py").is_file():
            return candidate.resolve()
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ComfyUIServer:
    """One ComfyUI process on a copy of ``source``, with this repository as a custom node.

    Args:
        source: The ComfyUI source tree (read only).
        python: ComfyUI's interpreter (from ``scripts/build-comfyui-env.sh``).
        workdir: An empty folder for the copy, the log and the node's storage.
        repo_root: This repository, installed into ``custom_nodes/comfy-llm``.
        env: Extra environment for the server (e.g. ``HF_ENDPOINT``).
    """

    def __init__(
        self,
        source: Path,
        python: Path,
        workdir: Path,
        repo_root: Path,
        env: dict[str, str] | None = None,
    ) -> None:
        self.source = source
        self.python = python
        self.root = workdir / "ComfyUI"
        self.log_path = workdir / "comfyui.log"
        self.repo_root = repo_root
        self.env = dict(env or {})
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def input_dir(self) -> Path:
        """ComfyUI's input folder (what LoadImage, LoadVideo and file nodes list)."""
        return self.root / "input"

    def install(self) -> None:
        """Copy ComfyUI, then install the node from the registry archive's file set."""
        shutil.copytree(
            self.source, self.root, ignore=shutil.ignore_patterns("__pycache__", ".git")
        )
        node = self.root / "custom_nodes" / "comfy-llm"
        for name in packed_files(self.repo_root, untracked=True):
            target = node / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(self.repo_root / name, target)
        uv = shutil.which("uv")
        command = (
            [uv, "pip", "install", "--quiet", "--python", str(self.python)]
            if uv
            else [str(self.python), "-m", "pip", "install", "--quiet"]
        )
        subprocess.run([*command, "-r", str(node / "requirements.txt")], check=True)

    def start(self, timeout: float = 300.0) -> None:
        """Start ``main.py --cpu`` headless; return once the node is listed.

        Raises:
            RuntimeError: The server exited or did not answer in time (with its log's tail).
        """
        self.launch()
        self.wait_until_ready(timeout)

    def launch(self) -> None:
        """Start ``main.py --cpu`` headless and return at once (see :meth:`wait_until_ready`)."""
        self.port = _free_port()
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}
        env.pop("VIRTUAL_ENV", None)
        command = [
            str(self.python),
            "main.py",
            "--cpu",
            "--listen",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--disable-auto-launch",
        ]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command, cwd=self.root, env=env, stdout=log, stderr=subprocess.STDOUT
            )

    def wait_until_ready(self, timeout: float = 300.0) -> None:
        """Return once the launched server lists the node.

        Raises:
            RuntimeError: The server exited or did not answer in time (with its log's tail).
        """
        assert self.process is not None, "launch() first"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ComfyUI exited with {self.process.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(f"{self.url}/object_info/ModalLLM", timeout=5) as reply:
                    if json.loads(reply.read()).get("ModalLLM"):
                        return
            except (OSError, ValueError):
                pass
            time.sleep(0.5)
        raise RuntimeError(f"ComfyUI did not list ModalLLM within {timeout:.0f} s:\n{self.log()}")

    def log(self, tail: int = 6000) -> str:
        """The last ``tail`` characters of the server's output."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-tail:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop the server (terminate, then kill after 20 s)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=20)


@dataclass
class PromptRun:
    """What the websocket said about one queued prompt.

    Attributes:
        prompt_id: The id POST /prompt answered with.
        messages: Every JSON message for this prompt, ``(type, data)``, in order.
        texts: ``(node_id, text)`` of each ``progress_text`` frame.
        text_times: ``time.monotonic()`` when each of ``texts`` arrived.
        outputs: ``executed`` outputs by node id (PreviewAny: ``{"text": [...]}``).
        status: ``execution_success``, ``execution_error`` or ``execution_interrupted``.
        seconds: From POST /prompt to the final message.
    """

    prompt_id: str
    messages: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    texts: list[tuple[str, str]] = field(default_factory=list)
    text_times: list[float] = field(default_factory=list)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    status: str = ""
    seconds: float = 0.0

    def progress(self, node_id: str) -> list[tuple[float, float]]:
        """``(value, max)`` of each ``progress`` message for ``node_id``."""
        return [
            (float(data["value"]), float(data["max"]))
            for kind, data in self.messages
            if kind == "progress" and str(data.get("node")) == node_id
        ]

    def text_of(self, node_id: str) -> str:
        """The first preview text a PreviewAny node showed."""
        return str(self.outputs[node_id]["text"][0])

    def error(self) -> dict[str, Any]:
        """The ``execution_error`` data (empty when there is none)."""
        for kind, data in self.messages:
            if kind == "execution_error":
                return data
        return {}


class ComfyUIClient:
    """The frontend's side of the protocol, for one client id."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client_id = uuid.uuid4().hex

    # -- HTTP ---------------------------------------------------------------------------
    def get_json(self, path: str) -> Any:
        """GET ``path`` and decode the JSON answer."""
        with urllib.request.urlopen(f"{self.url}{path}", timeout=60) as reply:
            return json.loads(reply.read())

    def post_json(self, path: str, body: dict[str, Any]) -> Any:
        """POST ``body`` as JSON; the decoded answer (None for an empty one).

        Raises:
            urllib.error.HTTPError: The server refused (its body is in the message).
        """
        request = urllib.request.Request(
            f"{self.url}{path}",
            data=json.dumps(body).encode("utf-8"),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as reply:
                raw = reply.read()
        except urllib.error.HTTPError as error:
            detail = error.read().decode("utf-8", "replace")
            raise urllib.error.HTTPError(
                error.url, error.code, f"{error.reason}: {detail}", error.headers, None
            ) from None
        return json.loads(raw) if raw.strip() else None

    def object_info(self, node_class: str) -> dict[str, Any]:
        """``/object_info/<node_class>``'s entry."""
        return dict(self.get_json(f"/object_info/{urllib.parse.quote(node_class)}")[node_class])

    def upload(self, path: Path) -> str:
        """Upload a file to the input folder as the frontend does (``/upload/image``)."""
        boundary = uuid.uuid4().hex
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="image"; '
            f'filename="{path.name}"\r\nContent-Type: application/octet-stream\r\n\r\n'
        ).encode()
        tail = (
            f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="overwrite"\r\n\r\n'
            f"true\r\n--{boundary}--\r\n"
        ).encode()
        request = urllib.request.Request(
            f"{self.url}/upload/image",
            data=head + path.read_bytes() + tail,
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=60) as reply:
            return str(json.loads(reply.read())["name"])

    def interrupt(self, prompt_id: str | None = None) -> None:
        """POST /interrupt (the Cancel button), optionally for one prompt."""
        self.post_json("/interrupt", {"prompt_id": prompt_id} if prompt_id else {})

    def free(self, *, unload_models: bool = True, free_memory: bool = True) -> None:
        """POST /free (the "Unload models" / "Free model and node cache" buttons)."""
        self.post_json("/free", {"unload_models": unload_models, "free_memory": free_memory})

    # -- a prompt, over the websocket ---------------------------------------------------
    def run(
        self,
        prompt: dict[str, Any],
        *,
        workflow: dict[str, Any] | None = None,
        timeout: float = 300.0,
        on_message: Any = None,
    ) -> PromptRun:
        """Queue an API-format ``prompt`` and follow it until it ends.

        Args:
            prompt: The API-format workflow (what the frontend's graphToPrompt makes).
            workflow: The UI workflow, sent as ``extra_pnginfo`` like the frontend does.
            timeout: Seconds to wait for the end.
            on_message: Called with ``(run, type, data)`` for each JSON message
                of this prompt and each ``progress_text`` frame (type
                ``"progress_text"``, data ``{"node", "text"}``), e.g. to press
                Cancel mid-run.

        Raises:
            TimeoutError: No final message in time.
        """
        from websockets.sync.client import connect

        ws_url = self.url.replace("http://", "ws://") + f"/ws?clientId={self.client_id}"
        with connect(ws_url, max_size=None, open_timeout=30) as ws:
            started = time.monotonic()
            extra = {"extra_pnginfo": {"workflow": workflow}} if workflow else {}
            answer = self.post_json(
                "/prompt", {"prompt": prompt, "client_id": self.client_id, "extra_data": extra}
            )
            run = PromptRun(prompt_id=str(answer["prompt_id"]))
            deadline = started + timeout
            while not run.status:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"prompt {run.prompt_id} did not end in {timeout:.0f} s")
                try:
                    frame = ws.recv(timeout=remaining)
                except TimeoutError:
                    continue
                if isinstance(frame, bytes):
                    text = self._binary(run, frame)
                    if text is not None and on_message is not None:
                        on_message(run, "progress_text", {"node": text[0], "text": text[1]})
                    continue
                message = json.loads(frame)
                kind, data = message.get("type", ""), message.get("data") or {}
                if data.get("prompt_id") not in (None, run.prompt_id):
                    continue
                if "prompt_id" not in data and kind != "progress_text":
                    continue  # status broadcasts
                run.messages.append((kind, data))
                if kind == "executed":
                    run.outputs[str(data["node"])] = data.get("output") or {}
                if on_message is not None:
                    on_message(run, kind, data)
                if kind in _ENDS:
                    run.status = kind
            run.seconds = time.monotonic() - started
        return run

    @staticmethod
    def _binary(run: PromptRun, frame: bytes) -> tuple[str, str] | None:
        if len(frame) < 8:
            return None
        (event,) = struct.unpack(">I", frame[:4])
        if event != _TEXT_EVENT:
            return None
        (length,) = struct.unpack(">I", frame[4:8])
        text = (
            frame[8 : 8 + length].decode("utf-8"),
            frame[8 + length :].decode("utf-8", "replace"),
        )
        run.texts.append(text)
        run.text_times.append(time.monotonic())
        return text
