"""The result every reasoning parser returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .errors import ReasoningError

__all__ = ["Accounting", "ReasoningResult"]

Accounting = Literal["exact", "estimated"]
"""How the per-channel token counts were obtained.

``"exact"``: every generated token id was classified (boundary ids and the
vocabulary's special ids were available). ``"estimated"``: the split was
found in the text, so the non-special tokens were apportioned between the
channels and the markers by their share of characters. Either way the counts
add up to ``output_tokens``.
"""


@dataclass(frozen=True, slots=True)
class ReasoningResult:
    """The response and reasoning channels of one generation.

    The four token counts partition the generated tokens::

        reasoning_tokens + response_tokens + marker_tokens + special_tokens
            == output_tokens

    Attributes:
        response: The answer, special tokens and think markers removed,
            whitespace trimmed at both ends.
        reasoning: The reasoning content without its boundary markers,
            whitespace trimmed at both ends; empty when there is none or when
            reasoning is disabled.
        reasoning_tokens: Tokens of reasoning content, boundary markers and
            special tokens excluded. The direct-response parser counts the
            content of a think block it discarded here, although
            ``reasoning`` stays empty.
        output_tokens: Every generated token (``len(token_ids)``).
        parser: Name of the parser that produced this result.
        truncated: Generation ended inside an open think block (no closing
            ``</think>``): the reasoning keeps what was produced and the
            response is empty. Reported in metadata as
            ``reasoning_truncated``.
        response_tokens: Tokens that make up the response (whitespace tokens
            included; trimming only affects the text).
        marker_tokens: Think boundary tokens (``<think>`` / ``</think>``) that
            were consumed, including repeated ones dropped from the response.
        special_tokens: Tokens whose ids are special in the vocabulary
            (``<|im_end|>`` and the like); stripped from both channels.
        accounting: ``"exact"`` or ``"estimated"``; see :data:`Accounting`.
    """

    response: str
    reasoning: str
    reasoning_tokens: int
    output_tokens: int
    parser: str
    truncated: bool = False
    response_tokens: int = 0
    marker_tokens: int = 0
    special_tokens: int = 0
    accounting: Accounting = "exact"

    def __post_init__(self) -> None:
        """Check that the counts are non-negative and partition the output.

        Raises:
            ReasoningError: A count is negative, or the four channel counts do
                not add up to ``output_tokens``.
        """
        counts = {
            "reasoning_tokens": self.reasoning_tokens,
            "response_tokens": self.response_tokens,
            "marker_tokens": self.marker_tokens,
            "special_tokens": self.special_tokens,
            "output_tokens": self.output_tokens,
        }
        for field_name, value in counts.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ReasoningError(
                    f"ReasoningResult.{field_name} must be a non-negative int, got {value!r}."
                )
        total = (
            self.reasoning_tokens + self.response_tokens + self.marker_tokens + self.special_tokens
        )
        if total != self.output_tokens:
            raise ReasoningError(
                "ReasoningResult token counts do not add up: reasoning_tokens "
                f"{self.reasoning_tokens} + response_tokens {self.response_tokens} + "
                f"marker_tokens {self.marker_tokens} + special_tokens {self.special_tokens} "
                f"= {total}, but output_tokens is {self.output_tokens}."
            )
        if self.accounting not in ("exact", "estimated"):
            raise ReasoningError(
                f"ReasoningResult.accounting must be 'exact' or 'estimated', "
                f"got {self.accounting!r}."
            )

    @property
    def reasoning_truncated(self) -> bool:
        """Alias of :attr:`truncated`, spelled as the metadata key."""
        return self.truncated

    def as_metadata(self) -> dict[str, object]:
        """Return the fields the node puts into ``metadata_json``.

        Returns:
            A JSON-ready mapping: ``reasoning_parser``, ``output_tokens``,
            ``reasoning_tokens``, ``reasoning_truncated`` and
            ``token_accounting``.
        """
        return {
            "reasoning_parser": self.parser,
            "output_tokens": self.output_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "reasoning_truncated": self.truncated,
            "token_accounting": self.accounting,
        }
