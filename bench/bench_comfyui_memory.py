"""Bench: a real ComfyUI unloads comfy-llm's resident model (POST /free, "Unload models").

Run from the workspace root, against a ComfyUI copy that has its own venv
(``../shared/COMFYUI.md``: copy the tree, ``uv venv``, install its
requirements plus this repository's ``requirements.txt``)::

    uv run --frozen python bench/bench_comfyui_memory.py --comfyui "$COMFYUI_COPY" \\
        --out bench/results/comfyui_memory.json

What it does, all on 127.0.0.1 and offline:

1. builds a tiny Qwen3.5 checkpoint with a wide MLP (~100 MB of float32
   weights, so the unload shows in the process RSS) and serves it from the
   test world's fake Hub;
2. links this repository into ``custom_nodes/`` (install way 1: the repository
   root's ``__init__.py`` puts ``packages/*/src`` on ``sys.path``) and starts
   ComfyUI headless with ``--cpu`` on a free port;
3. runs ``ModalLLM -> Preview as Text`` (cold), again (warm), reads the server's
   RSS, POSTs ``/free`` with ``unload_models`` and ``free_memory``, waits for
   comfy-llm's log line, reads the RSS again, and runs once more (cold,
   ``evicted_by_host: true``);
4. runs the LLM then core's ``EmptyLatentImage`` with a large batch (a
   memory-hungry built-in node) and records whether the LLM was evicted.

It asserts nothing; it prints and writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPOSITORY = "bench/qwen35-wide"
WIDE_INTERMEDIATE = 196_608  # 2 layers x 3 x 64 x this x 4 bytes ~ 300 MB
ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _http(url: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        raw = response.read()
    return json.loads(raw) if raw.strip() else None


def _wait_for(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def _llm_workflow(seed: int) -> dict[str, Any]:
    return {
        "1": {
            "class_type": "ModalLLM",
            "inputs": {
                "prompt": "Describe a red square.",
                "model_profile": REPOSITORY,
                "max_new_tokens": 8,
                "temperature": 0.0,
                "seed": seed,
                "enable_reasoning": False,
                "local_reserve_free_memory_gb": 0.5,
            },
        },
        "2": {"class_type": "PreviewAny", "inputs": {"source": ["1", 1]}},
    }


def _hungry_workflow(seed: int, batch: int) -> dict[str, Any]:
    workflow = _llm_workflow(seed)
    workflow["3"] = {
        "class_type": "EmptyLatentImage",
        "inputs": {"width": 2048, "height": 2048, "batch_size": batch},
    }
    workflow["4"] = {"class_type": "PreviewAny", "inputs": {"source": ["3", 0]}}
    return workflow


class Server:
    def __init__(self, comfyui: Path, env: dict[str, str], log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        python = comfyui / ".venv" / "bin" / "python"
        command = [str(python), "main.py", "--cpu", "--listen", "127.0.0.1"]
        command += ["--port", str(self.port), "--disable-auto-launch"]
        self._out = log.open("w")
        self.process = subprocess.Popen(
            command, cwd=comfyui, env=env, stdout=self._out, stderr=subprocess.STDOUT
        )
        _wait_for(self._up, 300, "ComfyUI to start")

    def _up(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"ComfyUI exited; see {self.log}")
        try:
            _http(f"{self.url}/system_stats")
        except OSError:
            return False
        return True

    def rss(self) -> int:
        import psutil

        return int(psutil.Process(self.process.pid).memory_info().rss)

    def log_text(self) -> str:
        self._out.flush()
        return self.log.read_text(errors="replace")

    def run(self, workflow: dict[str, Any]) -> dict[str, Any]:
        prompt_id = _http(f"{self.url}/prompt", {"prompt": workflow})["prompt_id"]

        def done() -> Any:
            entry = _http(f"{self.url}/history/{prompt_id}").get(prompt_id)
            return entry if entry and entry.get("status", {}).get("completed") else None

        entry = _wait_for(done, 600, f"prompt {prompt_id}")
        text = entry["outputs"]["2"]["text"][0]
        return json.loads(text)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self._out.close()


def _settled_rss(server: Server) -> int:
    time.sleep(2.0)
    return server.rss()


def _comfyui_version(comfyui: Path) -> str:
    match = re.search(r'"(.+?)"', (comfyui / "comfyui_version.py").read_text())
    return match.group(1) if match else "unknown"


def _summary(meta: dict[str, Any]) -> dict[str, Any]:
    keys = ("cache_status", "evicted_by_host", "host_eviction_reason", "load_seconds")
    return {key: meta.get(key) for key in (*keys, "measured_allocation_bytes")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--comfyui", type=Path, required=True, help="ComfyUI copy with .venv")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--latent-batch", type=int, default=64, help="EmptyLatentImage batch")
    args = parser.parse_args()
    comfyui = args.comfyui.resolve()

    from comfy_llm_testworld import FakeHub, _ckpt_configs
    from comfy_llm_testworld.checkpoints import build_checkpoint_files

    _ckpt_configs.INTERMEDIATE = WIDE_INTERMEDIATE  # a wide MLP: weight bytes to see
    files = build_checkpoint_files("qwen3_5")
    weight_bytes = sum(len(v) for k, v in files.items() if k.endswith(".safetensors"))

    link = comfyui / "custom_nodes" / "comfy-llm"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(ROOT, target_is_directory=True)
    work = Path(tempfile.mkdtemp(prefix="comfyui-memory-"))
    results: dict[str, Any] = {
        "comfyui_version": _comfyui_version(comfyui),
        "checkpoint_weight_bytes": weight_bytes,
    }
    with FakeHub() as hub:
        hub.add_repo(REPOSITORY, files)
        env = dict(os.environ)
        env.update(
            HF_ENDPOINT=hub.endpoint,
            HF_HUB_DISABLE_TELEMETRY="1",
            COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT=str(work / "storage"),
            COMFY_LLM_EXECUTION_TARGET="local_cpu",
        )
        env.pop("VIRTUAL_ENV", None)
        server = Server(comfyui, env, work / "comfyui.log")
        try:
            results["runs"] = runs = {}
            runs["cold"] = _summary(server.run(_llm_workflow(1)))
            runs["warm"] = _summary(server.run(_llm_workflow(2)))
            results["rss_before_free_bytes"] = _settled_rss(server)
            _http(f"{server.url}/free", {"unload_models": True, "free_memory": True})
            _wait_for(
                lambda: "for ComfyUI: ComfyUI unloaded all" in server.log_text(),
                60,
                "comfy-llm's unload log line",
            )
            results["rss_after_free_bytes"] = _settled_rss(server)
            runs["after_free"] = _summary(server.run(_llm_workflow(3)))
            mark = len(server.log_text())
            hungry = server.run(_hungry_workflow(4, args.latent_batch))
            runs["llm_then_empty_latent"] = _summary(hungry)
            runs["after_empty_latent"] = _summary(server.run(_llm_workflow(5)))
            tail = server.log_text()[mark:]
            results["llm_evicted_by_empty_latent"] = "for ComfyUI" in tail
            results["log_lines"] = [
                line for line in server.log_text().splitlines() if "comfy-llm" in line
            ]
        finally:
            server.stop()
    results["rss_drop_bytes"] = results["rss_before_free_bytes"] - results["rss_after_free_bytes"]
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    sys.exit(0)


if __name__ == "__main__":
    main()
