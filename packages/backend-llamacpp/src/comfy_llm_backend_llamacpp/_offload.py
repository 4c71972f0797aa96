"""How many layers go to the GPU: what admission granted, said in the metadata.

llama.cpp splits a model by layers (``n_gpu_layers``): every layer offloaded
(the output layer included) is ``all``, a prefix of them is ``some`` (the
rest run on the CPU from host memory), none is ``none``. The plan is pure
arithmetic on the checked file's sizes and the memory admission measured, so
it is tested without a GPU.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

__all__ = ["OffloadPlan", "plan_offload"]

OffloadMode = Literal["all", "some", "none"]


@dataclasses.dataclass(frozen=True, slots=True)
class OffloadPlan:
    """Layers offloaded to the GPU.

    Attributes:
        gpu_layers: The ``n_gpu_layers`` passed to llama.cpp (``-1``: all).
        total_layers: Repeating layers plus the output layer.
        mode: ``all``, ``some`` or ``none``.
        reason: Why, in words (for the metadata).
    """

    gpu_layers: int
    total_layers: int
    mode: OffloadMode
    reason: str

    @property
    def offloaded_layers(self) -> int:
        """Layers on the GPU (``-1`` spelled out)."""
        return self.total_layers if self.gpu_layers < 0 else self.gpu_layers

    def as_metadata(self) -> dict[str, object]:
        """``gpu_offload``, ``gpu_layers``, ``gpu_layers_total``, ``gpu_offload_reason``."""
        return {
            "gpu_offload": self.mode,
            "gpu_layers": self.offloaded_layers,
            "gpu_layers_total": self.total_layers,
            "gpu_offload_reason": self.reason,
        }


def plan_offload(
    *,
    layers: int,
    weight_bytes: int,
    fixed_bytes: int,
    available_bytes: int | None,
    gpu: bool,
) -> OffloadPlan:
    """Plan the offload from the memory admission granted.

    Args:
        layers: Repeating layers of the model (``block_count``).
        weight_bytes: The model file's tensor bytes.
        fixed_bytes: What the GPU holds whatever the split: KV cache and
            compute buffers, and the projector.
        available_bytes: Device memory admission granted (its reading minus
            the reserve), or None when no admission ran (direct use).
        gpu: Whether this llama.cpp build offloads at all
            (``llama_supports_gpu_offload``) and the target is a GPU.

    Returns:
        The plan.
    """
    total = layers + 1  # the output layer is offloaded as one more
    if not gpu:
        return OffloadPlan(0, total, "none", "this llama.cpp build or target has no GPU")
    if available_bytes is None:
        return OffloadPlan(-1, total, "all", "no memory admission: every layer on the GPU")
    per_layer = max(1, weight_bytes // total)
    room = available_bytes - fixed_bytes
    fits = max(0, min(total, room // per_layer))
    gib = available_bytes / 2**30
    if fits >= total:
        return OffloadPlan(-1, total, "all", f"{gib:.1f} GiB granted holds every layer")
    if fits == 0:
        return OffloadPlan(0, total, "none", f"{gib:.1f} GiB granted holds no layer")
    return OffloadPlan(
        int(fits), total, "some", f"{gib:.1f} GiB granted holds {fits} of {total} layers"
    )
