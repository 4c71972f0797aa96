"""The chat-template arguments of a request (the conversation is ``chat_messages``').

Pure Python; the MLX-specific rendering lives in ``_engine``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from comfy_llm_reasoning import chat_template_kwargs

if TYPE_CHECKING:
    from comfy_llm_profiles import ModelProfile

__all__ = ["template_kwargs"]


def template_kwargs(profile: ModelProfile, *, enable_reasoning: bool) -> dict[str, object]:
    """Return the chat-template arguments for a request.

    Args:
        profile: The profile (its ``reasoning_parser`` and ``architecture``).
        enable_reasoning: The request's setting.

    Returns:
        ``{"enable_thinking": enable_reasoning}`` for ``qwen3`` profiles (always
        explicit: MLX-VLM would default it to False), ``{}`` otherwise.

    Raises:
        comfy_llm_reasoning.ReasoningError: The profile names an unknown parser.
    """
    return chat_template_kwargs(
        profile.reasoning_parser, profile.architecture, enable_reasoning=enable_reasoning
    )
