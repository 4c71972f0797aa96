"""Constrained decoding for MLX-VLM: the schema mask as a ``logits_processors`` entry.

mlx-vlm ships an llguidance processor, but it applies the mask with a Metal
kernel (``mx.fast.metal_kernel``), which fails on Linux ``mlx[cpu]`` ("No
Metal back-end"). This one takes the engine-neutral mask from
``comfy_llm_structured`` and applies it with ``mx.where``, which runs on
every MLX device. mlx-vlm runs processors before its sampler, so the mask
comes before temperature and top-p.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import mlx.core as mx
from comfy_llm_structured import JsonConstraint, ResponseSchema, llg_tokenizer

__all__ = ["SchemaMask"]


class SchemaMask:
    """Call as ``processor(tokens, logits)``; one instance per request.

    ``tokens`` is everything mlx-vlm has fed so far; with chunked prefill it
    may hold only the prompt's tail, so the prompt's length is what the first
    call sees, and every id after it is generated.
    """

    def __init__(
        self,
        schema: ResponseSchema,
        tokenizer: Any,
        stop_ids: Iterable[int],
        gate_id: int | None,
        tokenizer_cache: dict[int, Any],
    ) -> None:
        self._schema = schema
        self._tokenizer = tokenizer
        self._stop_ids = tuple(stop_ids)
        self._gate_id = gate_id
        self._cache = tokenizer_cache
        self._constraint: JsonConstraint | None = None
        self._prompt = 0

    def __call__(self, tokens: mx.array, logits: mx.array) -> mx.array:
        width = int(logits.shape[-1])
        if self._constraint is None:
            if width not in self._cache:
                self._cache[width] = llg_tokenizer(self._tokenizer, width, self._stop_ids)
            self._constraint = JsonConstraint(
                self._schema, self._cache[width], width, gate_id=self._gate_id
            )
            self._prompt = int(tokens.size)
        generated: list[int] = tokens.reshape(-1)[self._prompt :].tolist()  # type: ignore[assignment]
        allowed = self._constraint.allowed(generated)
        if allowed is None:
            return logits
        return mx.where(mx.array(allowed), logits, mx.array(-mx.inf, dtype=logits.dtype))
