"""Choosing a parser for a profile, and the matching chat-template arguments."""

from __future__ import annotations

from ._parsers import DirectResponseParser, PassthroughParser, Qwen3ReasoningParser
from ._protocol import ReasoningParser
from ._vocabulary import THINK_CLOSE, TokenVocabulary
from .errors import ReasoningError

__all__ = [
    "KNOWN_PARSERS",
    "chat_template_kwargs",
    "get_parser",
    "parser_for_profile",
    "resolve_parser_name",
]

_PARSERS: dict[str, type[Qwen3ReasoningParser | PassthroughParser | DirectResponseParser]] = {
    Qwen3ReasoningParser.name: Qwen3ReasoningParser,
    PassthroughParser.name: PassthroughParser,
    DirectResponseParser.name: DirectResponseParser,
}
KNOWN_PARSERS: tuple[str, ...] = tuple(_PARSERS)
"""Every name :func:`get_parser` accepts."""

_ARCHITECTURE_FALLBACK: tuple[tuple[str, str], ...] = (
    # (case-insensitive architecture prefix, parser); covers Qwen3_5* too.
    ("qwen3", Qwen3ReasoningParser.name),
)


def _normalise(name: object, what: str) -> str:
    if not isinstance(name, str):
        raise ReasoningError(
            f"{what} must be a parser name (one of {', '.join(KNOWN_PARSERS)}), "
            f"got {type(name).__name__} {name!r}."
        )
    key = name.strip().lower()
    if key not in _PARSERS:
        raise ReasoningError(
            f"Unknown reasoning parser {name!r} in {what}; known parsers: "
            f"{', '.join(KNOWN_PARSERS)}. Re-resolve the model profile or pick one of these."
        )
    return key


def get_parser(name: str, vocabulary: TokenVocabulary | None) -> ReasoningParser:
    """Create a parser by name.

    Args:
        name: ``"qwen3"``, ``"none"`` (passthrough) or ``"direct"``
            (case-insensitive).
        vocabulary: The tokenizer's vocabulary, or ``None`` (the ``qwen3``
            and ``direct`` parsers then split on text delimiters and estimate
            token counts).

    Returns:
        A new parser.

    Raises:
        ReasoningError: The name is unknown (the message lists the known
            names), or ``vocabulary`` is not a TokenVocabulary.
    """
    return _PARSERS[_normalise(name, "get_parser(name)")](vocabulary)


def resolve_parser_name(reasoning_parser: str | None, architecture: str | None) -> str:
    """Return the parser a profile uses when reasoning is enabled.

    Args:
        reasoning_parser: The profile's immutable ``reasoning_parser``; wins
            when set.
        architecture: The model architecture (e.g. ``Qwen3_5ForConditionalGeneration``),
            used only when the profile names no parser (older profiles).

    Returns:
        A name from :data:`KNOWN_PARSERS`: the profile's, else ``"qwen3"`` for
        ``Qwen3*`` / ``Qwen3_5*`` architectures, else ``"none"``.

    Raises:
        ReasoningError: The profile names an unknown parser.
    """
    if reasoning_parser is not None:
        return _normalise(reasoning_parser, "the profile's reasoning_parser")
    if isinstance(architecture, str):
        lowered = architecture.strip().lower()
        for prefix, parser in _ARCHITECTURE_FALLBACK:
            if lowered.startswith(prefix):
                return parser
    return PassthroughParser.name


def parser_for_profile(
    reasoning_parser: str | None,
    architecture: str | None,
    *,
    enable_reasoning: bool,
    vocabulary: TokenVocabulary | None,
) -> ReasoningParser:
    """Create the parser for one request.

    Args:
        reasoning_parser: The profile's ``reasoning_parser`` (or ``None``).
        architecture: The profile's architecture, for the fallback.
        enable_reasoning: The request's setting. When ``False`` the result is
            always the direct-response parser (reasoning empty); it removes
            think blocks only for profiles whose format has them.
        vocabulary: The tokenizer's vocabulary, or ``None``.

    Returns:
        The parser.

    Raises:
        ReasoningError: The profile names an unknown parser.
    """
    name = resolve_parser_name(reasoning_parser, architecture)
    if not enable_reasoning:
        return DirectResponseParser(vocabulary, think_markers=name == Qwen3ReasoningParser.name)
    return get_parser(name, vocabulary)


def chat_template_kwargs(
    reasoning_parser: str | None, architecture: str | None, *, enable_reasoning: bool
) -> dict[str, object]:
    """Return the extra chat-template arguments for a request.

    Args:
        reasoning_parser: The profile's ``reasoning_parser`` (or ``None``).
        architecture: The profile's architecture, for the fallback.
        enable_reasoning: The request's setting.

    Returns:
        ``{"enable_thinking": enable_reasoning}`` for ``qwen3`` profiles,
        ``{}`` otherwise. A new dict each call.

    Raises:
        ReasoningError: The profile names an unknown parser.
    """
    if resolve_parser_name(reasoning_parser, architecture) == Qwen3ReasoningParser.name:
        return {"enable_thinking": bool(enable_reasoning)}
    return {}


def reasoning_end_id(
    reasoning_parser: str | None,
    architecture: str | None,
    *,
    enable_reasoning: bool,
    vocabulary: TokenVocabulary | None,
) -> int | None:
    """The token id after which the answer starts, when the model reasons first.

    Constrained decoding waits for it so reasoning stays free. None when the
    request does not reason (the whole generation is the answer) or the
    vocabulary has no single ``</think>`` id.
    """
    if not enable_reasoning or vocabulary is None:
        return None
    if resolve_parser_name(reasoning_parser, architecture) != Qwen3ReasoningParser.name:
        return None
    return vocabulary.id_of(THINK_CLOSE)
