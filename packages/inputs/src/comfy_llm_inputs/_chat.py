"""Prepared inputs as chat messages: the one conversation every engine renders.

An optional system turn, then one user turn holding every part in order
(each image, then each sampled video frame as an image, then the prompt
text, which already carries the frame timestamps and the file sections).
Engines render it with their own chat template; whether the rendered prompt
opened a reasoning block is ``comfy_llm_reasoning.prompt_opens_reasoning``,
and whether it already starts with the tokenizer's BOS is
:func:`template_wrote_bos` (every engine asks it before encoding).
"""

from __future__ import annotations

from typing import Any

from ._prepared import PreparedInputs

__all__ = ["chat_messages", "template_wrote_bos"]


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


def template_wrote_bos(rendered: str, bos_token: object) -> bool:
    """Whether the rendered prompt already starts with the tokenizer's BOS.

    Many chat templates write ``bos_token`` themselves (JoyCaption's Llama 3.1
    ``<|begin_of_text|>``, Mistral 3's and LLaVA-NeXT's ``<s>``, Gemma 3's
    ``<bos>``) while their tokenizer also adds one when asked for special
    tokens, as every engine asks by default (Transformers' processor call,
    vLLM's raw-prompt tokenization, MLX-VLM's ``prepare_inputs``, llama.cpp's
    ``add_bos``). The model then reads two BOS tokens, which it never saw in
    training. When this says True, the engine encodes the text without
    adding special tokens (or drops the template's copy, llama.cpp), so the
    prompt starts with exactly one.

    Args:
        rendered: The chat template's output.
        bos_token: The tokenizer's BOS text (``None`` or ``""`` when it has none).
    """
    return isinstance(bos_token, str) and bool(bos_token) and rendered.startswith(bos_token)
