"""The real-ComfyUI tier: one ComfyUI 0.33 server for the session, the node installed
the README's way 1, the tiny checkpoints served by the fake Hub.

Run it with ``scripts/test-comfyui.sh`` (``.ci/run`` does): that builds ComfyUI's
venv and finds the source tree (``$COMFYUI_DIR``, else ``../shared/comfyui``).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.checkpoints import build_checkpoint_files, with_unopened_think
from comfy_llm_testworld.families import build_family_files
from comfy_llm_testworld.real_comfyui import ComfyUIClient, ComfyUIServer, find_comfyui

REPO_ROOT = Path(__file__).resolve().parents[2]
# (repository, checkpoint kind, scripted); the example workflows name a real Hub id,
# served here by a tiny SmolVLM so the workflow runs exactly as saved.
QWEN25_VL_3B = ("Qwen/Qwen2.5-VL-3B-Instruct", "66285546d2b821cf421d4f5eb2576359d3770cd3")
"""Served as a tiny Qwen2.5-VL: the video template names its curated id."""
REPOS = {
    "tiny/qwen35": ("qwen3_5", False),
    "tiny/qwen35-scripted": ("qwen3_5", True),
    "tiny/smolvlm-scripted": ("smolvlm", True),
    "HuggingFaceTB/SmolVLM-256M-Instruct": ("smolvlm", True),
}


def _comfyui_python() -> Path:
    configured = os.environ.get("COMFYUI_PYTHON", "").strip()
    python = Path(configured) if configured else REPO_ROOT / ".venv-comfyui" / "bin" / "python"
    if not python.is_file():
        raise pytest.UsageError(
            f"no ComfyUI interpreter at {python}; run scripts/test-comfyui.sh, which builds it"
        )
    return python


@pytest.fixture(scope="session")
def hub() -> Iterator[FakeHub]:
    """The fake Hub, started empty: the server fixture fills it while ComfyUI boots."""
    with FakeHub() as fake:
        yield fake


@pytest.fixture(scope="session")
def server(hub: FakeHub) -> Iterator[ComfyUIServer]:
    source = find_comfyui(REPO_ROOT)
    if source is None:
        raise pytest.UsageError(
            "no ComfyUI source tree: set COMFYUI_DIR or provide ../shared/comfyui"
        )
    with tempfile.TemporaryDirectory(prefix="comfy-llm-tier-") as work:
        workdir = Path(work)
        env = {
            "HF_ENDPOINT": hub.endpoint,
            "HF_HOME": str(workdir / "hf-home"),
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_ETAG_TIMEOUT": "5",
            "HF_HUB_DOWNLOAD_TIMEOUT": "5",
            "TOKENIZERS_PARALLELISM": "false",
        }
        for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT"):
            os.environ.pop(name, None)
        comfy = ComfyUIServer(source, _comfyui_python(), workdir, REPO_ROOT, env=env)
        comfy.install()
        comfy.launch()
        try:
            for repository, (kind, scripted) in REPOS.items():  # while ComfyUI boots
                hub.add_repo(repository, build_checkpoint_files(kind, scripted=scripted))
            # an instruct template that opens no think block (as Qwen3-VL Instruct's)
            unopened = with_unopened_think(build_checkpoint_files("qwen3_5"))
            hub.add_repo("tiny/qwen35-unopened", unopened)
            # the video template's curated model, at the commit its curated id pins
            hub.add_repo(QWEN25_VL_3B[0], build_family_files("qwen2_5_vl"), sha=QWEN25_VL_3B[1])
            comfy.wait_until_ready()
            yield comfy
        finally:
            comfy.stop()
            if os.environ.get("COMFY_LLM_TIER_LOG"):
                Path(os.environ["COMFY_LLM_TIER_LOG"]).write_text(comfy.log(200_000))


@pytest.fixture(scope="session")
def client(server: ComfyUIServer) -> ComfyUIClient:
    return ComfyUIClient(server.url)


@pytest.fixture(scope="session")
def measurements() -> Iterator[dict[str, Any]]:
    """Figures the tier measures (progress messages, interrupt latency), written
    to ``$COMFY_LLM_TIER_REPORT`` when set."""
    figures: dict[str, Any] = {}
    yield figures
    target = os.environ.get("COMFY_LLM_TIER_REPORT")
    if target:
        Path(target).write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
