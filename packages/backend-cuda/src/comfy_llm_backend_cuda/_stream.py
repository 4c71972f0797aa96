"""Per-token streaming out of ``model.generate``.

Transformers calls ``streamer.put(ids)`` synchronously from inside its decode
loop: first once with the whole prompt, then once per step with the new
token. :class:`TokenStreamer` skips the prompt, records every generated id
with its time, keeps the decoded text up to date incrementally and calls the
request's ``on_token(token_id, text_so_far)``. Whatever ``on_token`` raises
(ComfyUI's interrupt exception, say) leaves ``put`` unchanged and so unwinds
``generate`` right after the current step: no further token is computed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["IncrementalDecoder", "NativeStreamDecoder", "TokenStreamer", "stream_decoder"]

_REPLACEMENT = "\ufffd"


class IncrementalDecoder:
    """Decode a growing id sequence without re-decoding all of it each token.

    Uses a sliding window (prefix/read offsets): the text a new token adds is
    ``decode(window + new)`` minus ``decode(window)``, so tokenizers that strip
    a leading space or merge bytes across tokens still come out right. Text
    ending in an incomplete UTF-8 sequence (U+FFFD) is held back until the
    next token completes it.

    Attributes:
        text: The text decoded so far (special tokens skipped).
        ids: Every id seen so far.
    """

    def __init__(self, decode: Callable[[Sequence[int]], str]) -> None:
        """Create an empty decoder.

        Args:
            decode: Turns ids into text, skipping special tokens.
        """
        self._decode = decode
        self.ids: list[int] = []
        self.text = ""
        self._prefix = 0
        self._read = 0

    def push(self, token_id: int) -> str:
        """Add one id and return the whole text so far.

        Args:
            token_id: The generated id.

        Returns:
            :attr:`text` after this token.
        """
        self.ids.append(token_id)
        before = self._decode(self.ids[self._prefix : self._read])
        after = self._decode(self.ids[self._prefix :])
        if len(after) > len(before) and not after.endswith(_REPLACEMENT):
            self.text += after[len(before) :]
            self._prefix = self._read
            self._read = len(self.ids)
        return self.text


class NativeStreamDecoder:
    """The tokenizers library's own incremental decoder (``DecodeStream``), in Rust.

    Same contract as :class:`IncrementalDecoder` (text held back while it ends
    in an incomplete UTF-8 sequence, special tokens skipped) at about a tenth
    of its cost per token: one native call instead of two full decodes of the
    window, which matters when an engine's step takes a millisecond or two.

    Attributes:
        text: The text decoded so far (special tokens skipped).
        ids: Every id seen so far.
    """

    def __init__(self, tokenizer: Any, stream: Any) -> None:
        """Wrap a ``tokenizers.Tokenizer`` and a fresh ``DecodeStream``."""
        self._tokenizer = tokenizer
        self._stream = stream
        self.ids: list[int] = []
        self.text = ""

    def push(self, token_id: int) -> str:
        """Add one id and return the whole text so far."""
        self.ids.append(token_id)
        chunk = self._stream.step(self._tokenizer, token_id)
        if chunk:
            self.text += chunk
        return self.text


def stream_decoder(
    tokenizer: Any, decode: Callable[[Sequence[int]], str]
) -> IncrementalDecoder | NativeStreamDecoder:
    """The cheapest decoder that yields the same text as ``decode`` for this tokenizer.

    The native one needs a fast tokenizer whose ``decode`` does no clean-up of
    tokenization spaces (the Rust stream knows nothing of that Python step);
    anything else keeps the sliding window over ``decode``.

    Args:
        tokenizer: A Transformers tokenizer (or processor's tokenizer).
        decode: Turns ids into text, skipping special tokens (the fallback).
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or getattr(tokenizer, "clean_up_tokenization_spaces", False):
        return IncrementalDecoder(decode)
    try:
        from tokenizers.decoders import DecodeStream
    except ImportError:  # tokenizers older than 0.21
        return IncrementalDecoder(decode)
    return NativeStreamDecoder(backend, DecodeStream(skip_special_tokens=True))


class TokenStreamer:
    """A Transformers ``streamer`` that forwards every generated token.

    Attributes:
        token_ids: Generated ids, in order (boundary and special tokens kept).
        started: ``time.perf_counter()`` when the request started (the
            generation's wall time counts from here; the token sink measures
            the time to first token and the decode rate).
    """

    def __init__(
        self,
        decode: Callable[[Sequence[int]], str],
        on_token: Callable[[int, str], None],
        *,
        clock: Callable[[], float] = time.perf_counter,
        started: float | None = None,
        tokenizer: Any = None,
    ) -> None:
        """Create a streamer for one generation.

        Args:
            decode: Turns ids into text, skipping special tokens.
            on_token: Called with (token id, text so far) after every token;
                may raise to stop generation.
            clock: Monotonic clock in seconds (tests pass a fake one).
            started: When the request started on ``clock``; None means now.
            tokenizer: The tokenizer behind ``decode``: its native stream
                decoder is used when it gives the same text (:func:`stream_decoder`).
        """
        self._decoder = (
            IncrementalDecoder(decode) if tokenizer is None else stream_decoder(tokenizer, decode)
        )
        self._on_token = on_token
        self._prompt_seen = False
        self.token_ids: list[int] = []
        self.started = clock() if started is None else started

    @property
    def text(self) -> str:
        """The generated text so far, special tokens skipped."""
        return self._decoder.text

    def put(self, value: Any) -> None:
        """Receive ids from ``generate``: the prompt first, then each new token.

        Args:
            value: A tensor (or nested sequence) of ids, batch of one.

        Raises:
            Exception: Whatever ``on_token`` raised, unchanged.
        """
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        for token_id in _flatten(value):
            self.token_ids.append(token_id)
            self._on_token(token_id, self._decoder.push(token_id))

    def end(self) -> None:
        """Called by ``generate`` when it finishes; nothing to flush."""


def _flatten(value: Any) -> list[int]:
    """Turn a tensor or nested sequence of ids into a flat list of ints."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, int):
        return [value]
    flat: list[int] = []
    for item in value:
        flat.extend(_flatten(item))
    return flat
