"""Transformers batches: one ``generate`` over prompts of equal shape, greedy decoding only.

A batch must answer each image exactly as a single run does. Batched
sampling draws every row from one random stream, so an image would not get
the tokens its seed gives alone; left padding shifts what a row attends to
(and the linear-attention layers of Qwen3.5 carry padding through their
state). So a batch is generated together only where identity holds: greedy
decoding (temperature 0), no response schema (its mask follows one row), and
prompts whose tensors have the same shapes (no padding at all), which an
IMAGE batch of one size always gives. Items are grouped by shape and budget;
a group of one takes the single path. Sampled or schema requests are
declined (:func:`batchable`) and the manager loops them. A group that runs
out of CUDA memory before its first token runs again in halves
(``_memory_fit``); the later groups of the call start at the size that fit.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from comfy_llm_residency.backend import BackendResult, BatchItem, BatchTokenSink, GenerationSettings

from .._stream import IncrementalDecoder
from ._generate import GenerationRun, build_generation_config, eos_ids
from ._memory_fit import OutOfMemory, attempt, out_of_memory_error

if TYPE_CHECKING:
    from comfy_llm_inputs import PreparedInputs
    from comfy_llm_profiles import ModelProfile

__all__ = [
    "GroupedBackend",
    "RowStreamer",
    "batchable",
    "generate_groups",
    "group_key",
    "run_generate_rows",
]

logger = logging.getLogger(__name__)


class GroupedBackend(Protocol):
    """What :func:`generate_groups` uses of the Transformers backend (it imports this module)."""

    profile: ModelProfile
    _torch: Any
    _model: Any

    def _encode(self, inputs: PreparedInputs, settings: GenerationSettings) -> tuple[Any, int]: ...

    def _decode(self, ids: Any) -> str: ...

    def _result(
        self, run: Any, encoded: Any, *, constrained: bool = False, together: int = 1
    ) -> BackendResult: ...


def batchable(items: Sequence[BatchItem]) -> bool:
    """Whether batching these items keeps every answer identical to its single run."""
    return all(i.settings.temperature == 0 and i.settings.schema is None for i in items)


def group_key(tensors: Mapping[str, Any], budget: int, settings: GenerationSettings) -> object:
    """Items with equal keys stack into one batch without padding."""
    shapes = []
    for name, value in sorted(tensors.items()):
        shape = getattr(value, "shape", None)
        if shape is None:
            return object()  # a value that cannot be stacked: a group of its own
        shapes.append((name, tuple(shape)))
    return (tuple(shapes), budget, settings.enable_reasoning)


class RowStreamer:
    """A Transformers ``streamer`` for a batch: each row's tokens until its end token.

    ``generate`` keeps stepping a finished row (it pads it); those steps are
    not the row's tokens and are dropped here.
    """

    def __init__(
        self,
        rows: int,
        decode: Callable[[Sequence[int]], str],
        on_token: Callable[[int, int, str], None],
        ends: frozenset[int],
    ) -> None:
        """Create a streamer for ``rows`` prompts (the row index goes to ``on_token``)."""
        self._decoders = [IncrementalDecoder(decode) for _ in range(rows)]
        self._on_token = on_token
        self._ends = ends
        self._prompt_seen = False
        self.done = [False] * rows
        self.times: list[list[float]] = [[] for _ in range(rows)]

    def ids(self, row: int) -> tuple[int, ...]:
        """The row's generated ids, its end token included."""
        return tuple(self._decoders[row].ids)

    def put(self, value: Any) -> None:
        """Receive the prompt (skipped), then one id per row per step."""
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        for row, token_id in enumerate(value.tolist()):
            if self.done[row]:
                continue
            self.times[row].append(time.perf_counter())
            text = self._decoders[row].push(int(token_id))
            if token_id in self._ends:
                self.done[row] = True
            self._on_token(row, int(token_id), text)

    def end(self) -> None:
        """Called by ``generate`` when it finishes; nothing to flush."""


def run_generate_rows(
    torch: ModuleType,
    model: Any,
    rows: Sequence[Mapping[str, Any]],
    *,
    settings: GenerationSettings,
    max_new_tokens: int,
    decode: Callable[[Sequence[int]], str],
    on_token: Callable[[int, int, str], None],
    started: float,
) -> list[GenerationRun]:
    """Stack same-shape prompts and run one greedy ``generate`` over them.

    Returns:
        One run per row, in order; timings count from ``started``.

    Raises:
        Exception: Whatever ``on_token`` raised, unchanged (generation stops there).
    """
    device = model.device
    stacked: dict[str, Any] = {}
    for name in rows[0]:
        value = torch.cat([row[name] for row in rows], dim=0).to(device)
        if name == "pixel_values" and value.is_floating_point():
            value = value.to(model.dtype)
        stacked[name] = value
    config = build_generation_config(model.generation_config, settings, max_new_tokens)
    ends = eos_ids(config)
    streamer = RowStreamer(len(rows), decode, on_token, ends)
    with torch.inference_mode():
        model.generate(**stacked, generation_config=config, streamer=streamer)
    runs = []
    for row in range(len(rows)):
        ids, times = streamer.ids(row), streamer.times[row]
        stopped = bool(ids) and ids[-1] in ends
        runs.append(
            GenerationRun(
                token_ids=ids,
                generation_seconds=(times[-1] if times else time.perf_counter()) - started,
                finish_reason="stop" if stopped or len(ids) < max_new_tokens else "length",
            )
        )
    return runs


def _run_rows(
    backend: GroupedBackend,
    rows: Sequence[int],
    encoded: Sequence[tuple[Any, int]],
    items: Sequence[BatchItem],
    *,
    sink: BatchTokenSink,
    started: float,
) -> list[GenerationRun] | None:
    """One ``generate`` over ``rows``; None when it ran out of memory and halves may fit.

    Raises:
        GenerationOutOfMemoryError: Out of memory with one row, or after tokens streamed.
    """
    streamed = False

    def row_token(row: int, token_id: int, text: str) -> None:
        nonlocal streamed
        streamed = True
        sink.token(rows[row], token_id, text)

    def run() -> list[GenerationRun]:
        return run_generate_rows(
            backend._torch,
            backend._model,
            [encoded[index][0].tensors for index in rows],
            settings=items[rows[0]].settings,
            max_new_tokens=encoded[rows[0]][1],
            decode=backend._decode,
            on_token=row_token,
            started=started,
        )

    runs = attempt(backend._torch, run)
    if not isinstance(runs, OutOfMemory):
        return runs
    if streamed or len(rows) == 1:
        raise out_of_memory_error(
            backend._torch,
            backend.profile.profile_id,
            len(rows),
            after_tokens=streamed,
            failed=runs,
        )
    return None


def generate_groups(
    backend: GroupedBackend, items: Sequence[BatchItem], sink: BatchTokenSink
) -> list[BackendResult]:
    """Encode every item, group them (:func:`group_key`), one ``generate`` per group.

    A group that does not fit in memory is generated in halves (module docstring).

    Raises:
        GenerationOutOfMemoryError: Even one prompt did not fit.
    """
    started = time.perf_counter()
    encoded = [backend._encode(item.inputs, item.settings) for item in items]
    groups: dict[object, list[int]] = {}
    for index, ((prompt, budget), item) in enumerate(zip(encoded, items, strict=True)):
        groups.setdefault(group_key(prompt.tensors, budget, item.settings), []).append(index)
    results: dict[int, BackendResult] = {}
    fits = len(items)  # the most rows run at once: halved when memory runs out
    for members in groups.values():
        pending = [members[at : at + fits] for at in range(0, len(members), fits)]
        while pending:
            rows = pending.pop(0)
            runs = _run_rows(backend, rows, encoded, items, sink=sink, started=started)
            if runs is None:
                half = (len(rows) + 1) // 2
                fits = min(fits, half)
                logger.warning(
                    "CUDA ran out of memory for %d prompts at once; running %d at a time",
                    len(rows),
                    half,
                )
                pending[:0] = [rows[:half], rows[half:]]
                continue
            for index, run in zip(rows, runs, strict=True):
                results[index] = backend._result(run, encoded[index][0], together=len(rows))
    return [results[index] for index in range(len(items))]
