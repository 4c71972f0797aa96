"""From engine-neutral inputs to the processor's tensors.

The conversation is the inputs package's (``chat_messages``: the one every
engine renders); this module renders it with the processor's chat template
and encodes the text and the pictures in order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from comfy_llm_inputs import chat_messages
from comfy_llm_reasoning import prompt_opens_reasoning

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
    rendered = _render(processor, messages, template_kwargs)
    if not isinstance(rendered, str):  # some processors return one string per conversation
        rendered = _single(rendered)
    call: dict[str, Any] = {"text": [rendered], "return_tensors": "pt"}
    bos = getattr(getattr(processor, "tokenizer", None), "bos_token", None)
    if isinstance(bos, str) and bos and rendered.startswith(bos):
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


def _render(
    processor: Any, messages: list[dict[str, Any]], template_kwargs: Mapping[str, object]
) -> Any:
    """The chat template's output for ``messages``.

    Some templates read ``content`` as a string and write the image tokens
    themselves (JoyCaption Beta One's Llama 3.1 template calls
    ``content.replace``; reviews/llava.md): when typed parts make the
    template fail, the same conversation is rendered again with each
    content's text as a plain string. A template that fails both ways raises
    the first error.
    """

    def render(conversation: list[dict[str, Any]]) -> Any:
        return processor.apply_chat_template(
            conversation, tokenize=False, add_generation_prompt=True, **dict(template_kwargs)
        )

    try:
        return render(messages)
    except Exception as error:  # jinja2 raises its own classes and the template's TypeErrors
        as_text = [
            {"role": message["role"], "content": _text_of(message["content"])}
            for message in messages
        ]
        try:
            return render(as_text)
        except Exception:
            raise error from None


def _text_of(content: Sequence[Mapping[str, Any]]) -> str:
    return "".join(str(part["text"]) for part in content if part.get("type") == "text")


def _rgb(image: Image.Image) -> Image.Image:
    return image if image.mode == "RGB" else image.convert("RGB")


def _single(rendered: Sequence[str]) -> str:
    return str(rendered[0])
