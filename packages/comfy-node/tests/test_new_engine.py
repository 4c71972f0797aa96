"""A new engine is a package, one record and one extra: a fake one runs through the node.

The fake engine (``comfy_llm_testworld.fake_engine``) is a backend package in
one module. The test adds its one :class:`EngineSpec` record to the engine
table and one family record that routes a tiny checkpoint to it, then runs
the ModalLLM node through the ComfyUI stand-in: the Hub reference resolves
to a profile on the fake engine, staging downloads it, the resident manager
admits it, residency's factory imports the package the record names, and
the answer comes back through the node's outputs. Nothing else in the house
is told about the engine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from comfy_llm_testworld import FakeHub


@pytest.fixture
def fake_engine(monkeypatch: pytest.MonkeyPatch) -> Any:
    from comfy_llm_profiles import ENGINES
    from comfy_llm_profiles._families import FAMILIES
    from comfy_llm_testworld import fake_engine

    monkeypatch.setitem(ENGINES, fake_engine.RECORD.name, fake_engine.RECORD)  # the engine
    monkeypatch.setitem(FAMILIES, fake_engine.FAMILY.name, fake_engine.FAMILY)  # a family on it
    return fake_engine


def test_a_fake_engine_answers_through_the_node(
    fake_engine: Any,
    hf_env: FakeHub,
    storage: Path,
    comfyui: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from comfy_api.latest import io
    from comfy_llm._comfyui._modal_llm import ModalLLMNode
    from comfy_llm_testworld.engine_vocabulary import vocabulary_problems

    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")
    hf_env.add_repo("tiny/fake-echo", fake_engine.checkpoint_files())
    ModalLLMNode.hidden = io.HiddenHolder(unique_id="7")
    image = np.random.default_rng(0).random((1, 24, 32, 3), dtype=np.float32)

    output = ModalLLMNode.execute(
        prompt="Describe it.", model_profile="tiny/fake-echo", images=image, temperature=0.0
    )
    response, metadata_json, reasoning = output.args
    metadata = json.loads(metadata_json)

    assert response == "echo: Describe it. (1 images)"
    assert reasoning == ""
    assert metadata["backend"] == "fake_echo"
    assert metadata["execution_target"] == "local_cpu"
    assert metadata["image_count"] == 1
    assert metadata["cache_status"] == "cold"
    assert (metadata["engine"], metadata["snapshot_downloaded"]) == ("fake_echo", True)
    assert metadata["output_tokens"] == len(response)
    # The fake package speaks the same vocabulary as every real backend package.
    assert vocabulary_problems(fake_engine.__name__, fake_engine.ENGINE_NAMES) == []
