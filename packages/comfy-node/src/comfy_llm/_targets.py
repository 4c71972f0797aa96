"""Choosing the execution target for this process.

Apple Silicon runs MLX-VLM, an NVIDIA GPU runs Transformers (vLLM where
installed), anything else runs Transformers on the CPU. An explicit target
(CLI ``--target`` or ``COMFY_LLM_EXECUTION_TARGET``) always wins, so Linux
tests and users can drive the MLX-VLM path through ``mlx[cpu]``.
"""

from __future__ import annotations

import importlib.util
import platform
import sys

from comfy_llm_profiles import ExecutionTarget

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


def _cuda_available() -> bool:
    # torch is heavy: only look when it is installed, and import it lazily.
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


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
