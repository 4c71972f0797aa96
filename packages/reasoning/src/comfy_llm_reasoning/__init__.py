"""Reasoning parsers and token accounting shared by every backend.

One contract for every backend: hand the generated token ids, the decoded
text and any reasoning the engine separated natively to a parser, get a
:class:`ReasoningResult` with the response, the reasoning and token counts.
Pure Python; nothing heavy is imported.
"""

from __future__ import annotations

from ._live import LiveSplit, live_split
from ._parsers import DirectResponseParser, PassthroughParser, Qwen3ReasoningParser
from ._protocol import ReasoningParser
from ._result import Accounting, ReasoningResult
from ._select import (
    KNOWN_PARSERS,
    chat_template_kwargs,
    get_parser,
    parser_for_profile,
    reasoning_end_id,
    resolve_parser_name,
)
from ._vocabulary import THINK_CLOSE, THINK_OPEN, TokenVocabulary, prompt_opens_reasoning
from .errors import ReasoningError

__version__ = "0.1.0"

__all__ = [
    "KNOWN_PARSERS",
    "THINK_CLOSE",
    "THINK_OPEN",
    "Accounting",
    "DirectResponseParser",
    "LiveSplit",
    "PassthroughParser",
    "Qwen3ReasoningParser",
    "ReasoningError",
    "ReasoningParser",
    "ReasoningResult",
    "TokenVocabulary",
    "chat_template_kwargs",
    "get_parser",
    "live_split",
    "parser_for_profile",
    "prompt_opens_reasoning",
    "reasoning_end_id",
    "resolve_parser_name",
]
