"""The reasoning parser's view of a GGUF vocabulary, read from the checked file.

``tokenizer.ggml.tokens`` holds each token's text as the tokenizer stores it
(added tokens such as ``<think>`` and ``<|im_end|>`` verbatim);
``tokenizer.ggml.token_type`` marks CONTROL tokens (type 3), which llama.cpp
skips when it renders text without specials, as Hugging Face's
``skip_special_tokens`` does. ``<think>`` is USER_DEFINED (type 4) in Qwen
GGUFs, so it stays in the text, as in every other engine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from comfy_llm_profiles import GgufModel
from comfy_llm_reasoning import TokenVocabulary

__all__ = ["CONTROL", "vocabulary_of"]

CONTROL = 3  # llama_token_type LLAMA_TOKEN_TYPE_CONTROL


def vocabulary_of(model: GgufModel, decode: Callable[[Sequence[int]], str]) -> TokenVocabulary:
    """Build the vocabulary from the checked model file and the engine's decoder.

    Args:
        model: The checked model file.
        decode: Ids to text without special tokens (llama.cpp's detokenizer).

    Returns:
        The vocabulary.
    """
    token_to_id: dict[str, int] = {}
    for token_id, token in enumerate(model.tokens):
        token_to_id.setdefault(token, token_id)
    special = frozenset(i for i, kind in enumerate(model.token_types) if kind == CONTROL)
    return TokenVocabulary(token_to_id=token_to_id, decode=decode, special_ids=special)
