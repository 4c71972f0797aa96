"""The conversation, rendered with the GGUF's own chat template.

The conversation is every engine's (``comfy_llm_inputs.chat_messages``): an
optional system turn, then one user turn (every image, then every sampled
video frame, then the prompt text, which already carries the frame
timestamps and file sections). Here the contents are plain text and each
picture is libmtmd's media marker before the text, so every template renders
them where they belong and libmtmd adds the model's own image tokens around
the embeddings (as llama-server does); typed image parts would make
templates write their image tokens as plain text.

Rendering uses Jinja's immutable sandbox (the template comes from a
downloaded file) with Hugging Face's conventions: ``trim_blocks``,
``lstrip_blocks``, ``raise_exception``, ``strftime_now``, ``tojson``.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from comfy_llm_inputs import template_wrote_bos

if TYPE_CHECKING:
    from jinja2 import Template

__all__ = ["TemplateError", "render_prompt"]


class TemplateError(ValueError):
    """The model's chat template is missing or failed to render."""


def _raise(message: str) -> None:
    raise TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.datetime.now().strftime(fmt)


def _tojson(value: object, indent: int | None = None, **_: object) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent)


@lru_cache(maxsize=8)
def _compile(template: str) -> Template:
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    environment = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]
    )
    environment.filters["tojson"] = _tojson
    environment.globals.update(raise_exception=_raise, strftime_now=_strftime_now)
    return environment.from_string(template)


def render_prompt(
    template: str | None,
    messages: list[dict[str, Any]],
    *,
    bos_text: str,
    eos_text: str,
    strip_bos: bool,
    template_kwargs: Mapping[str, object],
) -> str:
    """Render the generation prompt.

    Args:
        template: The GGUF's ``tokenizer.chat_template``.
        messages: The conversation.
        bos_text: The BOS token's text (the template's ``bos_token``).
        eos_text: The EOS token's text (the template's ``eos_token``).
        strip_bos: The tokenizer adds BOS itself: a BOS the template wrote
            first is removed, so the prompt does not start with two.
        template_kwargs: Extra variables, e.g. ``enable_thinking``.

    Returns:
        The prompt text, generation prompt included.

    Raises:
        TemplateError: No template, or it failed to render.
    """
    if not template:
        raise TemplateError("the GGUF has no tokenizer.chat_template")
    try:
        text = _compile(template).render(
            messages=messages,
            add_generation_prompt=True,
            bos_token=bos_text,
            eos_token=eos_text,
            **dict(template_kwargs),
        )
    except TemplateError:
        raise
    except Exception as error:  # Jinja raises many kinds for a broken template
        raise TemplateError(f"{type(error).__name__}: {error}") from error
    if strip_bos and template_wrote_bos(text, bos_text):
        text = text[len(bos_text) :]
    return text
