"""The backend contract: what the manager hands an engine, and what it gets back.

Backends (MLX-VLM, Transformers, vLLM) live in packages that depend on this
one; they implement :class:`Backend` (and, to generate several requests
together, :class:`BatchBackend`) and are created by a :data:`BackendFactory`
the caller passes to the manager. A backend reports its tokens to a
:class:`TokenSink` it is given (the manager's measures time to first token
and decode rate there, once, for every engine) and returns a
:class:`BackendResult`. Nothing here knows which engine it holds.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from comfy_llm_core import Modality, defaults
from comfy_llm_structured import ResponseSchema, parse_response_schema

from .errors import GenerationSettingsError, UnsupportedInputError

__all__ = [
    "Backend",
    "BackendFactory",
    "BackendResult",
    "BackendTimings",
    "BatchBackend",
    "BatchItem",
    "BatchTokenSink",
    "GenerationSettings",
    "TokenSink",
    "refuse_unaccepted",
]

if TYPE_CHECKING:
    from comfy_llm_core import ProgressCallback
    from comfy_llm_inputs import PreparedInputs
    from comfy_llm_profiles import ModelProfile
    from comfy_llm_reasoning import TokenVocabulary


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
        min_new_tokens: Tokens generated before the stop token may end the
            answer (0: none); for benchmarks that measure a fixed length
            (vLLM ``min_tokens``, Transformers ``min_new_tokens``; the MLX
            backend refuses a non-zero value).
    """

    max_new_tokens: int = defaults.MAX_NEW_TOKENS
    temperature: float = defaults.TEMPERATURE
    top_p: float = defaults.TOP_P
    seed: int | None = None
    enable_reasoning: bool = True
    response_schema: str | None = None
    min_new_tokens: int = 0

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
        if not _is_int(self.min_new_tokens) or not 0 <= self.min_new_tokens <= self.max_new_tokens:
            raise GenerationSettingsError(
                "min_new_tokens",
                f"min_new_tokens must be a whole number from 0 to max_new_tokens "
                f"({self.max_new_tokens}), got {self.min_new_tokens!r}.",
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
        """Return a JSON-ready dict (for the remote wire and metadata).

        ``min_new_tokens`` appears only when set: a plain request keeps the
        form recorded before the field existed (wire and metadata goldens).
        """
        data = dataclasses.asdict(self)
        if not self.min_new_tokens:
            del data["min_new_tokens"]
        return data

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
    """What a backend measured of one generation (its tokens' times are the sink's).

    Attributes:
        generation_seconds: Wall time of the whole generation.
        prompt_tokens: Tokens in the prompt (text plus vision), when known.
    """

    generation_seconds: float
    prompt_tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BackendTimings:
        """Rebuild timings from :meth:`to_dict` output; unknown keys are ignored.

        (Results recorded before the sink measured the token times also carry
        ``time_to_first_token_seconds`` and ``tokens_per_second``.)
        """
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
        timings: The backend's wall time and prompt length.
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
class TokenSink(Protocol):
    """Where a backend reports one generation's tokens as they come.

    Every backend calls :meth:`prompt_opened` once, after rendering the prompt
    and before the first token, then hands over each token: one by one with
    :meth:`token`, or, step-wise engines (vLLM), every token of one engine
    step at once with :meth:`step`; while no token has come yet it may call
    :meth:`wait` now and then. Any of them may raise to cancel (ComfyUI's
    interrupt); the backend stops and lets that exception propagate
    unchanged. The manager's sink measures the time to first token and the
    decode rate from these calls: backends do not.
    """

    def prompt_opened(self, opened: bool) -> None:
        """Whether the rendered prompt ended inside an opened reasoning block.

        The same value the backend's ``BackendResult.prompt_opened_reasoning``
        will carry, so a live view splits the text as the final parse will.
        """
        ...

    def token(self, token_id: int, text: str) -> None:
        """One generated token and the decoded text so far."""
        ...

    def step(self, token_ids: Sequence[int], text: str) -> None:
        """Every token of one engine step, in order, and the decoded text after them."""
        ...

    def wait(self) -> None:
        """No new token yet (a long prefill): the host may cancel here."""
        ...


@runtime_checkable
class Backend(Protocol):
    """A loaded model that can generate; created by a :data:`BackendFactory`."""

    def generate(
        self, inputs: PreparedInputs, settings: GenerationSettings, sink: TokenSink
    ) -> BackendResult:
        """Generate a response, reporting every token to ``sink``.

        Args:
            inputs: Engine-neutral prompt, images and video frames.
            settings: Sampling settings.
            sink: Receives the prompt's reasoning state and every token; it
                may raise to cancel.

        Returns:
            The generated token ids, text and timings.

        Raises:
            Exception: Whatever ``sink`` raised, unchanged.
        """
        ...

    @property
    def modalities(self) -> frozenset[Modality]:
        """The kinds of input this engine takes; a request with another is refused."""
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


@runtime_checkable
class BatchTokenSink(Protocol):
    """Where a batch backend reports its items' tokens: :class:`TokenSink` with the item's index.

    Any call may raise to cancel the whole batch; the backend stops every
    outstanding item and lets the exception propagate unchanged.
    """

    def token(self, index: int, token_id: int, text: str) -> None:
        """One token of item ``index`` and that item's text so far."""
        ...

    def step(self, index: int, token_ids: Sequence[int], text: str) -> None:
        """Every token of one engine step of item ``index``, and its text after them."""
        ...

    def wait(self) -> None:
        """No new token of any item yet: the host may cancel here."""
        ...


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
        self, items: Sequence[BatchItem], sink: BatchTokenSink
    ) -> list[BackendResult]:
        """Generate every item together; results in the items' order.

        Raises:
            Exception: Whatever ``sink`` raised, unchanged, after every
                outstanding item was stopped.
        """
        ...


BackendFactory = Callable[["ModelProfile", Path, "ProgressCallback"], Backend]
"""Loads a backend from (profile, completed snapshot path, progress callback)."""


def refuse_unaccepted(backend: Backend, inputs: PreparedInputs, engine: str) -> None:
    """Refuse inputs of a modality ``backend`` does not declare, naming it and the fix.

    Raises:
        UnsupportedInputError: The first such modality, in the order of ``Modality``.
    """
    refused = inputs.modalities - backend.modalities
    for modality in Modality:
        if modality in refused:
            raise UnsupportedInputError(modality.value, engine)
