"""Which kernels a local NVIDIA machine can run vLLM with, decided before vLLM is imported.

* The driver: vLLM 0.32's CUDA wheel links ``libcudart.so.13`` and pins
  ``torch==2.13.0`` (CUDA 13), so the driver must support CUDA 13 (R580+).
  NVML says so without a CUDA context and without importing vLLM or torch
  (``nvmlSystemGetCudaDriverVersion_v2``); below it the load stops with
  :class:`CudaDriverTooOldError` before vLLM's import replaces anything.
* Qwen3.5's linear-attention (Gated DeltaNet) prefill: vLLM picks FlashInfer's
  kernel on Hopper whenever the choice is "auto"
  (model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py 93-189), which is
  JIT-compiled at the first prefill and needs ``nvcc`` (flashinfer/jit/
  cpp_ext.py); a ComfyUI machine without a CUDA toolkit then fails to start
  the engine. Triton's kernel (FLA) is what runs unless
  ``COMFY_LLM_VLLM_GDN_PREFILL=flashinfer`` asks for FlashInfer, which is
  honoured only where ``nvcc`` exists (measure it first: the setting is for
  a machine where it was faster).
* Attention: vLLM's CUDA default is FlashAttention (precompiled in the
  wheel) on sm90 and sm120, but FlashInfer first on sm100
  (platforms/cuda.py 158-179), which JIT-compiles too; there, without
  ``nvcc``, the seed's choice ``TRITON_ATTN`` is passed instead.
"""

from __future__ import annotations

import ctypes
import shutil
from pathlib import Path
from typing import Final

from comfy_llm_core import InvalidSettingError, env_choice, env_str

from ..errors import CudaDriverTooOldError

__all__ = [
    "GDN_PREFILL_ENV",
    "REQUIRED_DRIVER_CUDA",
    "attention_backend",
    "check_driver",
    "cuda_driver_version",
    "gdn_prefill_backend",
    "nvcc_path",
]

GDN_PREFILL_ENV: Final = "COMFY_LLM_VLLM_GDN_PREFILL"
#: CUDA 13.0 as NVML encodes it (1000 x major + 10 x minor): driver R580.
REQUIRED_DRIVER_CUDA: Final = 13000
_NVML_LIBRARY: Final = "libnvidia-ml.so.1"


def cuda_driver_version(library: str = _NVML_LIBRARY) -> int | None:
    """The CUDA version the driver supports (``13000`` for 13.0); None without NVML."""
    try:
        nvml = ctypes.CDLL(library)
    except OSError:
        return None
    if nvml.nvmlInit_v2() != 0:
        return None
    try:
        version = ctypes.c_int(0)
        if nvml.nvmlSystemGetCudaDriverVersion_v2(ctypes.byref(version)) != 0:
            return None
        return int(version.value)
    finally:
        nvml.nvmlShutdown()


def _dotted(version: int) -> str:
    return f"{version // 1000}.{version % 1000 // 10}"


def check_driver(profile_id: str, version: int | None) -> None:
    """Refuse a driver older than the CUDA 13 vLLM build needs (None: no NVIDIA driver).

    Raises:
        CudaDriverTooOldError: The driver supports an older CUDA than 13.0.
    """
    if version is not None and version < REQUIRED_DRIVER_CUDA:
        raise CudaDriverTooOldError(profile_id, _dotted(version), _dotted(REQUIRED_DRIVER_CUDA))


def nvcc_path() -> str | None:
    """``nvcc`` on PATH, else under ``CUDA_HOME`` / ``CUDA_PATH``; None without a toolkit."""
    found = shutil.which("nvcc")
    if found:
        return found
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        home = env_str(variable) or ""
        if home and (Path(home) / "bin" / "nvcc").is_file():
            return str(Path(home) / "bin" / "nvcc")
    return None


def gdn_prefill_backend(nvcc: str | None) -> str:
    """``triton``, or ``flashinfer`` where asked for and ``nvcc`` exists.

    Raises:
        InvalidSettingError: ``flashinfer`` was asked for on a machine without ``nvcc``.
    """
    wanted = env_choice(GDN_PREFILL_ENV, "triton", ("triton", "flashinfer"))
    if wanted == "flashinfer" and nvcc is None:
        raise InvalidSettingError(
            GDN_PREFILL_ENV,
            wanted,
            "triton on a machine without nvcc: FlashInfer JIT-compiles its Gated DeltaNet "
            "prefill kernel (install a CUDA 13 toolkit, or unset the variable)",
        )
    return wanted


def attention_backend(capability: int | None, nvcc: str | None) -> str | None:
    """``TRITON_ATTN`` where vLLM would JIT-compile FlashInfer without ``nvcc``; else None.

    None leaves vLLM's own choice (FlashAttention on sm90/sm120).
    """
    if capability is not None and capability // 10 == 10 and nvcc is None:
        return "TRITON_ATTN"
    return None
