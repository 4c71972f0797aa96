"""From engine-neutral inputs to the processor's tensors.

The conversation is the inputs package's (``chat_messages``: the one every
engine renders); this module renders it with the processor's chat template
and encodes the text and the pictures in order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from comfy_llm_inputs import chat_messages, template_wrote_bos
from comfy_llm_reasoning import prompt_opens_reasoning

from .._processor import render_chat

if TYPE_CHECKING:
    from comfy_llm_inputs import PreparedInputs
    from PIL import Image

__all__ = ["EncodedPrompt", "encode_prompt"]


@dataclasses.dataclass(frozen=True, slots=True)
class EncodedPrompt:
    """A rendered and encoded prompt.

    Attributes:
        text: The chat-template output (special tokens included).
        tensors: What the processor returned (``input_ids``, ``pixel_values``, ...).
        prompt_tokens: Length of ``input_ids`` (text plus vision tokens).
        opened_reasoning: The rendered prompt ends inside an opened ``<think>``.
    """

    text: str
    tensors: Mapping[str, Any]
    prompt_tokens: int
    opened_reasoning: bool


def encode_prompt(
    processor: Any,
    inputs: PreparedInputs,
    template_kwargs: Mapping[str, object],
) -> EncodedPrompt:
    """Render the chat template and encode text and images with the processor.

    Args:
        processor: A Hugging Face ``ProcessorMixin`` (AutoProcessor result).
        inputs: The prepared inputs.
        template_kwargs: Extra chat-template variables, e.g.
            ``{"enable_thinking": False}`` for qwen3 profiles.

    Returns:
        The encoded prompt (CPU tensors, batch of one).
    """
    images = [_rgb(image) for image in inputs.images_in_order()]
    messages = chat_messages(inputs)
    rendered = render_chat(processor, messages, template_kwargs)
    call: dict[str, Any] = {"text": [rendered], "return_tensors": "pt"}
    tokenizer = getattr(processor, "tokenizer", None)
    if template_wrote_bos(rendered, getattr(tokenizer, "bos_token", None)):
        call["add_special_tokens"] = False  # the template already wrote it; never twice
    if images:
        call["images"] = [images]
    tensors = processor(**call)
    input_ids = tensors["input_ids"]
    return EncodedPrompt(
        text=rendered,
        tensors=tensors,
        prompt_tokens=int(input_ids.shape[-1]),
        opened_reasoning=prompt_opens_reasoning(rendered),
    )


def _rgb(image: Image.Image) -> Image.Image:
    return image if image.mode == "RGB" else image.convert("RGB")
