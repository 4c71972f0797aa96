"""Token sinks that record what a backend reported, for tests that drive a backend directly.

The manager hands a backend its own sink (``comfy_llm_residency``'s
``TokenRelay``); a test that calls ``backend.generate`` itself passes one of
these (``comfy_llm_residency.backend.TokenSink`` / ``BatchTokenSink``), and
can make it raise after a number of tokens, as ComfyUI's Cancel would.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["RecordingBatchSink", "RecordingSink"]


class RecordingSink:
    """A ``TokenSink`` that records every call; raises ``error`` at token ``stop_after``.

    Attributes:
        calls: (token id, text so far) per token, steps spread token by token.
        steps: The token ids of each ``step`` call.
        opened: What ``prompt_opened`` reported (None: never called).
        waits: How many times ``wait`` was called.
    """

    def __init__(self, stop_after: int | None = None, error: BaseException | None = None) -> None:
        self.calls: list[tuple[int, str]] = []
        self.steps: list[list[int]] = []
        self.opened: bool | None = None
        self.waits = 0
        self.stop_after = stop_after
        self.error = error

    def prompt_opened(self, opened: bool) -> None:
        """Record the prompt's reasoning state (before the first token)."""
        assert not self.calls, "prompt_opened came after a token"
        self.opened = opened

    def token(self, token_id: int, text: str) -> None:
        """Record one token; raise ``error`` once ``stop_after`` tokens came."""
        self.calls.append((int(token_id), text))
        if self.stop_after is not None and len(self.calls) >= self.stop_after:
            assert self.error is not None
            raise self.error

    def step(self, token_ids: Sequence[int], text: str) -> None:
        """Record one engine step, then each of its tokens."""
        self.steps.append([int(t) for t in token_ids])
        for token_id in token_ids:
            self.token(token_id, text)

    def wait(self) -> None:
        """Count a wait."""
        self.waits += 1

    @property
    def token_ids(self) -> list[int]:
        """Every token id reported, in order."""
        return [token_id for token_id, _ in self.calls]


class RecordingBatchSink:
    """A ``BatchTokenSink`` recording (index, token id, text); raises as :class:`RecordingSink`."""

    def __init__(self, stop_after: int | None = None, error: BaseException | None = None) -> None:
        self.calls: list[tuple[int, int, str]] = []
        self.waits = 0
        self.stop_after = stop_after
        self.error = error

    def token(self, index: int, token_id: int, text: str) -> None:
        """Record one token of item ``index``; raise ``error`` at ``stop_after`` tokens."""
        self.calls.append((index, int(token_id), text))
        if self.stop_after is not None and len(self.calls) >= self.stop_after:
            assert self.error is not None
            raise self.error

    def step(self, index: int, token_ids: Sequence[int], text: str) -> None:
        """Record each token of one engine step of item ``index``."""
        for token_id in token_ids:
            self.token(index, token_id, text)

    def wait(self) -> None:
        """Count a wait."""
        self.waits += 1

    def tokens(self, index: int) -> list[int]:
        """Item ``index``'s token ids, in order."""
        return [token_id for item, token_id, _ in self.calls if item == index]
