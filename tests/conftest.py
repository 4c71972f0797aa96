from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from comfy_llm_testworld.comfyui_standin import installed_standin

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture
def comfyui_standin() -> Iterator[Path]:
    with installed_standin() as path:
        yield path
