"""The contract between the manager and the backends above it.

Backends (MLX-VLM, Transformers, vLLM) live in packages that depend on this
one; they implement :class:`Backend` and are created by a
:data:`BackendFactory` the caller passes to the manager. Nothing here knows
which engine it holds.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from comfy_llm_core import defaults
from comfy_llm_structured import ResponseSchema, parse_response_schema

from .errors import GenerationSettingsError

if TYPE_CHECKING:
    from comfy_llm_core import ProgressCallback
    from comfy_llm_inputs import PreparedInputs
    from comfy_llm_profiles import ModelProfile
    from comfy_llm_reasoning import TokenVocabulary

TokenCallback = Callable[[int, str], None]
"""Called once per generated token with (token id, decoded text so far).

It may raise to cancel generation (ComfyUI's interrupt exception); the
backend must let that exception propagate unchanged. The manager's callback
also has ``step(token_ids, text)`` (every token of one engine step at once:
one progress event, at most 20 per second) and ``wait()`` (no token yet: a
progress event, so the host can cancel a long prefill); step-wise engines
(vLLM) use them where present (``getattr``), others call it per token. It
also has ``reasoning_opened(opened)``: every backend reports, before the first
token, whether the rendered prompt opened a ``<think>`` block
(``report_prompt_opened``), so the live text is split as the final parse will.
"""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True, slots=True)
class GenerationSettings:
    """Sampling settings for one request.

    Attributes:
        max_new_tokens: Upper bound on generated tokens (reasoning included), >= 1.
        temperature: Sampling temperature, >= 0; 0 means greedy decoding.
        top_p: Nucleus sampling mass, in (0, 1].
        seed: Random seed, 0 to ``defaults.SEED_MAX``, for reproducible
            sampling; None for unseeded.
        enable_reasoning: Ask the model to think first and parse its reasoning
            out; when False a direct-response parser is used.
        response_schema: A JSON Schema (JSON text) the answer must satisfy, or
            None for free text. Checked here, before any model loads, and kept
            in canonical form; engines constrain decoding to it.
    """

    max_new_tokens: int = defaults.MAX_NEW_TOKENS
    temperature: float = defaults.TEMPERATURE
    top_p: float = defaults.TOP_P
    seed: int | None = None
    enable_reasoning: bool = True
    response_schema: str | None = None

    def __post_init__(self) -> None:
        """Validate every field.

        Raises:
            GenerationSettingsError: When a field has the wrong type or is out of range.
        """
        if not _is_int(self.max_new_tokens) or self.max_new_tokens < 1:
            raise GenerationSettingsError(
                "max_new_tokens",
                f"max_new_tokens must be a whole number >= 1, got {self.max_new_tokens!r}.",
            )
        if (
            not _is_number(self.temperature)
            or not math.isfinite(self.temperature)
            or self.temperature < 0
        ):
            raise GenerationSettingsError(
                "temperature",
                f"temperature must be a finite number >= 0 (0 = greedy), got {self.temperature!r}.",
            )
        if not _is_number(self.top_p) or not (0 < self.top_p <= 1):
            raise GenerationSettingsError(
                "top_p", f"top_p must be greater than 0 and at most 1, got {self.top_p!r}."
            )
        if self.seed is not None and (
            not _is_int(self.seed) or not 0 <= self.seed <= defaults.SEED_MAX
        ):
            raise GenerationSettingsError(
                "seed",
                f"seed must be a whole number from 0 to {defaults.SEED_MAX}, or unset for an "
                f"unseeded (random) run; got {self.seed!r}"
                + (
                    ", and a negative number is not a seed (-1 does not mean random here)."
                    if _is_int(self.seed) and self.seed < 0
                    else "."
                ),
            )
        if not isinstance(self.enable_reasoning, bool):
            raise GenerationSettingsError(
                "enable_reasoning",
                f"enable_reasoning must be True or False, got {self.enable_reasoning!r}.",
            )
        if isinstance(self.response_schema, str) and not self.response_schema.strip():
            object.__setattr__(self, "response_schema", None)
        if self.response_schema is not None:
            schema = parse_response_schema(self.response_schema)
            object.__setattr__(self, "response_schema", schema.text)

    @property
    def schema(self) -> ResponseSchema | None:
        """The checked response schema, or None for free text."""
        return None if self.response_schema is None else ResponseSchema(self.response_schema)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (for the remote wire and metadata)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GenerationSettings:
        """Build settings from :meth:`to_dict` output; unknown keys are ignored.

        Args:
            data: The mapping to read.

        Returns:
            The validated settings.

        Raises:
            GenerationSettingsError: When a value is out of range.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclasses.dataclass(frozen=True, slots=True)
class BackendTimings:
    """Timings a backend measured for one generation.

    Attributes:
        time_to_first_token_seconds: From the start of generation to the first
            token; None when no token was generated.
        generation_seconds: Wall time of the whole generation.
        tokens_per_second: Decode rate; None when it cannot be measured.
        prompt_tokens: Tokens in the prompt (text plus vision), when known.
    """

    time_to_first_token_seconds: float | None
    generation_seconds: float
    tokens_per_second: float | None
    prompt_tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BackendTimings:
        """Rebuild timings from :meth:`to_dict` output; unknown keys are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclasses.dataclass(frozen=True, slots=True)
class BackendResult:
    """What a backend returns from one generation.

    Reasoning boundary tokens stay in ``token_ids`` and ``text``: the
    manager's reasoning parser removes them.

    Attributes:
        token_ids: Every generated token id, in order.
        text: The decoded generated text (special tokens kept where the
            parser needs them).
        native_reasoning: Reasoning the engine already separated (e.g. vLLM's
            reasoning parser), or None.
        timings: The backend's own timings.
        prompt_opened_reasoning: True when the chat template already opened
            the reasoning block in the prompt (generation starts inside it).
        finish_reason: ``"stop"``, ``"length"``, ``"abort"``, ...
        constrained: True when the engine constrained decoding to the
            request's response schema.
        batch_size: Requests the engine generated together with this one,
            itself included (1 for a request generated alone).
    """

    token_ids: tuple[int, ...]
    text: str
    native_reasoning: str | None
    timings: BackendTimings
    prompt_opened_reasoning: bool = False
    finish_reason: str = "stop"
    constrained: bool = False
    batch_size: int = 1

    def __post_init__(self) -> None:
        """Store ``token_ids`` as a tuple of ints whatever sequence was given."""
        object.__setattr__(self, "token_ids", tuple(int(t) for t in self.token_ids))

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (token ids as a list, timings nested)."""
        data = dataclasses.asdict(self)
        data["token_ids"] = list(self.token_ids)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BackendResult:
        """Rebuild a result from :meth:`to_dict` output; unknown keys are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        values["timings"] = BackendTimings.from_dict(values["timings"])
        return cls(**values)


@runtime_checkable
class Backend(Protocol):
    """A loaded model that can generate; created by a :data:`BackendFactory`."""

    def generate(
        self, inputs: PreparedInputs, settings: GenerationSettings, on_token: TokenCallback
    ) -> BackendResult:
        """Generate a response, calling ``on_token`` after every token.

        Args:
            inputs: Engine-neutral prompt, images and video frames.
            settings: Sampling settings.
            on_token: Per-token callback; it may raise to cancel.

        Returns:
            The generated token ids, text and timings.

        Raises:
            Exception: Whatever ``on_token`` raised, unchanged.
        """
        ...

    def unload(self) -> None:
        """Free the model's memory and clear the engine's caches."""
        ...

    def runtime_metadata(self) -> dict[str, object]:
        """Return JSON-ready facts about the engine: device, dtype, version, ..."""
        ...

    @property
    def vocabulary(self) -> TokenVocabulary | None:
        """The token vocabulary the reasoning parser uses, or None."""
        ...


BatchTokenCallback = Callable[[int, int, str], None]
"""Called once per generated token of a batch with (item index, token id, that
item's text so far). It may raise to cancel the whole batch; the backend aborts
every outstanding item and lets the exception propagate unchanged."""


@dataclasses.dataclass(frozen=True, slots=True)
class BatchItem:
    """One request of a batch: its inputs and its own settings (seed included).

    Attributes:
        inputs: Engine-neutral prompt, images and video frames.
        settings: Sampling settings for this item alone.
    """

    inputs: PreparedInputs
    settings: GenerationSettings


@runtime_checkable
class BatchBackend(Protocol):
    """The optional batch side of a :class:`Backend`.

    A backend that also has these two methods generates several requests
    together; one without them is served one request at a time by the
    manager (``ResidentModelManager.run_batch`` detects them with
    ``isinstance``). Either way every item's answer must equal what
    ``generate`` gives for that item alone.
    """

    def can_batch(self, items: Sequence[BatchItem]) -> bool:
        """Whether :meth:`generate_batch` can serve these items with single-run results."""
        ...

    def generate_batch(
        self, items: Sequence[BatchItem], on_token: BatchTokenCallback
    ) -> list[BackendResult]:
        """Generate every item together; results in the items' order.

        Raises:
            Exception: Whatever ``on_token`` raised, unchanged, after every
                outstanding item was stopped.
        """
        ...


BackendFactory = Callable[["ModelProfile", Path, "ProgressCallback"], Backend]
"""Loads a backend from (profile, completed snapshot path, progress callback)."""


@dataclasses.dataclass(frozen=True, slots=True)
class InferenceResult:
    """The outcome of one request.

    Attributes:
        response: The answer with reasoning removed.
        reasoning: The reasoning text, empty when none.
        metadata: JSON-ready telemetry (see the package README).
    """

    response: str
    reasoning: str
    metadata: dict[str, object]

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"response", "reasoning", "metadata"}`` (JSON-ready)."""
        return {"response": self.response, "reasoning": self.reasoning, "metadata": self.metadata}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> InferenceResult:
        """Rebuild a result from :meth:`to_dict` output (e.g. sent back by a remote worker)."""
        return cls(
            response=str(data["response"]),
            reasoning=str(data["reasoning"]),
            metadata=dict(data["metadata"]),
        )
