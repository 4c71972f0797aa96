"""Why an answer came back empty or cut, in words each face can show.

A budget that ends inside the reasoning leaves ``response`` (and, with a
parser that drops an unfinished think block, ``reasoning`` too) empty; the
user sees an empty box and no reason. The pipeline records the reason once
in metadata (``empty_answer``: a code and the numbers); the node and the CLI
each put it in their own words (a widget name or a flag) with
:func:`explain`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["CLI_WORDS", "NODE_WORDS", "empty_answer", "explain"]

NODE_WORDS = {"budget": "max_new_tokens", "reasoning_off": "turn enable_reasoning off"}
CLI_WORDS = {"budget": "--max-new-tokens", "reasoning_off": "pass --no-reasoning"}


def empty_answer(response: str, metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    """``{"reason", "output_tokens", "max_new_tokens"}`` when the answer is empty, else None."""
    if response.strip():
        return None
    tokens = int(metadata.get("output_tokens") or 0)
    settings = metadata.get("generation_settings") or {}
    budget = int(settings.get("max_new_tokens") or 0)
    used_all = budget > 0 and tokens >= budget
    if used_all and (metadata.get("reasoning_truncated") or metadata.get("reasoning_tokens")):
        reason = "budget_in_reasoning"
    elif used_all:
        reason = "budget"
    else:
        reason = "no_text"
    return {"reason": reason, "output_tokens": tokens, "max_new_tokens": budget}


def explain(note: Mapping[str, Any], words: Mapping[str, str]) -> str:
    """One sentence: what happened, with the numbers, and what to change."""
    tokens, budget = note["output_tokens"], note["max_new_tokens"]
    plural = "" if budget == 1 else "s"
    if note["reason"] == "budget_in_reasoning":
        return (
            f"The answer is empty: the model used all {budget} token{plural} while reasoning; "
            f"raise {words['budget']} or {words['reasoning_off']}."
        )
    if note["reason"] == "budget":
        return (
            f"The answer is empty: all {budget} token{plural} went before any answer text; "
            f"raise {words['budget']}."
        )
    return (
        f"The answer is empty: the model stopped after {tokens} "
        f"token{'' if tokens == 1 else 's'} without answer text; try another prompt or model."
    )
