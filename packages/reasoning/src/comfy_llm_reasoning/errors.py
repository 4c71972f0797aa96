"""Errors raised by the reasoning package.

Every error a caller can cause derives from :class:`ReasoningError`, which is
a :class:`ValueError` so that generic input validation keeps catching it.
"""

from __future__ import annotations

from comfy_llm_core import ComfyLLMError, ErrorAction

__all__ = ["ReasoningError"]


class ReasoningError(ComfyLLMError, ValueError):
    """A reasoning parser could not be selected or could not parse its input.

    The message names the offending value, the accepted values or limit, and
    the fix.
    """

    action = ErrorAction.FIX_INPUT
