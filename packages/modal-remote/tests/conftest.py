from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.checkpoints import build_checkpoint_files
from comfy_llm_testworld.modal_strict import StrictTransport

SCRIPTED = "tiny/smolvlm-scripted"
OTHER = "tiny/smolvlm"


@pytest.fixture
def model_hub(hf_env: FakeHub, monkeypatch: pytest.MonkeyPatch) -> FakeHub:
    """The fake Hub serving the scripted SmolVLM (``modal`` runs it with Transformers)."""
    hf_env.add_repo(SCRIPTED, build_checkpoint_files("smolvlm", scripted=True))
    hf_env.add_repo(OTHER, build_checkpoint_files("smolvlm"))
    return hf_env


@pytest.fixture
def transport(tmp_path: Path) -> Iterator[StrictTransport]:
    made = StrictTransport("comfy-llm-test", tmp_path / "user", root=tmp_path / "modal")
    yield made
    made.close()


@pytest.fixture
def make_transport(tmp_path: Path) -> Iterator[Any]:
    """``make_transport(**options)``: a StrictTransport closed after the test."""
    made: list[StrictTransport] = []

    def make(**options: Any) -> StrictTransport:
        made.append(StrictTransport("app", tmp_path / "u", root=tmp_path / "m", **options))
        return made[-1]

    yield make
    for transport in made:
        transport.close()


@pytest.fixture(autouse=True)
def _fresh_execution_modes() -> Iterator[None]:
    """The vLLM backend's promotion state is process-wide: no test leaks it to another."""
    import importlib

    yield
    accessor = getattr(importlib.import_module("comfy_llm_backend_cuda"), "execution_modes", None)
    if accessor is not None:
        accessor().reset()
