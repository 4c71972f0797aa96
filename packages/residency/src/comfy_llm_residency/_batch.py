"""Several requests under one admission and one load: the manager's batch path.

Order of one batch (the manager admits and loads first, as for one request):
one :class:`TokenRelay` per item (its own time to first token and decode
rate) behind a :class:`BatchRelay`, which reports GENERATE events for the
whole batch and hands the caller (item index, token id, text) -> the
backend's ``generate_batch`` when it is a :class:`BatchBackend` that accepts
the items, else its ``generate`` item by item -> reasoning split and schema
check per item, the failing items generated once more together -> per-item
metadata with the batch's facts (``batched``, ``batch_size``, ``batch_index``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from comfy_llm_core import ProgressCallback, ProgressEvent, ProgressStage, ignore_progress

from ._answer import Answer, answer_items
from ._generation import STEP_EVENT_SECONDS, BatchTokenCallback, TokenRelay, prefill_event
from ._metadata import RequestFacts, build_metadata
from ._result import InferenceResult
from ._run_metadata import BatchFacts
from .backend import Backend, BackendResult, BatchBackend, BatchItem, refuse_unaccepted

if TYPE_CHECKING:
    from comfy_llm_profiles import ModelProfile

__all__ = ["BatchRelay", "batch_results", "generate_batch_answers"]


@dataclasses.dataclass(slots=True)
class BatchRelay:
    """The batch's :class:`~comfy_llm_residency.backend.BatchTokenSink`.

    Per-item timings (one :class:`TokenRelay` each), one GENERATE stream for
    the whole batch, and the caller's hook.

    Attributes:
        relays: One relay per item (timings only: no progress, no callback).
        progress: Receives GENERATE events counting the batch's tokens.
        on_token: The caller's callback, with the item index first, or None.
        clock: Monotonic clock in seconds.
        count: Tokens seen so far, every item together.
        budget: Every item's token budget together (the bar's maximum).
    """

    relays: list[TokenRelay]
    progress: ProgressCallback
    on_token: BatchTokenCallback | None
    clock: Callable[[], float]
    count: int = 0
    budget: int = 0
    last_event_at: float | None = None

    @classmethod
    def for_items(
        cls,
        items: Sequence[BatchItem],
        progress: ProgressCallback,
        on_token: BatchTokenCallback | None,
        clock: Callable[[], float],
    ) -> BatchRelay:
        """One timing relay per item, started now."""
        relays = [
            TokenRelay(item.settings.max_new_tokens, ignore_progress, None, clock) for item in items
        ]
        for relay in relays:
            relay.start()
        budget = sum(relay.max_new_tokens for relay in relays)
        return cls(relays, progress, on_token, clock, budget=budget)

    @property
    def started(self) -> float:
        """When the batch started, by ``clock``."""
        return self.relays[0].started

    def token(self, index: int, token_id: int, text: str) -> None:
        """Record item ``index``'s token, report the batch's progress, call the caller."""
        self.relays[index].token(token_id, text)
        self.count += 1
        budget = self.budget
        self.progress(
            ProgressEvent(
                stage=ProgressStage.GENERATE,
                message=f"Generating {len(self.relays)} answers: {self.count}/{budget} tokens",
                value=float(min(self.count, budget)),
                maximum=float(budget),
                unit="tokens",
                elapsed_seconds=max(0.0, self.clock() - self.started),
                token_id=int(token_id),
            )
        )
        if self.on_token is not None:
            self.on_token(index, token_id, text)

    def step(self, index: int, token_ids: Sequence[int], text: str) -> None:
        """Item ``index``'s tokens of one drain at once (see :meth:`TokenRelay.step`).

        The batch's GENERATE event comes at most once per ``STEP_EVENT_SECONDS``
        (the first token's always); the caller's callback once per token.
        """
        if not token_ids:
            return
        self.relays[index].step(token_ids, text)
        self.count += len(token_ids)
        now = self.clock()
        last = self.last_event_at
        if last is None or now - last >= STEP_EVENT_SECONDS:
            self.last_event_at = now
            budget = self.budget
            self.progress(
                ProgressEvent(
                    stage=ProgressStage.GENERATE,
                    message=f"Generating {len(self.relays)} answers: {self.count}/{budget} tokens",
                    value=float(min(self.count, budget)),
                    maximum=float(budget),
                    unit="tokens",
                    elapsed_seconds=max(0.0, now - self.started),
                    token_id=int(token_ids[-1]),
                )
            )
        if self.on_token is not None:
            for token_id in token_ids:
                self.on_token(index, token_id, text)

    def wait(self) -> None:
        """No token of any item yet: an indeterminate GENERATE event (the host's Cancel check)."""
        self.progress(prefill_event(self.started, self.clock()))

    def item(self, index: int) -> _ItemSink:
        """The token sink of one item (the one-at-a-time path)."""
        return _ItemSink(self, index)


@dataclasses.dataclass(frozen=True, slots=True)
class _ItemSink:
    """One item of the batch relay as a single-request backend sees it."""

    relay: BatchRelay
    index: int

    def prompt_opened(self, opened: bool) -> None:
        self.relay.relays[self.index].prompt_opened(opened)

    def token(self, token_id: int, text: str) -> None:
        self.relay.token(self.index, token_id, text)

    def step(self, token_ids: Sequence[int], text: str) -> None:
        self.relay.step(self.index, token_ids, text)

    def wait(self) -> None:
        self.relay.wait()


@dataclasses.dataclass(frozen=True, slots=True)
class _Positioned:
    """The batch relay as one chunk's backend sees it: chunk index -> batch position."""

    relay: BatchRelay
    positions: Sequence[int]

    def token(self, index: int, token_id: int, text: str) -> None:
        self.relay.token(self.positions[index], token_id, text)

    def step(self, index: int, token_ids: Sequence[int], text: str) -> None:
        self.relay.step(self.positions[index], token_ids, text)

    def wait(self) -> None:
        self.relay.wait()


def generate_batch_answers(
    profile: ModelProfile, backend: Backend, items: Sequence[BatchItem], relay: BatchRelay
) -> list[Answer]:
    """Generate (and validate, and retry) every item; see the module docstring."""
    for item in items:
        refuse_unaccepted(backend, item.inputs, profile.backend)

    def generate(chunk: Sequence[BatchItem], indices: Sequence[int]) -> list[BackendResult]:
        positions = list(indices)
        batcher = backend if isinstance(backend, BatchBackend) else None
        if batcher is not None and len(chunk) > 1 and batcher.can_batch(chunk):
            for index in positions:
                relay.relays[index].next_generation()
            results = list(batcher.generate_batch(chunk, _Positioned(relay, positions)))
            if len(results) != len(chunk):
                raise RuntimeError(
                    f"{type(backend).__name__}.generate_batch returned {len(results)} results "
                    f"for {len(chunk)} items; a batch backend must return one per item"
                )
            return results
        results = []
        for item, index in zip(chunk, positions, strict=True):
            relay.relays[index].next_generation()
            results.append(backend.generate(item.inputs, item.settings, relay.item(index)))
        return results

    return answer_items(profile, backend, items, generate)


def batch_results(
    *,
    target: str,
    profile: ModelProfile,
    items: Sequence[BatchItem],
    answers: Sequence[Answer],
    relay: BatchRelay,
    batch_seconds: float,
    runtime: Mapping[str, object],
    facts: RequestFacts,
) -> list[InferenceResult]:
    """Each item's response, reasoning and metadata.

    The batch's load counts once, on item 0 (``cache_status`` cold there,
    warm after), so per-item load times add up to the real one.
    """
    results: list[InferenceResult] = []
    for index, (item, answer, item_relay) in enumerate(
        zip(items, answers, relay.relays, strict=True)
    ):
        item_facts = facts
        if index > 0 and facts.cache_status == "cold":
            item_facts = dataclasses.replace(
                facts, cache_status="warm", load_seconds=0.0, host_eviction_reason=None
            )
        finished = item_relay.timing.last_token_at
        measured = 0.0 if finished is None else max(0.0, finished - item_relay.started)
        metadata = build_metadata(
            target=target,
            profile=profile,
            inputs=item.inputs,
            settings=item.settings,
            result=answer.result,
            parsed=answer.parsed,
            relay=item_relay,
            measured_generation_seconds=measured,
            runtime=runtime,
            facts=item_facts,
        )
        metadata = metadata.replace(
            schema=answer.schema_facts(),
            batch=BatchFacts(
                batched=answer.result.batch_size > 1,
                batch_size=answer.result.batch_size,
                batch_index=index,
                batch_items=len(items),
                batch_seconds=round(batch_seconds, 4),
            ),
        )
        results.append(
            InferenceResult(
                response=answer.parsed.response,
                reasoning=answer.parsed.reasoning,
                metadata=metadata,
            )
        )
    return results
