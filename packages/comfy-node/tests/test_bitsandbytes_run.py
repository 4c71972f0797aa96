"""``owner/model:nf4`` and ``:int8`` through the CLI and the node, real bitsandbytes on the CPU.

The scripted checkpoint's greedy answer is ``<think> a b</think> answer``;
quantized at load it still is, and the metadata says which quantization ran.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from comfy_llm._cli import main
from comfy_llm_testworld import FakeHub


def _quantized(metadata: dict[str, Any], method: str, label: str) -> None:
    assert metadata["quantization_method"] == method
    assert metadata["quantization"] == label
    assert metadata["quantization_library"].startswith("bitsandbytes 0.50.")
    assert metadata["quantized_linear_layers"] > 0
    assert metadata["backend"] == "transformers"


def test_the_cli_runs_a_model_quantized_to_nf4(
    model_hub: FakeHub, storage: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--model", "tiny/qwen35-scripted:nf4", "--prompt", "hi", "--json"]
    code = main([*argv, "--target", "local_cpu", "--temperature", "0"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data = json.loads(captured.out)
    assert (data["response"], data["reasoning"]) == ("answer", "a b")
    _quantized(data["metadata"], "bnb_nf4", "bitsandbytes 4-bit NF4")


@pytest.fixture
def local_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")


def test_the_node_runs_a_model_quantized_to_int8(
    local_cpu: None, model_hub: FakeHub, storage: Path, comfyui: Path
) -> None:
    from comfy_api.latest import io
    from comfy_llm._comfyui._modal_llm import ModalLLMNode

    ModalLLMNode.hidden = io.HiddenHolder(unique_id="7")
    image = np.random.default_rng(0).random((1, 24, 32, 3), dtype=np.float32)
    output = ModalLLMNode.execute(
        prompt="What is this?",
        model_profile="tiny/qwen35-scripted",
        custom_model="tiny/qwen35-scripted:int8",
        images=image,
        temperature=0.0,
    )
    response, metadata_json, reasoning = output.args
    assert (response, reasoning) == ("answer", "a b")
    metadata = json.loads(metadata_json)
    _quantized(metadata, "bnb_int8", "bitsandbytes 8-bit")
    assert metadata["image_count"] == 1
