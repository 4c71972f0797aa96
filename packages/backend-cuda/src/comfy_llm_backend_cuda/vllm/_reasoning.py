"""vLLM's own ``qwen3`` reasoning parser, for the native reasoning field.

The shared parser contract prefers a native field; when vLLM's parser API
is missing or fails, the field stays None and the exact-id parser decides.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["native_reasoning"]

logger = logging.getLogger(__name__)
_PARSERS: dict[int, Any] = {}


def _parser(tokenizer: Any) -> Any:
    key = id(tokenizer)
    if key not in _PARSERS:
        from vllm.reasoning import ReasoningParserManager

        _PARSERS.clear()  # one tokenizer per resident engine is the common case
        _PARSERS[key] = ReasoningParserManager.get_reasoning_parser("qwen3")(tokenizer)
    return _PARSERS[key]


def native_reasoning(tokenizer: Any, text: str) -> tuple[str | None, str]:
    """Split generated text with vLLM's qwen3 parser.

    Args:
        tokenizer: The model's tokenizer.
        text: The generated text (special tokens skipped; ``<think>`` kept).

    Returns:
        ``(reasoning, content)``; reasoning None when vLLM could not parse.
    """
    try:
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

        request = ChatCompletionRequest(
            messages=[{"role": "user", "content": ""}],
            model="comfy-llm",
            chat_template_kwargs={"enable_thinking": True},
        )
        reasoning, content = _parser(tokenizer).extract_reasoning(text, request)
    except Exception:  # an API drift must not lose a finished answer
        logger.warning("vLLM's qwen3 reasoning parser failed; using exact ids", exc_info=True)
        return None, text
    return (reasoning or ""), (content or "")
