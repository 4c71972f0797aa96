"""Constrained decoding for Transformers: the schema mask as a logits processor.

Transformers runs a caller's logits processors *after* its own temperature,
top-k and top-p warpers; a mask applied there could remove every token top-p
kept. So for a constrained request the sampling warpers are taken out of the
generation config and re-added after the mask, in Transformers' own order.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from comfy_llm_structured import JsonConstraint

__all__ = ["constrained_processors"]

_WARPER_FIELDS = ("temperature", "top_k", "top_p")


def constrained_processors(
    torch: ModuleType, constraint: JsonConstraint, prompt_tokens: int, config: Any
) -> list[Any]:
    """The processors for a constrained request; ``config`` loses its warpers (see module doc)."""
    from transformers import (
        LogitsProcessor,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    class SchemaMask(LogitsProcessor):  # type: ignore[misc]
        def __call__(self, input_ids: Any, scores: Any) -> Any:
            allowed = constraint.allowed(input_ids[0, prompt_tokens:].tolist())
            if allowed is None:
                return scores
            keep = torch.from_numpy(allowed).to(scores.device)
            width = scores.shape[-1]
            if keep.numel() < width:
                keep = torch.nn.functional.pad(keep, (0, width - keep.numel()))
            return scores.masked_fill(~keep[:width], float("-inf"))

    processors: list[Any] = [SchemaMask()]
    if not config.do_sample:
        return processors
    temperature, top_k, top_p = (getattr(config, name, None) for name in _WARPER_FIELDS)
    config.temperature, config.top_k, config.top_p = 1.0, 0, 1.0
    if temperature is not None and temperature != 1.0:
        processors.append(TemperatureLogitsWarper(float(temperature)))
    if top_k:
        processors.append(TopKLogitsWarper(top_k=int(top_k)))
    if top_p is not None and top_p < 1.0:
        processors.append(TopPLogitsWarper(top_p=float(top_p)))
    return processors
