"""Choosing the execution target for this process.

Apple Silicon runs MLX-VLM, an NVIDIA GPU runs Transformers (vLLM where
installed), anything else runs Transformers on the CPU. An explicit target
(CLI ``--target`` or ``COMFY_LLM_EXECUTION_TARGET``) always wins, so Linux
tests and users can drive the MLX-VLM path through ``mlx[cpu]``.

Detection never imports torch (seconds on every CLI call): an NVIDIA GPU
counts when the installed torch is a CUDA build (read from its
``torch/version.py`` file) and the CUDA driver library reports a device.
"""

from __future__ import annotations

import ctypes
import importlib.util
import platform
import re
import sys
from pathlib import Path

from comfy_llm_core import ExecutionTarget

from comfy_llm._settings import TARGET_ENV, forced_target

__all__ = ["detect_target", "parse_target"]


def parse_target(value: str) -> ExecutionTarget:
    """Parse a target name, refusing unknown ones with the accepted names.

    Raises:
        ValueError: ``value`` is not a known execution target.
    """
    try:
        return ExecutionTarget(value.strip())
    except ValueError:
        known = ", ".join(t.value for t in ExecutionTarget)
        raise ValueError(f"Unknown execution target {value!r}; use one of: {known}.") from None


def _torch_cuda_build() -> bool:
    """Whether an installed torch was built with CUDA, without importing it."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return False
    for location in spec.submodule_search_locations:
        try:
            text = (Path(location) / "version.py").read_text(encoding="utf-8")
        except OSError:
            continue
        match = re.search(r"^cuda\s*(?::[^=]*)?=\s*(.+)$", text, re.MULTILINE)
        return match is not None and match.group(1).strip() not in {"None", "''", '""'}
    return False


_NVML_LIBRARIES = ("nvml.dll",) if sys.platform == "win32" else ("libnvidia-ml.so.1",)


def _nvidia_devices() -> int:
    """GPUs the NVIDIA driver reports, through NVML; 0 without a driver.

    NVML creates no CUDA context (unlike ``cuInit``), so processes forked
    later can still use CUDA. A few milliseconds.
    """
    for name in _NVML_LIBRARIES:
        try:
            nvml = ctypes.CDLL(name)
        except OSError:
            continue
        count = ctypes.c_uint(0)
        try:
            if nvml.nvmlInit_v2() != 0:
                return 0
            try:
                if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
                    return 0
            finally:
                nvml.nvmlShutdown()
        except AttributeError:
            return 0
        return count.value
    gpus = Path("/proc/driver/nvidia/gpus")
    return sum(1 for _ in gpus.iterdir()) if gpus.is_dir() else 0


def _cuda_available() -> bool:
    torch = sys.modules.get("torch")
    if torch is not None:  # inside ComfyUI torch is already loaded: ask it
        return bool(torch.cuda.is_available())
    return _torch_cuda_build() and _nvidia_devices() > 0


def detect_target(explicit: str | None = None) -> ExecutionTarget:
    """Return the local execution target for this process.

    Args:
        explicit: A target name given by the user; wins over detection.

    Raises:
        ValueError: The explicit or forced target name is unknown.
    """
    chosen = explicit or forced_target()
    if chosen:
        try:
            return parse_target(chosen)
        except ValueError as error:
            source = "--target" if explicit else TARGET_ENV
            raise ValueError(f"{source}: {error}") from None
    if sys.platform == "darwin" and platform.machine() == "arm64":
        return ExecutionTarget.LOCAL_APPLE
    if _cuda_available():
        return ExecutionTarget.LOCAL_CUDA
    return ExecutionTarget.LOCAL_CPU
