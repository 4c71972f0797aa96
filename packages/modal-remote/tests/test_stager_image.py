"""The stager's slim image (review r2 finding 14): it downloads, so no torch, CUDA or vLLM.

Checked against the real client's image definition (the Dockerfile commands
its layers build, the modules its mounts carry), as ``test_app.py`` checks the
GPU image, and by importing the app in a process that can import only what
the slim image installs (the strict stand-in runs every stager the same way).
"""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
from typing import Any

import pytest
from comfy_llm_modal_remote import code_fingerprint
from comfy_llm_modal_remote.wire._image import _lock

from .test_app import _layers, _unwrap

_HEAVY = re.compile(r"torch|torchvision|transformers|vllm|triton|flashinfer.*|nvidia-.*|xformers")


@pytest.fixture(scope="module")
def app_module() -> Any:
    from comfy_llm_modal_remote.worker import _app

    return _app


def _image_of(function: Any) -> Any:
    return inspect.getclosurevars(_unwrap(function)._load).nonlocals["image"]


def _pins(commands: list[str]) -> list[str]:
    (install,) = [c for c in commands if "/.uv/uv pip install" in c]
    return install.split("--compile-bytecode", 1)[1].split()


def test_the_stager_runs_on_a_slim_image_without_torch_cuda_or_the_toolchain(
    app_module: Any,
) -> None:
    commands, modules = _layers(_image_of(app_module.model_stager))
    pins = _pins(commands)
    assert sorted(pins) == sorted(_lock()["stager_requirements"])
    names = {pin.split("==")[0].lower() for pin in pins}
    assert {"huggingface-hub", "hf-xet", "filelock"} <= names
    assert not {name for name in names if _HEAVY.fullmatch(name)}, names
    assert not [c for c in commands if "CUDA toolchain ready" in c or "CUDA_HOME" in c]
    assert f"ENV COMFY_MODAL_LLM_CODE_FINGERPRINT={code_fingerprint()}" in commands
    assert "ENV COMFY_MODAL_REMOTE_STORAGE_ROOT=/storage" in commands
    assert {"comfy_llm_modal_remote", "comfy_llm_staging", "comfy_llm_profiles"} <= set(modules)
    assert "comfy_llm_backend_cuda" not in modules
    # The engine keeps the GPU image, toolchain and all.
    engine = _image_of(app_module.RemoteEngine._get_class_service_function())
    engine_commands, _ = _layers(engine)
    assert "torch" in {pin.split("==")[0] for pin in _pins(engine_commands)}
    assert any("CUDA toolchain ready" in c for c in engine_commands)


_IMPORT_IN_THE_SLIM_IMAGE = """
import json, sys
from comfy_llm_testworld._modal_image import refuse_outside_image
image = json.loads(sys.argv[1])
refuse_outside_image(image["stager_requirements"], image["stager_local_packages"])
import modal
modal.is_local = lambda: False  # a Function's container (modal/_runtime/execution_context.py:13-22)
import comfy_llm_modal_remote.worker._app as app
from comfy_llm_staging import stage_snapshot
from comfy_llm_profiles import resolve_profile
heavy = [m for m in ("torch", "transformers", "vllm", "comfy_llm_backend_cuda") if m in sys.modules]
print(json.dumps({"heavy": heavy, "stager": app.model_stager.__class__.__name__}))
try:
    import torch
except ImportError as error:
    print(type(error).__name__)
"""


def test_the_app_imports_with_only_what_the_slim_image_installs() -> None:
    """In the stager's container: the GPU image's definition must not need backend-cuda."""
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_IN_THE_SLIM_IMAGE, json.dumps(_lock())],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MODAL_IS_REMOTE": "1", "COMFY_MODAL_LLM_CODE_FINGERPRINT": "f" * 64},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    first, refused = done.stdout.split("\n")[:2]
    assert json.loads(first)["heavy"] == []
    assert refused == "ImageImportError"  # the blocker is on: torch is installed here
