"""Memory probes and the lazy torch import."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest
from comfy_llm_residency import (
    CudaMemoryProbe,
    MemoryProbe,
    MemoryProbeError,
    MemorySnapshot,
    PsutilMemoryProbe,
    probe_for_target,
)

GIB = 1024**3


def test_psutil_probe_reads_host_memory():
    snapshot = PsutilMemoryProbe("cpu").snapshot()
    assert isinstance(snapshot, MemorySnapshot)
    assert 0 < snapshot.available_bytes <= snapshot.total_bytes
    assert snapshot.device == "cpu"
    assert snapshot.total_gb == snapshot.total_bytes / GIB
    PsutilMemoryProbe().clear_cache()


@pytest.mark.parametrize(
    ("target", "kind", "device"),
    [
        ("local_apple", PsutilMemoryProbe, "apple_unified"),
        ("local_cpu", PsutilMemoryProbe, "cpu"),
        ("local_cuda", CudaMemoryProbe, None),
        ("modal", CudaMemoryProbe, None),
    ],
)
def test_probe_for_target(target, kind, device):
    probe = probe_for_target(target)
    assert isinstance(probe, kind)
    assert isinstance(probe, MemoryProbe)
    if device is not None:
        assert probe.device == device


def fake_torch(
    *, available=True, free=10 * GIB, total=24 * GIB, reserved=3 * GIB, allocated=1 * GIB
):
    calls = []
    cuda = types.SimpleNamespace(
        is_available=lambda: available,
        current_device=lambda: 0,
        mem_get_info=lambda index: (free, total),
        memory_reserved=lambda index: reserved,
        memory_allocated=lambda index: allocated,
        empty_cache=lambda: calls.append("empty_cache"),
    )
    return types.SimpleNamespace(cuda=cuda), calls


def test_cuda_probe_counts_reusable_cache(monkeypatch):
    torch, _calls = fake_torch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    snapshot = CudaMemoryProbe().snapshot()
    assert snapshot.available_bytes == 12 * GIB  # 10 free + (3 reserved - 1 allocated)
    assert snapshot.total_bytes == 24 * GIB
    assert snapshot.device == "cuda:0"
    assert CudaMemoryProbe(device_index=1).snapshot().device == "cuda:1"


def test_cuda_probe_clear_cache_empties_torch_cache(monkeypatch):
    torch, calls = fake_torch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    CudaMemoryProbe().clear_cache()
    assert calls == ["empty_cache"]


def test_cuda_probe_without_cuda_device(monkeypatch):
    torch, calls = fake_torch(available=False)
    monkeypatch.setitem(sys.modules, "torch", torch)
    with pytest.raises(MemoryProbeError, match="No CUDA device"):
        CudaMemoryProbe().snapshot()
    CudaMemoryProbe().clear_cache()
    assert calls == []


def test_cuda_probe_without_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    with pytest.raises(MemoryProbeError, match="needs torch"):
        CudaMemoryProbe().snapshot()


def test_importing_the_package_never_imports_torch():
    code = (
        "import sys, comfy_llm_residency\n"
        "comfy_llm_residency.probe_for_target('local_cuda')\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
