"""Splitting generated output at the think boundary, by ids or by text.

Both splitters follow one rule set (documented in the package README):

* The think block ends at the FIRST ``</think>``. Everything before it is
  reasoning, except text before an explicit ``<think>`` opener when the prompt
  did not open the block (that preamble belongs to the response).
* A ``</think>`` with no opener before it means the prompt opened the block.
* Boundary markers after the first ``</think>`` (repeated ``</think>`` or a
  stray ``<think>``) are dropped from the response; the text between them
  stays in the response. Extra ``<think>`` markers inside the block are
  dropped too.
* An opened block without ``</think>`` is truncated: reasoning keeps what was
  produced, the response is only the (normally empty) preamble.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._vocabulary import THINK_CLOSE, THINK_OPEN

__all__ = ["IdSplit", "TextSplit", "apportion", "split_ids", "split_text", "strip_strings"]


@dataclass(frozen=True, slots=True)
class IdSplit:
    """Generated ids sorted into channels (markers and special ids removed)."""

    reasoning_ids: tuple[int, ...]
    response_ids: tuple[int, ...]
    marker_tokens: int
    special_tokens: int
    truncated: bool


@dataclass(frozen=True, slots=True)
class TextSplit:
    """Decoded text split into channels (markers removed, not yet trimmed)."""

    reasoning: str
    response: str
    marker_chars: int
    truncated: bool


def split_ids(
    token_ids: Sequence[int],
    *,
    open_id: int,
    close_id: int,
    special_ids: frozenset[int],
    prompt_opened: bool,
) -> IdSplit:
    """Sort token ids into reasoning, response, markers and special tokens.

    Args:
        token_ids: Every generated id.
        open_id: Id of the single ``<think>`` token.
        close_id: Id of the single ``</think>`` token.
        special_ids: Ids stripped from both channels.
        prompt_opened: The chat template already emitted ``<think>``.

    Returns:
        The split; marker ids win over special ids if a tokenizer lists the
        markers as special.
    """
    close_at = _first_index(token_ids, close_id)
    head = token_ids if close_at is None else token_ids[:close_at]
    tail: Sequence[int] = () if close_at is None else token_ids[close_at + 1 :]
    open_at = None if prompt_opened else _first_index(head, open_id)
    opened = prompt_opened or open_at is not None or close_at is not None
    if open_at is not None:
        preamble, body = head[:open_at], head[open_at + 1 :]
    elif opened:
        preamble, body = (), head
    else:
        preamble, body = head, ()
    markers = (open_at is not None) + (close_at is not None)
    reasoning, extra_markers, special_in_body = _clean(body, open_id, close_id, special_ids)
    response_before, markers_before, special_before = _clean(
        preamble, open_id, close_id, special_ids
    )
    response_after, markers_after, special_after = _clean(tail, open_id, close_id, special_ids)
    return IdSplit(
        reasoning_ids=reasoning,
        response_ids=response_before + response_after,
        marker_tokens=markers + extra_markers + markers_before + markers_after,
        special_tokens=special_in_body + special_before + special_after,
        truncated=opened and close_at is None,
    )


def split_text(text: str, *, prompt_opened: bool) -> TextSplit:
    """Split decoded text at the literal ``<think>`` / ``</think>`` delimiters.

    Only used when the boundary ids are unknown; then the literal text cannot
    be told apart from a boundary token, so it always splits.

    Args:
        text: Decoded generated text, special tokens already removed.
        prompt_opened: The chat template already emitted ``<think>``.

    Returns:
        The split, with the number of delimiter characters removed.
    """
    close_at = text.find(THINK_CLOSE)
    head = text if close_at < 0 else text[:close_at]
    tail = "" if close_at < 0 else text[close_at + len(THINK_CLOSE) :]
    open_at = -1 if prompt_opened else head.find(THINK_OPEN)
    opened = prompt_opened or open_at >= 0 or close_at >= 0
    if open_at >= 0:
        preamble, body = head[:open_at], head[open_at + len(THINK_OPEN) :]
    elif opened:
        preamble, body = "", head
    else:
        preamble, body = head, ""
    marker_chars = (len(THINK_OPEN) if open_at >= 0 else 0) + (
        len(THINK_CLOSE) if close_at >= 0 else 0
    )
    body, removed_body = strip_strings(body, (THINK_CLOSE, THINK_OPEN))
    response, removed_response = strip_strings(preamble + tail, (THINK_CLOSE, THINK_OPEN))
    return TextSplit(
        reasoning=body,
        response=response,
        marker_chars=marker_chars + removed_body + removed_response,
        truncated=opened and close_at < 0,
    )


def strip_strings(text: str, strings: Sequence[str]) -> tuple[str, int]:
    """Remove every occurrence of each string (in the given order).

    Args:
        text: The text to clean.
        strings: Strings to remove; pass longer strings first when one can
            contain another.

    Returns:
        The cleaned text and the number of characters removed.
    """
    removed = 0
    for needle in strings:
        if needle and needle in text:
            count = text.count(needle)
            text = text.replace(needle, "")
            removed += count * len(needle)
    return text, removed


def apportion(total: int, weights: Sequence[int]) -> list[int]:
    """Split ``total`` tokens across buckets in proportion to ``weights``.

    Largest remainders get the leftover tokens; a bucket with a positive
    weight gets at least one token while any remain, and all tokens go to the
    last bucket when every weight is zero.

    Args:
        total: Tokens to distribute (non-negative).
        weights: Non-negative weight per bucket (at least one bucket).

    Returns:
        Counts per bucket that add up to ``total``.
    """
    counts = [0] * len(weights)
    weight_sum = sum(weights)
    if total <= 0:
        return counts
    if weight_sum <= 0:
        counts[-1] = total
        return counts
    positive = [index for index, weight in enumerate(weights) if weight > 0]
    for index in positive[:total]:
        counts[index] = 1
    remaining = total - sum(counts)
    shares = [remaining * weight / weight_sum for weight in weights]
    for index, share in enumerate(shares):
        counts[index] += int(share)
    leftover = total - sum(counts)
    order = sorted(range(len(weights)), key=lambda i: (-(shares[i] - int(shares[i])), i))
    for index in order[:leftover]:
        counts[index] += 1
    return counts


def _first_index(ids: Sequence[int], wanted: int) -> int | None:
    for index, token_id in enumerate(ids):
        if token_id == wanted:
            return index
    return None


def _clean(
    ids: Sequence[int], open_id: int, close_id: int, special_ids: frozenset[int]
) -> tuple[tuple[int, ...], int, int]:
    kept: list[int] = []
    markers = 0
    special = 0
    for token_id in ids:
        if token_id in (open_id, close_id):
            markers += 1
        elif token_id in special_ids:
            special += 1
        else:
            kept.append(token_id)
    return tuple(kept), markers, special
