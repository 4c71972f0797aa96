"""Why an answer came back empty or cut, in words each face can show.

A budget that ends inside the reasoning leaves ``response`` (and, with a
parser that drops an unfinished think block, ``reasoning`` too) empty; the
user sees an empty box and no reason. The pipeline records the reason once
in metadata (``empty_answer``: a code and the numbers); the node and the CLI
each put it in their own words (a widget name or a flag) with
:func:`explain`, and :func:`worded` puts those words into the record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI reads this module before it needs the manager
    from comfy_llm_residency import EmptyAnswer, RunMetadata

__all__ = ["CLI_WORDS", "NODE_WORDS", "empty_answer", "explain", "worded"]

NODE_WORDS = {"budget": "max_new_tokens", "reasoning_off": "turn enable_reasoning off"}
CLI_WORDS = {"budget": "--max-new-tokens", "reasoning_off": "pass --no-reasoning"}


def empty_answer(response: str, metadata: RunMetadata) -> EmptyAnswer | None:
    """Why the answer is empty (a code and the numbers), or None when it is not."""
    from comfy_llm_residency import EmptyAnswer

    if response.strip():
        return None
    generation = metadata.generation
    tokens = generation.output_tokens
    budget = generation.settings.max_new_tokens
    used_all = budget > 0 and tokens >= budget
    if used_all and (generation.reasoning_truncated or generation.reasoning_tokens):
        reason = "budget_in_reasoning"
    elif used_all:
        reason = "budget"
    else:
        reason = "no_text"
    return EmptyAnswer(reason=reason, output_tokens=tokens, max_new_tokens=budget)


def worded(metadata: RunMetadata, words: Mapping[str, str]) -> tuple[RunMetadata, str | None]:
    """The metadata with its empty-answer note in a face's words, and those words (or None)."""
    host = metadata.host
    note = host.empty_answer if host is not None else None
    if host is None or note is None:
        return metadata, None
    message = explain(note, words)
    note = dataclasses.replace(note, message=message)
    return metadata.replace(host=dataclasses.replace(host, empty_answer=note)), message


def explain(note: EmptyAnswer, words: Mapping[str, str]) -> str:
    """One sentence: what happened, with the numbers, and what to change."""
    tokens, budget = note.output_tokens, note.max_new_tokens
    plural = "" if budget == 1 else "s"
    if note.reason == "budget_in_reasoning":
        return (
            f"The answer is empty: the model used all {budget} token{plural} while reasoning; "
            f"raise {words['budget']} or {words['reasoning_off']}."
        )
    if note.reason == "budget":
        return (
            f"The answer is empty: all {budget} token{plural} went before any answer text; "
            f"raise {words['budget']}."
        )
    return (
        f"The answer is empty: the model stopped after {tokens} "
        f"token{'' if tokens == 1 else 's'} without answer text; try another prompt or model."
    )
