"""MLX-VLM batches through its ``BatchGenerator``, greedy decoding only.

Like ``_engine``, imported only once MLX is known to be there. A batch is
generated together only where each answer provably equals its single run:
greedy decoding (the generator samples every row from one random stream,
so a seeded image would not get its own seed's tokens), no response schema
and no thinking budget (both steer one sequence at a time here), and rows
whose prompts have the same length and embedding shapes (the generator pads
ragged rows itself, which would shift what a row attends to). Each row is
prepared exactly as a single run prepares it (chat template, processor,
the model's input embeddings); rows are grouped by shape, and each group is
inserted into one ``BatchGenerator`` and stepped until every row stops.
Checked token for token against single runs on the random and scripted
Qwen3.5 and on SmolVLM checkpoints (``mlx[cpu]``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import mlx.core as mx
from comfy_llm_reasoning import prompt_opens_reasoning
from comfy_llm_residency.backend import BackendResult, BatchTokenSink, GenerationSettings
from mlx_vlm.generate import BatchGenerator
from mlx_vlm.prompt_utils import apply_chat_template
from mlx_vlm.utils import prepare_inputs

from ._engine import LoadedModel, _TextSoFar, _timings, encoded_prompt

__all__ = ["BatchRow", "generate_rows"]


@dataclasses.dataclass(frozen=True, slots=True)
class BatchRow:
    """One item of a batch as the engine needs it: messages and images (then frames)."""

    messages: list[dict[str, Any]]
    images: Sequence[Any]


@dataclasses.dataclass(slots=True)
class _Prepared:
    ids: list[int]
    kwargs: dict[str, Any]
    opened: bool
    key: object


def _prepare(
    loaded: LoadedModel, row: BatchRow, template_kwargs: dict[str, object], budget: int
) -> _Prepared:
    model, processor = loaded.model, loaded.processor
    chat_kwargs: dict[str, Any] = dict(template_kwargs)
    text: str = apply_chat_template(  # type: ignore[assignment]
        processor, model.config, row.messages, num_images=len(row.images), **chat_kwargs
    )
    encoded, special = encoded_prompt(model, processor, text)
    prepared = prepare_inputs(
        processor,
        images=list(row.images) or None,
        prompts=encoded,
        image_token_index=getattr(model.config, "image_token_index", None),
        add_special_tokens=special,
    )
    input_ids = prepared["input_ids"]
    extra = {
        key: value
        for key, value in prepared.items()
        if key not in ("input_ids", "pixel_values", "attention_mask")
    }
    embedded = model.get_input_embeddings(
        input_ids, prepared.get("pixel_values"), mask=prepared.get("attention_mask"), **extra
    )
    kwargs = {**extra, **{k: v for k, v in embedded.to_dict().items() if v is not None}}
    shapes = tuple(
        sorted((k, tuple(v.shape)) for k, v in kwargs.items() if isinstance(v, mx.array))
    )
    ids = input_ids[0].tolist()
    return _Prepared(ids, kwargs, prompt_opens_reasoning(text), (len(ids), shapes, budget))


def generate_rows(
    loaded: LoadedModel,
    rows: Sequence[BatchRow],
    *,
    template_kwargs: dict[str, object],
    settings: Sequence[GenerationSettings],
    sink: BatchTokenSink,
) -> list[BackendResult]:
    """Generate every row, grouped by shape; see the module docstring.

    Raises:
        Exception: Whatever ``sink`` raised, unchanged (the generator is closed).
    """
    started = time.perf_counter()
    prepared = [
        _prepare(loaded, row, template_kwargs, s.max_new_tokens)
        for row, s in zip(rows, settings, strict=True)
    ]
    groups: dict[object, list[int]] = {}
    for index, item in enumerate(prepared):
        groups.setdefault(item.key, []).append(index)
    results: dict[int, BackendResult] = {}
    for members in groups.values():
        budget = settings[members[0]].max_new_tokens
        tokens = _step(loaded, [prepared[i] for i in members], budget, members, sink)
        for index, ids in zip(members, tokens, strict=True):
            item = prepared[index]
            stopped = bool(ids) and ids[-1] in loaded.stop_ids
            results[index] = BackendResult(
                token_ids=tuple(ids),
                text=loaded.tokenizer.decode(ids, skip_special_tokens=True) if ids else "",
                native_reasoning=None,
                timings=_timings(started, len(item.ids)),
                prompt_opened_reasoning=item.opened,
                finish_reason="stop" if stopped else "length",
                batch_size=len(members),
            )
    return [results[index] for index in range(len(rows))]


def _step(
    loaded: LoadedModel,
    group: list[_Prepared],
    budget: int,
    members: list[int],
    sink: BatchTokenSink,
) -> list[list[int]]:
    """Insert one group into a generator and step it; each row's ids."""
    generator = BatchGenerator(
        loaded.model.language_model,
        loaded.processor,
        stop_tokens=set(loaded.stop_ids),
        prefill_batch_size=len(group),
        completion_batch_size=len(group),
        compute_logprobs=False,
    )
    texts = [_TextSoFar(loaded) for _ in group]
    ids: list[list[int]] = [[] for _ in group]
    try:
        uids = generator.insert(
            [item.ids for item in group], budget, prompt_kwargs=[item.kwargs for item in group]
        )
        row_of = {uid: row for row, uid in enumerate(uids)}
        while generator.has_work:
            _, responses = generator.next()
            for response in responses:
                row, token_id = row_of[response.uid], int(response.token)
                ids[row].append(token_id)
                final = response.finish_reason is not None
                sink.token(members[row], token_id, texts[row].add(token_id, final=final))
    finally:
        generator.close()
    return ids
