"""Each node's inputs are one typed record: the widget schema and the run read it alike.

Saved workflows restore widget values by position, so the schema's names, order
and defaults are the record's fields, in order; a value ComfyUI leaves out is
the field's default, which is the widget's default.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from comfy_llm_core import defaults


def _records() -> list[tuple[type, type]]:
    from comfy_llm._comfyui._caption_inputs import CaptionInputs
    from comfy_llm._comfyui._caption_node import CaptionImagesNode
    from comfy_llm._comfyui._modal_llm import ModalLLMNode
    from comfy_llm._comfyui._node_inputs import NodeInputs

    return [(ModalLLMNode, NodeInputs), (CaptionImagesNode, CaptionInputs)]


def test_the_schema_is_the_record_in_field_order_with_its_defaults(comfyui: Path) -> None:
    for node, record in _records():
        inputs = node.define_schema().inputs
        fields = dataclasses.fields(record)
        assert [item.id for item in inputs] == [field.name for field in fields], node
        assert [item.default for item in inputs] == [field.default for field in fields], node
        assert dataclasses.is_dataclass(record) and record.__dataclass_params__.frozen


def test_an_input_the_node_does_not_have_is_refused_before_the_run(comfyui: Path) -> None:
    for node, _record in _records():
        with pytest.raises(TypeError, match="no_such_input"):
            node.execute(prompt="p", model_profile="m", no_such_input=1)


def test_the_default_modal_gpu_is_named_once(comfyui: Path) -> None:
    from comfy_llm._cli._main import _build_parser
    from comfy_llm._comfyui._caption_inputs import CaptionInputs
    from comfy_llm._comfyui._inputs import MODAL_GPUS
    from comfy_llm._comfyui._node_inputs import NodeInputs
    from comfy_llm._request import LLMRequest

    assert defaults.DEFAULT_GPU in MODAL_GPUS
    caption_cli = _build_parser().parse_args(["caption", "x"])
    assert (
        NodeInputs().modal_gpu
        == CaptionInputs().modal_gpu
        == LLMRequest(model="m", prompt="p").modal_gpu
        == caption_cli.gpu
        == defaults.DEFAULT_GPU
    )


def test_comfyui_start_up_loads_no_engine_torch_or_modal_from_the_node(comfyui: Path) -> None:
    """Light modules load at module level; engines, torch and modal still wait for a run."""
    code = (
        "import asyncio, json, sys\n"
        "import comfy_api.latest\n"
        "import comfy_llm\n"
        "extension = asyncio.run(comfy_llm.comfy_entrypoint())\n"
        "for node in asyncio.run(extension.get_node_list()):\n"
        "    node.define_schema()\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(comfyui)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    heavy = {"torch", "transformers", "mlx", "mlx_vlm", "vllm", "modal", "llama_cpp"}
    loaded = set(json.loads(done.stdout))
    assert not loaded & heavy
    assert "comfy_llm_modal_remote" not in loaded and "comfy_llm_backend_cuda" not in loaded
