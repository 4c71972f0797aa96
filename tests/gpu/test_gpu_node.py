"""The node path on a real NVIDIA GPU (marked ``gpu``; skipped, and counted so, without CUDA).

``scripts/gpu-check.sh`` runs these on a lent GPU machine. They use the test
world's tiny checkpoints from the fake Hub (no network) resolved for
``local_cuda`` with Transformers, the real ``CudaMemoryProbe`` (admission
against ``torch.cuda.mem_get_info``) and NVML for what the driver sees.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_testworld.cuda import allocator_baseline, cuda_tensors_alive, requires_cuda

pytestmark = [
    pytest.mark.gpu,
    requires_cuda,
]

REPO = "gpu-owner/qwen3.5-tiny"


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Path]]:
    from comfy_llm_core import ExecutionTarget
    from comfy_llm_testworld import FakeHub
    from comfy_llm_testworld.checkpoints import build_checkpoint_files
    from comfy_llm_testworld.staged import hub_online, staged_profile

    root = tmp_path_factory.mktemp("storage")
    with pytest.MonkeyPatch.context() as patch, FakeHub() as hub:
        patch.setenv("HF_HOME", str(tmp_path_factory.mktemp("hf_home")))
        patch.delenv("HF_TOKEN", raising=False)
        hub_online(patch)  # the GPU check runs with HF_HUB_OFFLINE=1
        hub.add_repo(REPO, build_checkpoint_files("qwen3_5"))
        yield staged_profile(
            REPO,
            ExecutionTarget.LOCAL_CUDA,
            storage_root=root,
            endpoint=hub.endpoint,
            backends=("transformers",),
        )


def _nvml_used() -> int:
    """Device memory in use as the driver reports it (NVML; mem_get_info without pynvml)."""
    try:
        import pynvml
    except ImportError:
        import torch

        free, total = torch.cuda.mem_get_info()
        return int(total - free)
    pynvml.nvmlInit()
    try:
        index = int(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or 0)
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        return int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)
    finally:
        pynvml.nvmlShutdown()


def _manager() -> Any:
    from comfy_llm_backend_cuda import create_backend
    from comfy_llm_residency import CudaMemoryProbe, ResidentModelManager

    return ResidentModelManager(
        "local_cuda", backend_factory=create_backend, memory_probe=CudaMemoryProbe()
    )


def test_node_path_on_cuda_admits_against_mem_get_info_and_eviction_returns_memory(staged):
    import torch
    from comfy_llm_inputs import PreparedInputs
    from comfy_llm_residency.backend import GenerationSettings

    profile, path = staged
    manager = _manager()
    workspaces = allocator_baseline()  # this process's CUDA context (618 MiB on an H200) too
    before = _nvml_used()
    result = manager.run(
        profile,
        path,
        PreparedInputs.text("hi"),
        GenerationSettings(max_new_tokens=16, temperature=0.0),
        reserve_gb=1.0,
    )
    metadata = result.metadata.to_dict()
    assert metadata["device"].startswith("cuda")
    assert metadata["cache_status"] == "cold" and metadata["output_tokens"] > 0
    assert torch.cuda.memory_allocated() > 0
    loaded = _nvml_used()
    manager.unload_all()
    assert cuda_tensors_alive() == []  # no tensor of the model is left
    assert torch.cuda.memory_allocated() <= workspaces  # the H200: 0.6 MiB below, none above
    assert _nvml_used() < loaded  # the driver sees the memory come back
    assert _nvml_used() - before < 512 * 1024**2  # all but cuBLAS's workspace and the like


def test_batch_identity_on_cuda_within_token_tolerance(staged):
    """Greedy batched rows equal single runs; on CUDA low-bit logit differences may flip
    a late token, so the comparison allows the first divergence after 90 % of the tokens
    (vLLM documents the same: exact only with VLLM_BATCH_INVARIANT=1)."""
    from comfy_llm_inputs import PreparedInputs
    from comfy_llm_residency.backend import BatchItem, GenerationSettings

    profile, path = staged
    manager = _manager()
    settings = GenerationSettings(max_new_tokens=32, temperature=0.0, enable_reasoning=False)
    prompts = ["one", "two", "three", "four"]
    singles = [manager.run(profile, path, PreparedInputs.text(p), settings) for p in prompts]
    batch = manager.run_batch(
        profile, path, [BatchItem(PreparedInputs.text(p), settings) for p in prompts]
    )
    for single, batched in zip(singles, batch, strict=True):
        a, b = single.response, batched.response
        same = next(
            (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
        )
        assert same >= int(0.9 * min(len(a), len(b))), (a, b)
    manager.unload_all()


def test_host_bridge_with_real_comfyui_model_management():
    comfyui = os.environ.get("COMFYUI_DIR")
    if not comfyui or not Path(comfyui, "comfy", "model_management.py").is_file():
        pytest.skip("no ComfyUI tree given (set COMFYUI_DIR to a ComfyUI checkout)")
    import sys

    sys.path.insert(0, comfyui)
    import comfy.model_management as mm

    free_before = mm.get_free_memory(mm.get_torch_device())
    mm.free_memory(1024**2, mm.get_torch_device())
    assert mm.get_free_memory(mm.get_torch_device()) >= free_before * 0.9
