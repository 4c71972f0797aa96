"""Engine-neutral constrained decoding: the allowed-token mask for the next step.

Each backend wraps :class:`JsonConstraint` in its engine's logits hook
(Transformers ``LogitsProcessor``, MLX-VLM ``logits_processors``) and sets
every disallowed logit to minus infinity *before* temperature and top-p, so
sampling can only pick tokens that keep the answer inside the grammar.

Reasoning stays free: with a gate token (the model's ``</think>``) the mask
is ``None`` until that token has been generated, and only the tokens after it
are fed to the grammar. Without a gate the whole generation is the answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from comfy_llm_structured._schema import ResponseSchema

__all__ = ["JsonConstraint", "llg_tokenizer"]


def llg_tokenizer(hf_tokenizer: Any, vocab_size: int, eos_ids: Iterable[int]) -> Any:
    """An llguidance tokenizer for a Hugging Face fast tokenizer and a model's logit width."""
    import llguidance.hf

    ends = sorted({int(i) for i in eos_ids})
    return llguidance.hf.from_tokenizer(
        hf_tokenizer, n_vocab=int(vocab_size), eos_token=ends or None
    )


class JsonConstraint:
    """The grammar state of one generation; feed it the generated ids, get the next mask.

    Attributes:
        vocab_size: Width of the logits the mask is for.
        active: True once the answer part has started (gate seen, or no gate).
    """

    def __init__(
        self,
        schema: ResponseSchema,
        tokenizer: Any,
        vocab_size: int,
        *,
        gate_id: int | None = None,
    ) -> None:
        from llguidance import LLMatcher

        self._matcher = LLMatcher(tokenizer, schema.grammar)
        self._gate_id = gate_id
        self.vocab_size = int(vocab_size)
        self.active = gate_id is None
        self._seen = 0

    def allowed(self, generated: Sequence[int]) -> np.ndarray | None:
        """The allowed-token mask (bool, ``vocab_size``) for the next token, or None while free.

        Args:
            generated: Every id generated so far in this request (prompt excluded).

        Raises:
            RuntimeError: The grammar rejected a token (an engine applied the
                mask wrongly); the message carries llguidance's reason.
        """
        for token_id in generated[self._seen :]:
            if not self.active:
                self.active = int(token_id) == self._gate_id
                continue
            if not self._matcher.consume_token(int(token_id)):
                raise RuntimeError(
                    f"constrained decoding rejected token {int(token_id)}: "
                    f"{self._matcher.get_error()}"
                )
        self._seen = len(generated)
        if not self.active:
            return None
        bits = np.frombuffer(self._matcher.compute_bitmask(), dtype=np.uint8)
        mask = np.unpackbits(bits, bitorder="little").astype(bool)
        if mask.size >= self.vocab_size:
            return mask[: self.vocab_size]
        return np.concatenate([mask, np.zeros(self.vocab_size - mask.size, dtype=bool)])
