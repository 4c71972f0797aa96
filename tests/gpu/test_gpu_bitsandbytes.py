"""bitsandbytes 8-bit and NF4 on a real NVIDIA GPU (marked ``gpu``; skipped, and counted so,
without CUDA or without the ``bitsandbytes`` extra's packages).

The CPU suite runs the same loads on bitsandbytes' CPU backend
(``packages/backend-cuda/tests/test_bitsandbytes.py``); what only a GPU shows
is the CUDA kernels: the layers land on ``cuda``, the 4-bit compute dtype is
the GPU's 16-bit one, the answer streams, and unloading returns the memory.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_testworld.cuda import allocator_baseline, cuda_tensors_alive, requires_cuda

pytestmark = [
    pytest.mark.gpu,
    requires_cuda,
    pytest.mark.skipif(
        importlib.util.find_spec("bitsandbytes") is None
        or importlib.util.find_spec("accelerate") is None,
        reason="the bitsandbytes extra is not installed (scripts/gpu-wheels.sh carries it)",
    ),
]

REPO = "gpu-owner/smolvlm-tiny"


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Any, Path]]]:
    from comfy_llm_core import ExecutionTarget
    from comfy_llm_testworld import FakeHub
    from comfy_llm_testworld.checkpoints import build_checkpoint_files
    from comfy_llm_testworld.staged import hub_online, staged_profile

    root = tmp_path_factory.mktemp("storage")
    with pytest.MonkeyPatch.context() as patch, FakeHub() as hub:
        patch.setenv("HF_HOME", str(tmp_path_factory.mktemp("hf_home")))
        patch.delenv("HF_TOKEN", raising=False)
        hub_online(patch)  # the GPU check runs with HF_HUB_OFFLINE=1
        hub.add_repo(REPO, build_checkpoint_files("smolvlm"))
        found = {}
        for tag in ("int8", "nf4"):
            found[tag] = staged_profile(
                f"{REPO}:{tag}",
                ExecutionTarget.LOCAL_CUDA,
                storage_root=root,
                endpoint=hub.endpoint,
                backends=("transformers",),
            )
        yield found


def _converted_layers(backend: Any, layer: str) -> int:
    """How many of the model's layers bitsandbytes converted, each on the GPU.

    A function of its own: a layer held in the test's locals would keep its
    tensors alive after the unload (the H200 run counted 87 and 108).
    """
    converted = [m for m in backend._model.modules() if type(m).__name__ == layer]
    assert converted and all(m.weight.device.type == "cuda" for m in converted)
    return len(converted)


# the tiny checkpoint's 32-wide layers: bitsandbytes' CUDA NF4 GEMM wants multiples of
# 64 and warns that it takes its slower kernel (backends/cuda/ops.py; seen on the H200)
@pytest.mark.filterwarnings("ignore:inner dimension .* is not aligned for fast kernel")
@pytest.mark.parametrize(("tag", "layer"), [("int8", "Linear8bitLt"), ("nf4", "Linear4bit")])
def test_bitsandbytes_quantizes_and_answers_on_the_gpu(
    staged: dict[str, tuple[Any, Path]], tag: str, layer: str
) -> None:
    import torch
    from comfy_llm_backend_cuda import create_backend
    from comfy_llm_inputs import ImagePart, PreparedInputs
    from comfy_llm_residency.backend import GenerationSettings
    from comfy_llm_testworld.sinks import RecordingSink
    from PIL import Image

    profile, path = staged[tag]
    before = allocator_baseline()
    backend = create_backend(profile, path, lambda event: None)
    try:
        converted = _converted_layers(backend, layer)  # holds no layer past the unload
        meta = backend.runtime_metadata()
        assert meta["quantization_method"] == f"bnb_{tag}"
        assert str(meta["device"]).startswith("cuda")
        assert meta["quantized_linear_layers"] == converted
        settings = GenerationSettings(max_new_tokens=6, temperature=0.0, enable_reasoning=False)
        inputs = PreparedInputs.text("describe", ImagePart(Image.new("RGB", (48, 40), "red")))
        sink = RecordingSink()
        result = backend.generate(inputs, settings, sink)
        assert len(result.token_ids) == 6
        assert [token for token, _ in sink.calls] == list(result.token_ids)
    finally:
        backend.unload()
    assert cuda_tensors_alive() == []
    assert torch.cuda.memory_allocated() <= before
