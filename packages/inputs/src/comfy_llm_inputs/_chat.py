"""Prepared inputs as chat messages: the one conversation every engine renders.

An optional system turn, then one user turn holding every part in order
(each image, then each sampled video frame as an image, then the prompt
text, which already carries the frame timestamps and the file sections).
Engines render it with their own chat template; whether the rendered prompt
opened a reasoning block is ``comfy_llm_reasoning.prompt_opens_reasoning``.
"""

from __future__ import annotations

from typing import Any

from ._prepared import PreparedInputs

__all__ = ["chat_messages"]


def chat_messages(
    inputs: PreparedInputs, *, plain_text: bool = False, media_marker: str = ""
) -> list[dict[str, Any]]:
    """The request's messages for a chat template.

    Content is a list of typed entries (``{"type": "image"}`` per media part,
    ``{"type": "text", "text": ...}``), the form every Hugging Face multimodal
    template accepts, the system turn included.

    Args:
        inputs: The prepared inputs.
        plain_text: Give each turn its text as a plain string instead, for
            engines that place the media themselves: llama.cpp's libmtmd
            (``media_marker``). Not MLX-VLM: told only how many images come,
            it places them by its own per-model table.
        media_marker: With ``plain_text``, the text each media part becomes,
            before the prompt (libmtmd's marker; empty: none).

    Returns:
        ``[system?, user]``; the system turn only when its text is not blank.
    """
    system = inputs.system_prompt
    messages: list[dict[str, Any]] = []
    if system and system.strip():
        content: Any = system if plain_text else [{"type": "text", "text": system}]
        messages.append({"role": "system", "content": content})
    if plain_text:
        markers = media_marker * len(inputs.media)
        messages.append({"role": "user", "content": markers + inputs.prompt})
        return messages
    messages.append({"role": "user", "content": [part.chat_entry() for part in inputs.parts]})
    return messages
