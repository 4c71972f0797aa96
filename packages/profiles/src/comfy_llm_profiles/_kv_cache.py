"""The KV cache a checkpoint's text model keeps, read from its config.json.

Shared by the memory estimate (``_decide``) and the engines' terms: which
layers keep a cache (full attention, sliding windows, none for linear or
convolution layers) and their sizes, read from ``text_config`` first, then
the top level (flat layouts such as Qwen2-VL's).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["kv_cache_bytes", "lookup", "positive_int", "text_config"]


def text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    text = config.get("text_config")
    return text if isinstance(text, Mapping) else config


def lookup(config: Mapping[str, Any], key: str) -> Any:
    text = text_config(config)
    return text.get(key, config.get(key))


def positive_int(config: Mapping[str, Any], key: str) -> int | None:
    value = lookup(config, key)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return value


def _attention_layers(config: Mapping[str, Any], layers: int) -> tuple[int, int]:
    """``(full, sliding)`` attention layers: the ones that keep a KV cache.

    ``layer_types`` (Qwen3.5's linear layers, Gemma 3's sliding ones),
    ``full_attn_idxs`` (LFM2's: the other layers are convolutions with a
    state of a few tokens), ``full_attention_interval``, or Gemma 3's
    ``sliding_window_pattern`` (every n-th layer global) say which; without
    them every layer is a full-attention one.
    """
    layer_types = lookup(config, "layer_types")
    indexes = lookup(config, "full_attn_idxs")
    interval = positive_int(config, "full_attention_interval")
    pattern = positive_int(config, "sliding_window_pattern")
    if isinstance(layer_types, list) and layer_types:
        full = sum(1 for kind in layer_types if kind == "full_attention")
        sliding = sum(1 for kind in layer_types if kind == "sliding_attention")
        return (full, sliding) if full or sliding else (layers, 0)
    if isinstance(indexes, list) and indexes:
        return len(indexes), 0
    if interval:
        return max(1, layers // interval), 0
    if pattern and positive_int(config, "sliding_window"):
        full = layers // pattern
        return full, layers - full
    return layers, 0


def kv_cache_bytes(config: Mapping[str, Any], context: int, element_bytes: int) -> int:
    layers = positive_int(config, "num_hidden_layers")
    heads = positive_int(config, "num_attention_heads")
    kv_heads = positive_int(config, "num_key_value_heads") or heads
    head_dim = positive_int(config, "head_dim")
    hidden = positive_int(config, "hidden_size")
    if head_dim is None and hidden and heads:
        head_dim = hidden // heads
    if not (layers and kv_heads and head_dim):
        return 0
    full, sliding = _attention_layers(config, layers)
    window = min(positive_int(config, "sliding_window") or context, context)
    return 2 * kv_heads * head_dim * element_bytes * (full * context + sliding * window)
