from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from comfy_llm_residency import reset_managers
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.checkpoints import build_checkpoint_files
from comfy_llm_testworld.comfyui_standin import installed_standin

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
