"""One ``model.generate`` call: sampling configuration, seeding and streaming."""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

from comfy_llm_core import SEED_BITS_UINT64, fold_seed
from comfy_llm_residency.backend import GenerationSettings
from comfy_llm_structured import JsonConstraint

from .._stream import TokenStreamer
from ._constraint import constrained_processors

__all__ = ["GenerationRun", "build_generation_config", "eos_ids", "run_generate"]

# Sampling knobs a model's generation_config.json may carry; cleared for greedy
# decoding (Transformers would otherwise log that they are ignored).
_SAMPLING_ONLY = ("temperature", "top_p", "top_k", "min_p", "typical_p")


@dataclasses.dataclass(frozen=True, slots=True)
class GenerationRun:
    """What one generation produced.

    Attributes:
        token_ids: Generated ids, boundary and special tokens kept.
        generation_seconds: Wall time from the start of the request.
        finish_reason: ``"stop"`` (an end token) or ``"length"``.
    """

    token_ids: tuple[int, ...]
    generation_seconds: float
    finish_reason: str


def eos_ids(generation_config: Any) -> frozenset[int]:
    """Return the end-of-sequence ids of a generation config.

    Args:
        generation_config: A Transformers ``GenerationConfig``.

    Returns:
        The ids (``eos_token_id`` may be an int, a list or None).
    """
    value = getattr(generation_config, "eos_token_id", None)
    if value is None:
        return frozenset()
    if isinstance(value, int):
        return frozenset({value})
    return frozenset(int(item) for item in value)


def build_generation_config(base: Any, settings: GenerationSettings, max_new_tokens: int) -> Any:
    """Derive this request's ``GenerationConfig`` from the model's.

    The model's defaults (end tokens, padding, repetition penalty, ``top_k``
    when sampling) stay; the request's settings override temperature and
    ``top_p``. ``temperature == 0`` means greedy decoding.

    Args:
        base: The model's ``generation_config`` (not modified).
        settings: The request's settings.
        max_new_tokens: The token budget (already capped to the context).

    Returns:
        A new ``GenerationConfig``.
    """
    config = copy.deepcopy(base)
    config.max_new_tokens = max_new_tokens
    config.min_new_tokens = min(settings.min_new_tokens, max_new_tokens) or None
    config.max_length = None
    config.num_beams = 1
    config.num_return_sequences = 1
    if settings.temperature == 0:
        config.do_sample = False
        for name in _SAMPLING_ONLY:
            if hasattr(config, name):
                setattr(config, name, None)
    else:
        config.do_sample = True
        config.temperature = float(settings.temperature)
        config.top_p = float(settings.top_p)
    if getattr(config, "pad_token_id", None) is None:
        ends = sorted(eos_ids(config))
        if ends:
            config.pad_token_id = ends[0]
    return config


def run_generate(
    torch: ModuleType,
    model: Any,
    tensors: Mapping[str, Any],
    *,
    settings: GenerationSettings,
    max_new_tokens: int,
    decode: Callable[[Sequence[int]], str],
    on_token: Callable[[int, str], None],
    started: float | None = None,
    constraint: JsonConstraint | None = None,
    tokenizer: Any = None,
) -> GenerationRun:
    """Run ``model.generate`` with a streamer, seeding first when asked.

    Args:
        torch: The torch module.
        model: The loaded model (its device is where ``tensors`` go).
        tensors: The processor's output for a batch of one.
        settings: Sampling settings.
        max_new_tokens: Token budget (already capped to the context).
        decode: Turns ids into text, skipping special tokens.
        on_token: Per-token callback; may raise to stop.
        started: ``time.perf_counter()`` at the start of the request;
            ``generation_seconds`` counts from it (None: now).
        constraint: The response schema's token mask, or None for free text.
        tokenizer: The tokenizer behind ``decode`` (its native stream decoder
            keeps the per-token text cheap), or None for the window decoder.

    Returns:
        The generated ids and timings.

    Raises:
        Exception: Whatever ``on_token`` raised, unchanged.
    """
    started = time.perf_counter() if started is None else started
    device = model.device
    inputs = {
        name: value.to(device) if hasattr(value, "to") else value for name, value in tensors.items()
    }
    pixel_values = inputs.get("pixel_values")
    if pixel_values is not None and pixel_values.is_floating_point():
        inputs["pixel_values"] = pixel_values.to(model.dtype)
    config = build_generation_config(model.generation_config, settings, max_new_tokens)
    extra: dict[str, Any] = {}
    if constraint is not None:
        prompt_tokens = int(inputs["input_ids"].shape[-1])
        extra["logits_processor"] = constrained_processors(torch, constraint, prompt_tokens, config)
    if settings.seed is not None:
        # uint64: every ComfyUI seed is its own stream (comfy_llm_core.fold_seed)
        torch.manual_seed(fold_seed(settings.seed, SEED_BITS_UINT64))  # every CUDA device too
    streamer = TokenStreamer(decode, on_token, started=started, tokenizer=tokenizer)
    with torch.inference_mode():
        model.generate(**inputs, generation_config=config, streamer=streamer, **extra)
    seconds = time.perf_counter() - streamer.started
    ids = tuple(streamer.token_ids)
    ends = eos_ids(config)
    finish = "stop" if (ids and ids[-1] in ends) or len(ids) < max_new_tokens else "length"
    return GenerationRun(
        token_ids=ids,
        generation_seconds=seconds,
        finish_reason=finish,
    )
