"""The GPU check's real-size stage: Transformers on a random-weight Qwen3.5-2B.

The tiny checkpoints prove the CUDA path works; only real dimensions show
what it costs (vLLM review r2, "GPU check plan", stage 2). The checkpoint is
built on the GPU (``comfy_llm_testworld.real_size``: nothing is downloaded)
and then taken the way a user's local model folder is taken: resolved for
``local_cuda`` (Transformers), staged in place, loaded by the
``ResidentModelManager`` with the real ``CudaMemoryProbe``. Measured:

* memory: the profile's estimate against what NVML sees the load take and
  torch's allocator peak, after the load and after each caption batch;
* captions/s at batch 8 and 32 on 512² and 1024² noise images, every answer
  forced to 64 tokens (random weights never stop early anyway);
* eviction: ``unload_all`` hands the memory back to the driver;
* two-way memory with a tenant (another process, as ComfyUI's models are):
  a tenant that takes all but the reserve after the load gets the next
  caption batch a clear ``InsufficientMemoryError`` or an answer, never a
  CUDA out-of-memory; after eviction the tenant can take what the model held.

``scripts/gpu_check.py`` runs it on CUDA only; its CPU test
(``tests/test_gpu_check_real.py``) runs the same function on a shrunken
shape with the host's memory probe.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["transformers_real_size", "vision_tower_ceilings"]

_GIB = 1024**3
_CAPTION = "Write a one-sentence caption for this image."

#: A process holding GPU memory as another tenant would; grows on "grow <bytes>" lines.
_TENANT = """
import sys, torch
held = []
print("ready", flush=True)
for line in sys.stdin:
    try:
        held.append(torch.empty(int(line.split()[1]), dtype=torch.uint8, device="cuda"))
        print("ok", flush=True)
    except torch.OutOfMemoryError:
        print("oom", flush=True)
"""


class _Tenant:
    """Another process on the GPU that takes memory when told to."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", _TENANT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._answer()

    def _answer(self) -> str:
        assert self._process.stdout is not None
        return self._process.stdout.readline().strip()

    def grow(self, size: int) -> bool:
        """Allocate ``size`` more bytes; False when the driver had not got them."""
        assert self._process.stdin is not None
        self._process.stdin.write(f"grow {max(size, 0)}\n")
        self._process.stdin.flush()
        return self._answer() == "ok"

    def close(self) -> None:
        self._process.kill()
        self._process.wait()


def _nvml_used() -> int | None:
    try:
        import pynvml
    except ImportError:
        return None
    pynvml.nvmlInit()
    try:
        index = int(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or 0)
        return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(index)).used)
    finally:
        pynvml.nvmlShutdown()


def _images(side: int, count: int) -> list[Any]:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(side)
    return [
        Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)) for _ in range(count)
    ]


def _items(side: int, count: int, tokens: int) -> list[Any]:
    from comfy_llm_inputs import ImagePart, PreparedInputs
    from comfy_llm_residency.backend import BatchItem, GenerationSettings

    settings = GenerationSettings(
        max_new_tokens=tokens, min_new_tokens=tokens, temperature=0.0, enable_reasoning=False
    )
    return [
        BatchItem(PreparedInputs.text(_CAPTION, ImagePart(image)), settings)
        for image in _images(side, count)
    ]


def _manager(cuda: bool) -> Any:
    from comfy_llm_backend_cuda import create_backend
    from comfy_llm_residency import CudaMemoryProbe, ResidentModelManager

    if cuda:
        return ResidentModelManager(
            "local_cuda", backend_factory=create_backend, memory_probe=CudaMemoryProbe()
        )
    return ResidentModelManager("local_cpu", backend_factory=create_backend)


@dataclasses.dataclass(frozen=True)
class _Served:
    """The model under test: the manager serving it, its profile and snapshot."""

    manager: Any
    profile: Any
    path: Path
    cuda: bool


def _captions(served: _Served, side: int, batch: int, tokens: int) -> dict[str, Any]:
    """One caption batch: captions/s, tokens a caption, the allocator's peak."""
    items = _items(side, batch, tokens)
    cuda = served.cuda
    if cuda:
        import torch

        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    began = time.perf_counter()
    results = served.manager.run_batch(served.profile, served.path, items)
    seconds = time.perf_counter() - began
    metadata = [result.metadata.to_dict() for result in results]
    row: dict[str, Any] = {
        "seconds": round(seconds, 3),
        "captions_per_second": round(batch / seconds, 3),
        "output_tokens": sorted({m["output_tokens"] for m in metadata}),
        "engine_batch_size": max(int(m.get("batch_size") or 1) for m in metadata),
        "rows_at_once": sorted({int(m.get("batch_size") or 1) for m in metadata}),
    }
    if cuda:
        import torch

        row["allocator_peak_bytes"] = int(torch.cuda.max_memory_allocated())
    return row


def _two_way(served: _Served, reserve_gb: float) -> dict[str, Any]:
    """A tenant takes all but the reserve; then the model is evicted and it takes more."""
    import torch
    from comfy_llm_backend_cuda import GenerationOutOfMemoryError
    from comfy_llm_residency import InsufficientMemoryError

    result: dict[str, Any] = {"reserve_gb": reserve_gb}
    _captions(served, 512, 1, 1)  # resident again
    tenant = _Tenant()
    try:
        free, _ = torch.cuda.mem_get_info()
        taken = int(free - reserve_gb * _GIB)
        result["tenant_took_bytes"] = taken
        result["tenant_got_it"] = tenant.grow(taken)
        try:
            row = _captions(served, 1024, 32, 16)
            result["next_batch"] = "served"
            result["next_batch_rows_at_once"] = row["rows_at_once"]
        except (InsufficientMemoryError, GenerationOutOfMemoryError) as error:
            result["next_batch"] = f"{type(error).__name__}: {error}"[:600]
        except torch.OutOfMemoryError as error:  # the failure this project exists to avoid
            result["next_batch"] = f"CUDA out of memory: {error}"[:600]
        held = int(torch.cuda.memory_reserved())
        served.manager.unload_all()
        torch.cuda.empty_cache()
        result["model_held_bytes"] = held
        result["tenant_took_what_the_model_held"] = tenant.grow(int(held * 0.9))
    finally:
        tenant.close()
    return result


def transformers_real_size(
    work: Path,
    *,
    cuda: bool = True,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    sides: Sequence[int] = (512, 1024),
    batches: Sequence[int] = (8, 32),
    tokens: int = 64,
) -> dict[str, Any]:
    """The stage (module docstring); ``cuda=False`` with ``overrides`` is its CPU test."""
    from comfy_llm_profiles import resolve_profile
    from comfy_llm_residency import default_reserve_gb
    from comfy_llm_staging import stage_local_folder
    from comfy_llm_testworld.real_size import write_real_size_checkpoint

    result: dict[str, Any] = {}
    began = time.perf_counter()
    folder = write_real_size_checkpoint(
        work / "qwen3.5-2b-random", device="cuda" if cuda else "cpu", overrides=overrides
    )
    if cuda:
        import torch

        torch.cuda.empty_cache()
    result["build_seconds"] = round(time.perf_counter() - began, 2)
    result["checkpoint_bytes"] = sum(p.stat().st_size for p in folder.rglob("*.safetensors"))
    began = time.perf_counter()
    target = "local_cuda" if cuda else "local_cpu"
    root = work / "storage"
    profile = resolve_profile(
        str(folder), target, storage_root=root, backends=("transformers",)
    ).profile
    snapshot = stage_local_folder(
        folder,
        repository=profile.repository,
        content_pin=profile.revision,
        storage_root=root,
        profile_id=profile.profile_id,
    )
    result["resolve_seconds"] = round(time.perf_counter() - began, 2)
    result["estimate_bytes"] = int(profile.estimated_memory_bytes)
    result["weight_bytes"] = int(profile.weight_bytes)
    served = _Served(_manager(cuda), profile, Path(snapshot.path), cuda)
    before = _nvml_used() if cuda else None
    began = time.perf_counter()
    load = _captions(served, sides[0], 1, 1)
    result["load_seconds"] = round(time.perf_counter() - began, 2)
    if cuda and before is not None:
        loaded = _nvml_used()
        result["nvml_load_bytes"] = (loaded or 0) - before
        result["allocator_peak_first_request_bytes"] = load["allocator_peak_bytes"]
    result["captions"] = {
        f"{side}px_batch{batch}": _captions(served, side, batch, tokens)
        for side in sides
        for batch in batches
    }
    if cuda:
        import torch

        peaks = [row["allocator_peak_bytes"] for row in result["captions"].values()]
        result["peak_over_estimate"] = round(max(peaks) / result["estimate_bytes"], 3)
        held = _nvml_used()
        served.manager.unload_all()
        torch.cuda.empty_cache()
        after = _nvml_used()
        result["eviction"] = {
            "allocated_after": int(torch.cuda.memory_allocated()),
            "nvml_returned_bytes": (held or 0) - (after or 0),
        }
        result["two_way"] = _two_way(served, default_reserve_gb(target))
    else:
        served.manager.unload_all()
    return result


def vision_tower_ceilings(
    *,
    cuda: bool = True,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    sides: Sequence[int] = (512, 768, 1024),
    counts: Sequence[int] = (1, 4, 16),
    repeat: int = 5,
) -> dict[str, Any]:
    """The vision tower alone at real size: ms an image, and its linear layers' TFLOP/s.

    Qwen3.5-2B's tower (24 blocks, 1024 wide, 16-pixel patches) on random
    bfloat16 weights, SDPA attention, over ``counts`` images of ``sides``
    pixels a side (an image is two temporal frames of ``(side / 16)²``
    patches, merged 2 x 2 into the LLM's tokens): the part of a caption's
    prefill the throughput estimate prices at 0.7 / 1.9 / 4.1 TFLOP.
    """
    import torch
    from comfy_llm_testworld.real_size import real_size_config
    from transformers import AutoConfig
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5VisionModel

    config = AutoConfig.for_model(**real_size_config("2b", overrides=overrides))
    vision = config.vision_config
    vision._attn_implementation = "sdpa"
    device = "cuda" if cuda else "cpu"
    with torch.device(device):
        tower = Qwen3_5VisionModel(vision).bfloat16().eval()
    params = sum(p.numel() for p in tower.parameters())
    patch = int(vision.patch_size)
    width = int(vision.in_channels) * int(vision.temporal_patch_size) * patch * patch
    result: dict[str, Any] = {"parameters": params}

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    for side in sides:
        grid = side // patch
        for count in counts:
            patches = count * grid * grid
            pixels = torch.randn(patches, width, device=device, dtype=torch.bfloat16)
            thw = torch.tensor([[1, grid, grid]] * count, device=device)
            with torch.no_grad():
                tower(pixels, grid_thw=thw)  # warm-up
                sync()
                began = time.perf_counter()
                for _ in range(repeat):
                    tower(pixels, grid_thw=thw)
                sync()
            seconds = (time.perf_counter() - began) / repeat
            result[f"{side}px_x{count}"] = {
                "ms_per_image": round(seconds * 1000 / count, 3),
                "linear_tflops": round(2 * params * patches / seconds / 1e12, 4),
            }
    del tower
    if cuda:
        torch.cuda.empty_cache()
    return result
