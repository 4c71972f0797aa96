"""How a parser sees a tokenizer, without importing transformers."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import ReasoningError

__all__ = ["THINK_CLOSE", "THINK_OPEN", "TokenVocabulary", "prompt_opens_reasoning"]

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


def prompt_opens_reasoning(rendered: str) -> bool:
    """Tell whether a rendered prompt ends inside an opened reasoning block.

    Every engine asks this of its chat template's output, so generation that
    starts inside the reasoning is parsed (and shown live) as such.

    Args:
        rendered: The chat-template output, generation prompt included.

    Returns:
        True when the last ``<think>`` comes after the last ``</think>``
        (e.g. Qwen3's generation prompt with thinking enabled ends in
        ``<think>`` and a newline).
    """
    opened = rendered.rfind(THINK_OPEN)
    return opened >= 0 and opened > rendered.rfind(THINK_CLOSE)


@dataclass(frozen=True)
class TokenVocabulary:
    """The three things a parser needs from a tokenizer.

    Attributes:
        token_to_id: Token string to id, including added tokens such as
            ``<think>``. Only single-token entries matter: a string that the
            tokenizer spells with several tokens is not a boundary token.
        decode: Turns ids into text, skipping special tokens (like a Hugging
            Face ``decode(ids, skip_special_tokens=True)``).
        special_ids: Ids of special tokens (``<|im_end|>``, padding, ...);
            stripped from both channels and counted separately.
    """

    token_to_id: Mapping[str, int]
    decode: Callable[[Sequence[int]], str]
    special_ids: frozenset[int] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        """Validate the fields.

        Raises:
            ReasoningError: ``decode`` is not callable, or ``special_ids`` or
                the values of ``token_to_id`` are not non-negative ints.
        """
        if not callable(self.decode):
            raise ReasoningError(
                f"TokenVocabulary.decode must be callable, got {type(self.decode).__name__}."
            )
        special = frozenset(self.special_ids)
        for token_id in special:
            _check_id(token_id, "TokenVocabulary.special_ids")
        object.__setattr__(self, "special_ids", special)

    def id_of(self, token: str) -> int | None:
        """Return the id of ``token`` when the vocabulary holds it as one token.

        Args:
            token: The exact token string, e.g. ``"</think>"``.

        Returns:
            The id, or ``None`` when the token is not a single vocabulary entry.

        Raises:
            ReasoningError: The vocabulary maps the token to something that is
                not a non-negative int.
        """
        token_id = self.token_to_id.get(token)
        if token_id is None:
            return None
        _check_id(token_id, f"TokenVocabulary.token_to_id[{token!r}]")
        return token_id

    def special_strings(self) -> tuple[str, ...]:
        """Return the text of every special token, longest first.

        Used to strip special tokens from text that a backend decoded without
        skipping them.

        Returns:
            The strings whose ids are in :attr:`special_ids`, longest first.
        """
        if not self.special_ids:
            return ()
        found = {
            token
            for token, token_id in self.token_to_id.items()
            if token_id in self.special_ids and token
        }
        return tuple(sorted(found, key=lambda text: (-len(text), text)))

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> TokenVocabulary:
        """Build a vocabulary from a Hugging Face style tokenizer (duck typed).

        Works with ``transformers`` tokenizers and with the tokenizer that
        MLX-VLM exposes (it wraps one). The tokenizer needs
        ``decode(ids, skip_special_tokens=True)``; the vocabulary comes from
        ``get_vocab()`` or, failing that, from ``convert_tokens_to_ids`` for the
        think markers and the special tokens; special ids from
        ``all_special_ids``.

        Args:
            tokenizer: The tokenizer object.

        Returns:
            A vocabulary that decodes through the tokenizer.

        Raises:
            ReasoningError: The object has no ``decode`` method, or neither
                ``get_vocab`` nor ``convert_tokens_to_ids``.
        """
        decode_method = getattr(tokenizer, "decode", None)
        if not callable(decode_method):
            raise ReasoningError(
                f"TokenVocabulary.from_tokenizer needs a tokenizer with decode(); "
                f"{type(tokenizer).__name__} has none. Pass a Hugging Face tokenizer "
                "or build TokenVocabulary(token_to_id, decode, special_ids) yourself."
            )
        special_ids = frozenset(
            int(token_id)
            for token_id in (getattr(tokenizer, "all_special_ids", None) or ())
            if isinstance(token_id, int) and token_id >= 0
        )
        token_to_id = _vocabulary_of(tokenizer)

        def decode(ids: Sequence[int]) -> str:
            return str(decode_method(list(ids), skip_special_tokens=True))

        return cls(token_to_id=token_to_id, decode=decode, special_ids=special_ids)


def _vocabulary_of(tokenizer: Any) -> Mapping[str, int]:
    """Read the token-to-id map of a tokenizer.

    Args:
        tokenizer: A Hugging Face style tokenizer.

    Returns:
        The full vocabulary when ``get_vocab`` exists, else the think markers
        and special tokens that ``convert_tokens_to_ids`` knows.

    Raises:
        ReasoningError: The tokenizer offers neither lookup.
    """
    get_vocab = getattr(tokenizer, "get_vocab", None)
    if callable(get_vocab):
        vocab = get_vocab()
        if isinstance(vocab, Mapping):
            return {str(token): int(token_id) for token, token_id in vocab.items()}
    convert = getattr(tokenizer, "convert_tokens_to_ids", None)
    if not callable(convert):
        raise ReasoningError(
            f"TokenVocabulary.from_tokenizer needs get_vocab() or convert_tokens_to_ids() "
            f"on the tokenizer; {type(tokenizer).__name__} has neither."
        )
    unknown = getattr(tokenizer, "unk_token_id", None)
    wanted: list[str] = [THINK_OPEN, THINK_CLOSE]
    wanted.extend(_strings(getattr(tokenizer, "all_special_tokens", None)))
    found: dict[str, int] = {}
    for token in wanted:
        token_id = convert(token)
        if isinstance(token_id, int) and token_id >= 0 and token_id != unknown:
            found[token] = token_id
    return found


def _strings(values: Iterable[object] | None) -> list[str]:
    return [value for value in (values or ()) if isinstance(value, str)]


def _check_id(token_id: object, where: str) -> None:
    if isinstance(token_id, bool) or not isinstance(token_id, int) or token_id < 0:
        raise ReasoningError(f"{where} must be a non-negative int token id, got {token_id!r}.")
