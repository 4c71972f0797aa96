"""Turning engine-neutral inputs into chat messages and an image sequence.

Pure Python (Pillow objects pass through untouched); the MLX-specific
rendering lives in ``_engine``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from comfy_llm_reasoning import chat_template_kwargs

if TYPE_CHECKING:
    from comfy_llm_inputs import PreparedInputs
    from comfy_llm_profiles import ModelProfile

__all__ = [
    "THINK_CLOSE",
    "THINK_OPEN",
    "build_messages",
    "collect_images",
    "prompt_opens_reasoning",
    "template_kwargs",
]

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


def build_messages(prompt: str, system_prompt: str | None) -> list[dict[str, Any]]:
    """Build the chat messages for one request.

    Args:
        prompt: The user text (timestamps and file sections already assembled).
        system_prompt: The system text; omitted when empty or None.

    Returns:
        ``[system?, user]`` messages with plain string contents; MLX-VLM adds
        the model's image placeholders to the user message.
    """
    messages: list[dict[str, Any]] = []
    if system_prompt and system_prompt.strip():
        messages.append({"role": "system", "content": system_prompt})
    messages.append({"role": "user", "content": prompt})
    return messages


def collect_images(inputs: PreparedInputs) -> list[Any]:
    """Return the request's images followed by its sampled video frames, in order.

    The inputs package already sampled and timestamped the frames (and wrote
    the timestamps into the prompt), so each frame goes in as one more image.

    Args:
        inputs: The prepared request.

    Returns:
        RGB Pillow images: ``inputs.images`` in order, then the frames of
        ``inputs.video_frames`` in order.
    """
    images = list(inputs.images)
    images.extend(frame.image for frame in inputs.video_frames)
    return images


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


def prompt_opens_reasoning(prompt_text: str) -> bool:
    """Tell whether a rendered prompt ends inside an open ``<think>`` block.

    Args:
        prompt_text: The chat-template output, generation prompt included.

    Returns:
        True when the last ``<think>`` comes after the last ``</think>``, so
        generation starts inside the reasoning.
    """
    last_open = prompt_text.rfind(THINK_OPEN)
    return last_open >= 0 and last_open > prompt_text.rfind(THINK_CLOSE)
