"""Whether this machine has a CUDA device, for the ``gpu``-marked tests.

The GPU tests run on a lent machine (``scripts/gpu-check.sh``) and are skipped,
and counted so, everywhere else; one probe keeps their skip reason the same.
:func:`allocator_baseline` and :func:`cuda_tensors_alive` say what an unload
must give back, as the H200 showed it (December 2026).
"""

from __future__ import annotations

import gc
from typing import Any

import pytest

__all__ = ["allocator_baseline", "cuda_available", "cuda_tensors_alive", "requires_cuda"]


def cuda_available() -> bool:
    """True when torch is installed and sees a CUDA device."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


requires_cuda = pytest.mark.skipif(
    not cuda_available(), reason="no CUDA device (torch.cuda.is_available() is False)"
)


def allocator_baseline() -> int:
    """``torch.cuda.memory_allocated()`` once this process's cuBLAS workspaces exist.

    torch takes cuBLAS's and cuBLASLt's workspaces from its caching allocator
    and keeps them for the process's life: on the H200, 32 MiB and a little
    more stayed ``memory_allocated()`` after every model was unloaded. So an
    unload is held to this, after a float32 and a bfloat16 GEMM made them.
    """
    import torch

    for dtype in (torch.float32, torch.bfloat16):
        weight = torch.ones(64, 64, device="cuda", dtype=dtype)
        torch.nn.functional.linear(weight, weight, weight[0]).sum().item()
        del weight
    return int(torch.cuda.memory_allocated())


def cuda_tensors_alive() -> list[Any]:
    """Every tensor on a CUDA device that Python still reaches (after a collection).

    The allocator's count includes the workspaces; this does not: after an
    unload it must be empty, however small the model was.
    """
    import torch

    gc.collect()
    found = []
    for thing in gc.get_objects():
        try:
            if isinstance(thing, torch.Tensor) and thing.is_cuda:
                found.append(thing)
        except Exception:  # an object that fails its own isinstance check is not a tensor
            continue
    return found
