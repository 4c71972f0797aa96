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


def test_the_request_inputs_reach_prepare_inputs_by_name_as_data(comfyui: Path) -> None:
    """A modality is data on the way down (issue 28): no field per kind in LLMRequest.

    The node's input fields (``widget(..., request_input=True)``) and the CLI's input
    flags (``INPUT_FLAGS``) name ``prepare_inputs`` keywords; the request carries them
    as one mapping, the unconnected ones left out.
    """
    import inspect

    from comfy_llm._cli._args import INPUT_FLAGS, input_values
    from comfy_llm._cli._main import _build_parser
    from comfy_llm._comfyui._node_inputs import NodeInputs
    from comfy_llm_core import ExecutionTarget
    from comfy_llm_inputs import prepare_inputs

    keywords = set(inspect.signature(prepare_inputs).parameters) - {"prompt", "system_prompt"}
    pixels = object()
    request = NodeInputs(images=pixels, video_frames=3).request(ExecutionTarget.LOCAL_CPU, Path())
    assert dict(request.inputs) == {"images": pixels, "video_frames": 3}
    assert (
        set(
            NodeInputs(images=1, video=2, files=3).request(ExecutionTarget.LOCAL_CPU, Path()).inputs
        )
        <= keywords
    )
    assert {flag.name for flag in INPUT_FLAGS} <= keywords

    args = _build_parser().parse_args(
        ["run", "--prompt", "p", "--video", "clip.mp4", "--file", "a.txt", "--file", "b.pdf"]
    )
    assert input_values(args) == {"video": "clip.mp4", "files": ["a.txt", "b.pdf"]}
