"""What a live view shows while a model generates: the final parse's split, so far.

A host that streams the text so far (the ComfyUI node's live text) must label
it as the outputs will be labelled at the end, or an artist sees "Reasoning"
for tokens that land in the response. So the live split is the request's own
parser (the same selection as the final parse) run on the text so far, with
the rendered prompt's ``<think>`` state the backend reported before its first
token. The final parse splits by boundary ids where the vocabulary has them;
by text the rules are the same (``_split``), so the two differ only where an
answer spells ``</think>`` with ordinary tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._select import parser_for_profile

__all__ = ["LiveSplit", "live_split"]


@dataclass(frozen=True, slots=True)
class LiveSplit:
    """The text generated so far, split as the final parse would split it now.

    Attributes:
        response: The answer so far (trimmed).
        reasoning: The reasoning so far (trimmed); ``None`` when the request's
            parser has no reasoning channel (``none``, or ``direct`` with
            reasoning off), so everything shown is the answer.
        thinking: Generation is inside an open think block and no answer has
            begun: were it to stop now, the response would be empty.
    """

    response: str
    reasoning: str | None
    thinking: bool


def live_split(
    text: str,
    *,
    reasoning_parser: str | None,
    architecture: str | None,
    enable_reasoning: bool,
    prompt_opened_reasoning: bool,
) -> LiveSplit:
    """Split ``text`` (generated so far) with the request's parser.

    Args:
        text: The decoded text so far, boundary markers kept.
        reasoning_parser: The profile's ``reasoning_parser`` (or ``None``).
        architecture: The profile's architecture (the parser fallback).
        enable_reasoning: The request's setting.
        prompt_opened_reasoning: The backend's report that the rendered prompt
            opened a ``<think>`` block (``BackendResult.prompt_opened_reasoning``).

    Returns:
        The split.

    Raises:
        ReasoningError: The profile names an unknown parser.
    """
    parser = parser_for_profile(
        reasoning_parser, architecture, enable_reasoning=enable_reasoning, vocabulary=None
    )
    result = parser.parse((), text, prompt_opened_reasoning=prompt_opened_reasoning)
    has_channel = parser.name == "qwen3"
    return LiveSplit(
        response=result.response,
        reasoning=result.reasoning if has_channel else None,
        thinking=result.truncated and not result.response,
    )
