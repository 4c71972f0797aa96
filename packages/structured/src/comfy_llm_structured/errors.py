"""Errors raised for JSON-schema responses."""

from __future__ import annotations

from comfy_llm_core import ComfyLLMError, ErrorAction

__all__ = ["AnswerSchemaError", "InvalidSchemaError", "StructuredOutputError"]


class StructuredOutputError(ComfyLLMError):
    """Base class of every error raised by ``comfy_llm_structured``."""

    action = ErrorAction.FIX_INPUT


class InvalidSchemaError(StructuredOutputError, ValueError):
    """The ``response_schema`` is not a usable JSON Schema.

    Raised before any model is loaded.

    Attributes:
        problem: What is wrong, in words.
    """

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(
            f"response_schema is not a usable JSON Schema: {problem}. Give a JSON Schema "
            'object such as {"type": "object", "properties": {"caption": {"type": "string"}}, '
            '"required": ["caption"]}, or leave response_schema empty for free text.'
        )


class AnswerSchemaError(StructuredOutputError, ValueError):
    """The answer is still not JSON that satisfies ``response_schema`` after its retry.

    A constrained engine can still end invalid (a budget that runs out
    mid-object, a schema keyword the grammar cannot express): the run fails
    with the reason instead of handing on text the next node cannot parse.

    Attributes:
        problem: The validator's message.
        retries: Generations re-run after a failed validation.
        cut_at_tokens: The token budget the answer was cut at, when it was.
        answer: The start of the invalid answer (at most 200 characters).
    """

    def __init__(
        self, problem: str, *, retries: int, cut_at_tokens: int | None, answer: str
    ) -> None:
        self.problem = problem
        self.retries = retries
        self.cut_at_tokens = cut_at_tokens
        self.answer = answer[:200]
        tries = "its retry" if retries == 1 else f"{retries} retries"
        if cut_at_tokens is not None:
            fix = (
                f"it was cut off at max_new_tokens ({cut_at_tokens} tokens): raise "
                "max_new_tokens, or ask for a shorter answer"
            )
        else:
            fix = "simplify response_schema or the prompt, or pick a larger model"
        shown = self.answer + ("…" if len(answer) > 200 else "")
        super().__init__(
            f"The answer does not satisfy response_schema after {tries}: {problem}; {fix}. "
            f"The answer began: {shown!r}."
        )
