"""Execution targets: where a profile's model runs.

A profile is resolved for exactly one target and is never loaded by another
(the backend, quantization policy and memory estimate all depend on it), so
the target is a closed enum rather than a free string.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ExecutionTarget"]


class ExecutionTarget(StrEnum):
    """Where a model runs; each has its own compatibility registry.

    Attributes:
        LOCAL_APPLE: Inside ComfyUI on Apple Silicon, through MLX-VLM.
        LOCAL_CUDA: Inside ComfyUI with an NVIDIA GPU (Transformers or vLLM).
        LOCAL_CPU: Inside ComfyUI on the CPU (Transformers, small models).
        MODAL: In the RemoteEngine of a Modal GPU worker.
    """

    LOCAL_APPLE = "local_apple"
    LOCAL_CUDA = "local_cuda"
    LOCAL_CPU = "local_cpu"
    MODAL = "modal"

    @property
    def is_local(self) -> bool:
        """True for the targets that run inside the ComfyUI process."""
        return self is not ExecutionTarget.MODAL

    @property
    def token_location(self) -> str:
        """Where a user puts HF_TOKEN so this target can read gated repos."""
        if self is ExecutionTarget.MODAL:
            return (
                "add HF_TOKEN to the Modal secret the app uses (the selected Modal "
                "secret collection), then redeploy or rerun"
            )
        return (
            "set HF_TOKEN (or HUGGING_FACE_HUB_TOKEN) in the environment that "
            "launches ComfyUI, then restart ComfyUI"
        )
