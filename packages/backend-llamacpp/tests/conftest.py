"""Tiny GGUF files of the test world, written once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from comfy_llm_testworld.gguf_checkpoints import GgufPair, write_gguf_pair


@pytest.fixture(scope="session")
def gguf_pair(tmp_path_factory: pytest.TempPathFactory) -> GgufPair:
    """The tiny SmolVLM (random weights, F32) as model + mmproj."""
    return write_gguf_pair(tmp_path_factory.mktemp("gguf-random"))


@pytest.fixture(scope="session")
def scripted_pair(tmp_path_factory: pytest.TempPathFactory) -> GgufPair:
    """The scripted tiny SmolVLM (greedy follows a fixed chain), Q8_0 text weights."""
    return write_gguf_pair(
        tmp_path_factory.mktemp("gguf-scripted"), scripted=True, quantization="Q8_0"
    )


@pytest.fixture
def hostile_dir(tmp_path: Path) -> Path:
    return tmp_path
