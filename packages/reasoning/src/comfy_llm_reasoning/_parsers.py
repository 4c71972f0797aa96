"""The reasoning parsers: ``qwen3``, passthrough (``none``) and ``direct``."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import replace

from ._result import ReasoningResult
from ._split import IdSplit, apportion, split_ids, split_text, strip_strings
from ._vocabulary import THINK_CLOSE, THINK_OPEN, TokenVocabulary
from .errors import ReasoningError

__all__ = [
    "DirectResponseParser",
    "PassthroughParser",
    "Qwen3ReasoningParser",
]


class _BaseParser:
    """Shared validation and decoding for the built-in parsers."""

    name: str

    def __init__(self, vocabulary: TokenVocabulary | None = None) -> None:
        if vocabulary is not None and not isinstance(vocabulary, TokenVocabulary):
            raise ReasoningError(
                f"{type(self).__name__} needs a TokenVocabulary or None, got "
                f"{type(vocabulary).__name__}; build one with TokenVocabulary.from_tokenizer()."
            )
        self.vocabulary = vocabulary
        self._special_strings = vocabulary.special_strings() if vocabulary else ()
        open_id = vocabulary.id_of(THINK_OPEN) if vocabulary else None
        close_id = vocabulary.id_of(THINK_CLOSE) if vocabulary else None
        self._boundary_ids = (
            (open_id, close_id)
            if open_id is not None and close_id is not None and open_id != close_id
            else None
        )

    def __repr__(self) -> str:
        mode = "ids" if self._boundary_ids else "text"
        return f"{type(self).__name__}(name={self.name!r}, boundaries={mode})"

    @property
    def uses_boundary_ids(self) -> bool:
        """Whether ``<think>`` and ``</think>`` are single ids in the vocabulary."""
        return self._boundary_ids is not None

    def _ids(self, token_ids: Sequence[int]) -> tuple[int, ...]:
        if isinstance(token_ids, str | bytes):
            raise ReasoningError(
                f"{self.name} parser: token_ids must be a sequence of ints, got "
                f"{type(token_ids).__name__}; pass the generated ids, not the text."
            )
        try:
            raw = tuple(token_ids)
        except TypeError as error:
            raise ReasoningError(
                f"{self.name} parser: token_ids must be a sequence of ints, got "
                f"{type(token_ids).__name__}."
            ) from error
        if all(type(token_id) is int and token_id >= 0 for token_id in raw):
            return raw
        ids: list[int] = []
        for position, token_id in enumerate(raw):
            try:
                value = None if isinstance(token_id, bool) else operator.index(token_id)
            except TypeError:
                value = None
            if value is None or value < 0:
                raise ReasoningError(
                    f"{self.name} parser: token_ids[{position}] is {token_id!r}; every "
                    "generated token id must be a non-negative int."
                )
            ids.append(value)
        return tuple(ids)

    def _split_ids(self, ids: Sequence[int], prompt_opened: bool) -> IdSplit | None:
        if self._boundary_ids is None or self.vocabulary is None:
            return None
        open_id, close_id = self._boundary_ids
        return split_ids(
            ids,
            open_id=open_id,
            close_id=close_id,
            special_ids=self.vocabulary.special_ids,
            prompt_opened=prompt_opened,
        )

    def _decode(self, ids: Sequence[int]) -> str:
        if self.vocabulary is None or not ids:
            return ""
        text, _ = strip_strings(self.vocabulary.decode(ids), self._special_strings)
        return text

    def _special_count(self, ids: Sequence[int]) -> int:
        if self.vocabulary is None:
            return 0
        special = self.vocabulary.special_ids
        return sum(1 for token_id in ids if token_id in special)

    def _text(self, ids: Sequence[int], text: str | None) -> str:
        if text is None:
            if self.vocabulary is None:
                if not ids:
                    return ""
                raise ReasoningError(
                    f"{self.name} parser: no text and no vocabulary to decode "
                    f"{len(ids)} token ids; pass the decoded text or a TokenVocabulary."
                )
            special = self.vocabulary.special_ids
            return self._decode([token_id for token_id in ids if token_id not in special])
        if not isinstance(text, str):
            raise ReasoningError(
                f"{self.name} parser: text must be a str or None, got {type(text).__name__}."
            )
        cleaned, _ = strip_strings(text, self._special_strings)
        return cleaned

    def _estimated(
        self,
        ids: Sequence[int],
        *,
        reasoning: str,
        response: str,
        marker_chars: int,
        truncated: bool,
        reasoning_text: str | None = None,
    ) -> ReasoningResult:
        """Build a result whose channel counts are apportioned by (untrimmed) characters."""
        special = self._special_count(ids)
        reasoning_count, marker_count, response_count = apportion(
            len(ids) - special, [len(reasoning), marker_chars, len(response)]
        )
        return ReasoningResult(
            response=response.strip(),
            reasoning=(reasoning if reasoning_text is None else reasoning_text).strip(),
            reasoning_tokens=reasoning_count,
            output_tokens=len(ids),
            parser=self.name,
            truncated=truncated,
            response_tokens=response_count,
            marker_tokens=marker_count,
            special_tokens=special,
            accounting="estimated",
        )


class Qwen3ReasoningParser(_BaseParser):
    """Qwen3 / Qwen3.5 ``<think> ... </think>`` reasoning.

    Precedence: a native reasoning string from the engine (then the response
    is the engine's text); else the exact ``<think>`` / ``</think>`` token ids
    from the vocabulary; else, when the vocabulary is missing or does not
    hold both markers as single tokens, the literal delimiters in the text.
    Token counts are exact whenever the boundary ids are known.
    """

    name = "qwen3"

    def parse(
        self,
        token_ids: Sequence[int],
        text: str | None,
        *,
        native_reasoning: str | None = None,
        prompt_opened_reasoning: bool = False,
    ) -> ReasoningResult:
        """Split one generation into response and reasoning.

        Args:
            token_ids: Every generated token id.
            text: The decoded generated text, or ``None`` to decode the ids.
            native_reasoning: Reasoning the engine already separated.
            prompt_opened_reasoning: The prompt ended with ``<think>``.

        Returns:
            The parsed result.

        Raises:
            ReasoningError: Malformed ids or text, or nothing to decode from.
        """
        ids = self._ids(token_ids)
        split = self._split_ids(ids, prompt_opened_reasoning)
        if native_reasoning is not None:
            return self._native(ids, text, native_reasoning, split)
        if split is not None:
            return self._from_split(
                ids,
                split,
                response=self._decode(split.response_ids),
                reasoning=self._decode(split.reasoning_ids),
            )
        text_split = split_text(self._text(ids, text), prompt_opened=prompt_opened_reasoning)
        return self._estimated(
            ids,
            reasoning=text_split.reasoning,
            response=text_split.response,
            marker_chars=text_split.marker_chars,
            truncated=text_split.truncated,
        )

    def _from_split(
        self, ids: tuple[int, ...], split: IdSplit, *, response: str, reasoning: str
    ) -> ReasoningResult:
        """A result whose token counts are exact: the boundary ids were found."""
        return ReasoningResult(
            response=response.strip(),
            reasoning=reasoning.strip(),
            reasoning_tokens=len(split.reasoning_ids),
            output_tokens=len(ids),
            parser=self.name,
            truncated=split.truncated,
            response_tokens=len(split.response_ids),
            marker_tokens=split.marker_tokens,
            special_tokens=split.special_tokens,
        )

    def _native(
        self, ids: tuple[int, ...], text: str | None, native: str, split: IdSplit | None
    ) -> ReasoningResult:
        if not isinstance(native, str):
            raise ReasoningError(
                f"{self.name} parser: native_reasoning must be a str or None, got "
                f"{type(native).__name__}."
            )
        native, _ = strip_strings(native, self._special_strings)
        if split is not None:
            response = (
                self._text(ids, text) if text is not None else self._decode(split.response_ids)
            )
            return self._from_split(ids, split, response=response, reasoning=native)
        response = "" if text is None else self._text(ids, text)
        return self._estimated(
            ids, reasoning=native, response=response, marker_chars=0, truncated=False
        )


class PassthroughParser(_BaseParser):
    """No reasoning format: the whole decoded text is the response.

    Special tokens are stripped; ``<think>`` text or ids are left as they are
    and any native reasoning is ignored (the profile declares none).
    """

    name = "none"

    def parse(
        self,
        token_ids: Sequence[int],
        text: str | None,
        *,
        native_reasoning: str | None = None,
        prompt_opened_reasoning: bool = False,
    ) -> ReasoningResult:
        """Return the decoded text as the response; reasoning is empty.

        Args:
            token_ids: Every generated token id.
            text: The decoded generated text, or ``None`` to decode the ids.
            native_reasoning: Ignored.
            prompt_opened_reasoning: Ignored.

        Returns:
            The result; counts are exact when a vocabulary is known.

        Raises:
            ReasoningError: Malformed ids or text, or nothing to decode from.
        """
        del native_reasoning, prompt_opened_reasoning
        ids = self._ids(token_ids)
        special = self._special_count(ids)
        return ReasoningResult(
            response=self._text(ids, text).strip(),
            reasoning="",
            reasoning_tokens=0,
            output_tokens=len(ids),
            parser=self.name,
            response_tokens=len(ids) - special,
            special_tokens=special,
            accounting="exact" if self.vocabulary is not None else "estimated",
        )


class DirectResponseParser(_BaseParser):
    r"""Reasoning disabled: the generation is the answer, reasoning is empty.

    With ``enable_thinking=False`` Qwen's template pre-fills an empty
    ``<think>\n\n</think>\n\n`` block, so generation is the answer. If a
    model still emits a think block it is removed from the response
    entirely (markers and content): the caller asked for no reasoning, and
    showing it as the answer would be wrong. The removed content is still
    counted in ``reasoning_tokens`` (it was generated), the ``reasoning``
    text stays empty, and a block that never closed sets ``truncated``.
    Native reasoning from the engine is discarded the same way.
    """

    name = "direct"

    def __init__(
        self, vocabulary: TokenVocabulary | None = None, *, think_markers: bool = True
    ) -> None:
        """Create the parser.

        Args:
            vocabulary: The tokenizer's vocabulary, or ``None``.
            think_markers: Whether the model's format has think blocks to
                remove. ``False`` (a model without a reasoning format) makes
                this a passthrough that reports the ``direct`` name.

        Raises:
            ReasoningError: ``vocabulary`` is not a TokenVocabulary.
        """
        super().__init__(vocabulary)
        self.think_markers = think_markers

    def parse(
        self,
        token_ids: Sequence[int],
        text: str | None,
        *,
        native_reasoning: str | None = None,
        prompt_opened_reasoning: bool = False,
    ) -> ReasoningResult:
        """Return the answer with any think block removed; reasoning is empty.

        Args:
            token_ids: Every generated token id.
            text: The decoded generated text, or ``None`` to decode the ids.
            native_reasoning: Discarded (its tokens are counted when the
                boundary ids are known).
            prompt_opened_reasoning: The prompt ended with an open ``<think>``.

        Returns:
            The result with empty ``reasoning``.

        Raises:
            ReasoningError: Malformed ids or text, or nothing to decode from.
        """
        ids = self._ids(token_ids)
        if not self.think_markers:
            passthrough = PassthroughParser(self.vocabulary).parse(ids, text)
            return replace(passthrough, parser=self.name)
        split = self._split_ids(ids, prompt_opened_reasoning)
        if split is not None:
            response = (
                self._text(ids, text)
                if native_reasoning is not None and text is not None
                else self._decode(split.response_ids)
            )
            return ReasoningResult(
                response=response.strip(),
                reasoning="",
                reasoning_tokens=len(split.reasoning_ids),
                output_tokens=len(ids),
                parser=self.name,
                truncated=split.truncated,
                response_tokens=len(split.response_ids),
                marker_tokens=split.marker_tokens,
                special_tokens=split.special_tokens,
            )
        if native_reasoning is not None:
            response = "" if text is None else self._text(ids, text)
            return self._estimated(
                ids,
                reasoning=native_reasoning,
                response=response,
                marker_chars=0,
                truncated=False,
                reasoning_text="",
            )
        text_split = split_text(self._text(ids, text), prompt_opened=prompt_opened_reasoning)
        return self._estimated(
            ids,
            reasoning=text_split.reasoning,
            response=text_split.response,
            marker_chars=text_split.marker_chars,
            truncated=text_split.truncated,
            reasoning_text="",
        )
