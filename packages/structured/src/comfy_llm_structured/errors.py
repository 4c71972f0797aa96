"""Errors raised for JSON-schema responses."""

from __future__ import annotations

from comfy_llm_core import ComfyLLMError, ErrorAction

__all__ = ["InvalidSchemaError", "StructuredOutputError"]


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
