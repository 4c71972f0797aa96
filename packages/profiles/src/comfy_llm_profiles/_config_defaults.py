"""The text-config values some checkpoints leave to Transformers' config classes.

Gemma 3, LLaVA-1.5 and LLaVA-NeXT write into ``text_config`` only what
differs from the class's defaults (reviews/gemma3.md, reviews/llava.md): no
attention heads, head size or layer count, and Gemma 3 no context either.
Read as written, the memory estimate counts no KV cache at all and the
context falls back to the target's default. Transformers fills these in from
the config class at load time; this table holds the same values for the text
model types the reviewed families use (a test compares every value with the
installed Transformers' classes), so the profile reads the config the engine
will run, without importing Transformers here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["TEXT_CONFIG_DEFAULTS", "with_class_defaults"]

_Defaults = Mapping[str, int | None]

TEXT_CONFIG_DEFAULTS: Final[Mapping[str, _Defaults]] = {
    # Gemma3TextConfig (transformers/models/gemma3/configuration_gemma3.py): every
    # sliding_window_pattern-th layer is global, the others slide.
    "gemma3_text": {
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "vocab_size": 262208,
        "max_position_embeddings": 131072,
        "sliding_window": 4096,
        "sliding_window_pattern": 6,
    },
    # LlamaConfig (LLaVA-1.5's Vicuna text)
    "llama": {
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "head_dim": 128,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "vocab_size": 32000,
        "max_position_embeddings": 2048,
        "sliding_window": None,
    },
    # MistralConfig (LLaVA-NeXT's Mistral text)
    "mistral": {
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "vocab_size": 32000,
        "max_position_embeddings": 131072,
        "sliding_window": 4096,
    },
}
"""Per ``text_config.model_type``: the class defaults of the keys the profile reads."""


def with_class_defaults(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """``config`` with its ``text_config`` completed from the class defaults.

    Only keys the checkpoint leaves out are added (an explicit value, even
    ``null``, stands); a config without a nested ``text_config`` of a
    listed model type is returned as it is.
    """
    text = config.get("text_config")
    if not isinstance(text, Mapping):
        return config
    defaults = TEXT_CONFIG_DEFAULTS.get(str(text.get("model_type", "")))
    if defaults is None:
        return config
    completed = {**{k: v for k, v in defaults.items() if v is not None}, **text}
    return {**config, "text_config": completed}
