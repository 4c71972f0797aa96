"""From engine-neutral inputs to the processor's tensors.

The message layout is shared with the MLX-VLM backend so both engines see the
same conversation: an optional system turn, then one user turn holding every
image, then every sampled video frame (as an image, in order), then the prompt
text, which already carries the frame timestamps and the file sections.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from comfy_llm_inputs import PreparedInputs
    from PIL import Image

__all__ = [
    "EncodedPrompt",
    "build_messages",
    "encode_prompt",
    "ordered_images",
    "prompt_opens_reasoning",
]

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


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


def ordered_images(inputs: PreparedInputs) -> list[Image.Image]:
    """Return the images the user turn carries: images first, then video frames.

    Args:
        inputs: The prepared inputs.

    Returns:
        The images, then each video frame's image in the order given
        (``PreparedInputs`` keeps them in time order).
    """
    images = list(getattr(inputs, "images", ()) or ())
    images.extend(frame.image for frame in getattr(inputs, "video_frames", ()) or ())
    return images


def build_messages(
    system_prompt: str | None, prompt: str, image_count: int
) -> list[dict[str, Any]]:
    """Build the chat messages for a processor's chat template.

    Content is always a list of typed parts (``{"type": "text", ...}``,
    ``{"type": "image"}``), the form every Hugging Face multimodal template
    accepts, the system turn included.

    Args:
        system_prompt: The system prompt; omitted when empty or None.
        prompt: The user's prompt text (timestamps and file sections included).
        image_count: How many image placeholders go before the text.

    Returns:
        The messages.
    """
    messages: list[dict[str, Any]] = []
    if system_prompt and system_prompt.strip():
        messages.append({"role": "system", "content": [{"type": "text", "text": system_prompt}]})
    content: list[dict[str, Any]] = [{"type": "image"} for _ in range(image_count)]
    content.append({"type": "text", "text": prompt})
    messages.append({"role": "user", "content": content})
    return messages


def prompt_opens_reasoning(rendered: str) -> bool:
    """Tell whether a rendered prompt ends inside an opened reasoning block.

    Args:
        rendered: The chat-template output.

    Returns:
        True when the last ``<think>`` comes after the last ``</think>``
        (e.g. Qwen3's generation prompt with thinking enabled ends in ``<think>``
        and a newline).
    """
    opened = rendered.rfind(THINK_OPEN)
    return opened >= 0 and opened > rendered.rfind(THINK_CLOSE)


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
    images = [_rgb(image) for image in ordered_images(inputs)]
    messages = build_messages(getattr(inputs, "system_prompt", None), inputs.prompt, len(images))
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
