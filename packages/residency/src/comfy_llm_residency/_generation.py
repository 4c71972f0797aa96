"""Per-token progress during generation, and the reasoning parse after it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

from comfy_llm_core import ProgressCallback, ProgressEvent, ProgressStage
from comfy_llm_reasoning import parser_for_profile

if TYPE_CHECKING:
    from comfy_llm_profiles import ModelProfile
    from comfy_llm_reasoning import ReasoningResult

    from ._run_metadata import RunMetadata
    from .backend import Backend, BackendResult, GenerationSettings


#: Shortest time between two GENERATE events with tokens (at most 20 per second).
STEP_EVENT_SECONDS: Final = 0.05


def prefill_event(started: float, now: float) -> ProgressEvent:
    """The indeterminate GENERATE event while the engine reads the prompt (no token yet)."""
    return ProgressEvent(
        stage=ProgressStage.GENERATE,
        message="Reading the prompt",
        indeterminate=True,
        elapsed_seconds=max(0.0, now - started),
    )


TokenCallback = Callable[[int, str], None]
"""A caller's own per-token hook (``run(..., on_token=)``): (token id, decoded text so far).

It may raise to cancel generation (ComfyUI's interrupt exception); the
exception propagates unchanged. The manager calls it from its
:class:`TokenRelay`, once per token, whatever the engine's step size.
"""

BatchTokenCallback = Callable[[int, int, str], None]
"""A caller's per-token hook for a batch (``run_batch(..., on_token=)``): (item
index, token id, that item's text so far). It may raise to cancel the whole batch."""


@dataclasses.dataclass(slots=True)
class DecodeTiming:
    """When one generation's tokens came: where time to first token and decode rate are measured.

    Attributes:
        started: When the generation started (the backend was called), by the relay's clock.
        tokens: Tokens seen so far.
        first_token_at: When the first token came.
        last_token_at: When the latest token came.
    """

    started: float
    tokens: int = 0
    first_token_at: float | None = None
    last_token_at: float | None = None

    def record(self, now: float, count: int) -> None:
        """``count`` tokens came at ``now``."""
        self.tokens += count
        if self.first_token_at is None:
            self.first_token_at = now
        self.last_token_at = now

    @property
    def time_to_first_token_seconds(self) -> float | None:
        """Seconds from the start to the first token, or None before it."""
        if self.first_token_at is None:
            return None
        return max(0.0, self.first_token_at - self.started)

    @property
    def tokens_per_second(self) -> float | None:
        """Decode rate after the first token, or None before two tokens."""
        if self.first_token_at is None or self.last_token_at is None or self.tokens < 2:
            return None
        span = self.last_token_at - self.first_token_at
        return (self.tokens - 1) / span if span > 0 else None


@dataclasses.dataclass(slots=True)
class TokenRelay:
    """The :class:`~comfy_llm_residency.backend.TokenSink` the manager hands a backend.

    For every token it emits a GENERATE progress event (tokens so far of
    ``max_new_tokens``, the text so far, time to first token and decode rate
    once known), then calls the caller's own token callback. Either may raise
    to cancel; the exception propagates unchanged through the backend. Its
    :attr:`timing` is the one measurement of time to first token and decode
    rate the request's metadata reports.

    Attributes:
        max_new_tokens: The request's token budget (the bar's maximum).
        progress: Receives GENERATE events.
        on_token: The caller's token callback, or None.
        clock: Monotonic clock in seconds.
        started: When the request's generation started, by ``clock``.
        count: Tokens seen so far, every generation of the request together
            (a schema retry generates again).
        timing: The current generation's token times.
        last_event_at: When the last GENERATE event with a token went out.
        opened: The backend's :meth:`prompt_opened` report, or None.
    """

    max_new_tokens: int
    progress: ProgressCallback
    on_token: TokenCallback | None
    clock: Callable[[], float]
    started: float = 0.0
    count: int = 0
    timing: DecodeTiming = dataclasses.field(default_factory=lambda: DecodeTiming(0.0))
    last_event_at: float | None = None
    opened: bool | None = None

    def start(self) -> None:
        """Mark the start of the request's generation."""
        self.started = self.clock()
        self.timing = DecodeTiming(self.started)

    def next_generation(self) -> None:
        """A new generation of the same request begins (its token times start afresh)."""
        self.timing = DecodeTiming(self.clock())

    def prompt_opened(self, opened: bool) -> None:
        """The backend's report, before its first token, of the rendered prompt.

        ``opened``: the chat template ended the prompt inside a ``<think>``
        block (the value its ``BackendResult.prompt_opened_reasoning`` will
        carry). Every later GENERATE event carries it, so a live view splits
        the text so far as the final reasoning parse will.
        """
        self.opened = bool(opened)

    def token(self, token_id: int, text: str) -> None:
        """Record one token, report progress when due, then call the caller's callback.

        The GENERATE event follows :meth:`step`'s rule: the first token's at
        once, then at most one per :data:`STEP_EVENT_SECONDS`. A token-wise
        engine on a small model makes thousands of tokens a second, and an
        event per token (a dataclass, the host's bar and live-text logic) cost
        about as much as the engine's own step; every consumer shows or ships
        at most a few a second anyway (ComfyUI's bar 10, the node's live text
        4, the Modal wire coalesces). The caller's callback still runs once
        per token, so Cancel (the node's interrupt check) lands between any
        two tokens.

        Args:
            token_id: The token just generated.
            text: The decoded text so far.
        """
        now = self.clock()
        self.count += 1
        self.timing.record(now, 1)
        last = self.last_event_at
        if last is None or now - last >= STEP_EVENT_SECONDS:
            self.last_event_at = now
            self.progress(self._event(now, token_id, text))
        if self.on_token is not None:
            self.on_token(token_id, text)

    def _event(self, now: float, token_id: int, text: str) -> ProgressEvent:
        return ProgressEvent(
            stage=ProgressStage.GENERATE,
            message=f"Generating: {self.count}/{self.max_new_tokens} tokens",
            value=float(min(self.count, self.max_new_tokens)),
            maximum=float(self.max_new_tokens),
            unit="tokens",
            elapsed_seconds=max(0.0, now - self.started),
            time_to_first_token_seconds=self.timing.time_to_first_token_seconds,
            tokens_per_second=self.timing.tokens_per_second,
            text=text,
            token_id=int(token_id),
            prompt_opened_reasoning=self.opened,
        )

    def step(self, token_ids: Sequence[int], text: str) -> None:
        """Record every token an engine produced since the caller last woke, at once.

        For step-wise engines (vLLM): one GENERATE event for the whole drain
        (the host's Cancel check), at most one per :data:`STEP_EVENT_SECONDS`
        except the first token's, then the caller's callback once per token
        (its contract), each with the drain's text.
        """
        if not token_ids:
            return
        now = self.clock()
        self.count += len(token_ids)
        self.timing.record(now, len(token_ids))
        last = self.last_event_at
        if last is None or now - last >= STEP_EVENT_SECONDS:
            self.last_event_at = now
            self.progress(self._event(now, token_ids[-1], text))
        if self.on_token is not None:
            for token_id in token_ids:
                self.on_token(token_id, text)

    def wait(self) -> None:
        """No token yet: an indeterminate GENERATE event, so the host can cancel a long prefill."""
        self.progress(prefill_event(self.started, self.clock()))


def done_event(
    message: str,
    metadata: RunMetadata,
    *,
    tokens: int | None = None,
    seconds: float | None = None,
) -> ProgressEvent:
    """The DONE event of a request (or a batch: its token total and wall time)."""
    generation = metadata.generation
    count = generation.output_tokens if tokens is None else tokens
    return ProgressEvent(
        stage=ProgressStage.DONE,
        message=message,
        value=float(count),
        maximum=float(count),
        unit="tokens",
        elapsed_seconds=generation.generation_seconds if seconds is None else seconds,
        time_to_first_token_seconds=generation.time_to_first_token_seconds,
        tokens_per_second=generation.tokens_per_second,
    )


def parse_reasoning(
    profile: ModelProfile,
    backend: Backend,
    settings: GenerationSettings,
    result: BackendResult,
) -> ReasoningResult:
    """Split a backend result into response and reasoning with the profile's parser.

    Args:
        profile: The profile (its ``reasoning_parser`` and ``architecture``).
        backend: The backend that generated (its token vocabulary).
        settings: The request settings (``enable_reasoning``).
        result: The raw generation.

    Returns:
        The reasoning package's result (response, reasoning, token counts).

    Raises:
        comfy_llm_reasoning.ReasoningError: When the profile names an unknown
            parser or the token ids are malformed.
    """
    parser = parser_for_profile(
        profile.reasoning_parser,
        profile.architecture,
        enable_reasoning=settings.enable_reasoning,
        vocabulary=backend.vocabulary,
    )
    return parser.parse(
        result.token_ids,
        result.text,
        native_reasoning=result.native_reasoning,
        prompt_opened_reasoning=result.prompt_opened_reasoning,
    )
