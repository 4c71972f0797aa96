"""The parser contract every backend codes against."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ._result import ReasoningResult

__all__ = ["ReasoningParser"]


@runtime_checkable
class ReasoningParser(Protocol):
    """Turns one generation into a :class:`ReasoningResult`.

    Every backend hands the same inputs to the same parser: the generated
    token ids, the decoded text when it has one, and the engine's separately
    returned reasoning when it has one (vLLM with a reasoning parser).
    """

    name: str

    def parse(
        self,
        token_ids: Sequence[int],
        text: str | None,
        *,
        native_reasoning: str | None = None,
        prompt_opened_reasoning: bool = False,
    ) -> ReasoningResult:
        """Split one generation into response and reasoning.

        Args:
            token_ids: Every generated token id, boundary and special tokens
                included (``output_tokens`` is their count).
            text: The decoded generated text, or ``None`` to decode the ids.
            native_reasoning: Reasoning the engine already separated, or
                ``None``.
            prompt_opened_reasoning: The chat template ended the prompt with
                ``<think>``, so generation starts inside the reasoning.

        Returns:
            The parsed result.

        Raises:
            ReasoningError: The token ids are malformed, or neither text nor
                a vocabulary to decode the ids was given.
        """
        ...
