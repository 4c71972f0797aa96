"""The Transformers backend: load from a completed snapshot, generate, unload."""

from __future__ import annotations

import gc
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

from comfy_llm_core import Modality, ProgressCallback
from comfy_llm_profiles import ModelProfile
from comfy_llm_reasoning import TokenVocabulary, chat_template_kwargs, reasoning_end_id
from comfy_llm_residency.backend import (
    BackendResult,
    BackendTimings,
    BatchItem,
    BatchTokenSink,
    GenerationSettings,
    TokenSink,
)
from comfy_llm_staging import require_completed_snapshot
from comfy_llm_structured import JsonConstraint, llg_tokenizer

from .._processor import ENGINE_NAME, hide_library_bars, load_processor, load_reporter
from ..errors import (
    BackendUnloadedError,
    ModelLoadError,
    PromptTooLongError,
    UnsupportedBackendError,
)
from ._batch import batchable, generate_groups
from ._engine import DevicePlan, import_engine, plan_device
from ._generate import eos_ids, run_generate
from ._memory_fit import OutOfMemory, attempt, out_of_memory_error
from ._messages import encode_prompt
from ._quantize import (
    batches_like_single_runs,
    keep_unaligned_nf4_off_the_packed_cpu_path,
    quantization_arguments,
    quantization_report,
)

if TYPE_CHECKING:
    from comfy_llm_inputs import PreparedInputs

__all__ = ["ATTENTION_IMPLEMENTATION", "TransformersBackend"]

ATTENTION_IMPLEMENTATION = "sdpa"


class TransformersBackend:
    """A model loaded with Transformers (``AutoModelForImageTextToText``).

    Implements the residency ``Backend`` protocol. Create it with
    :func:`create_backend`; the resident manager serializes every call.

    Attributes:
        profile: The profile this model was loaded for.
        snapshot_path: The snapshot directory it was loaded from.
        plan: The device and dtype it runs in.
        load_seconds: Wall time of the load.
    """

    ENGINE_NAME: ClassVar[str] = ENGINE_NAME
    modalities: frozenset[Modality] = frozenset(
        {Modality.TEXT, Modality.IMAGE, Modality.VIDEO, Modality.FILE}
    )
    """What this engine takes: text (files inlined), images, video frames as images."""

    def __init__(
        self,
        profile: ModelProfile,
        snapshot_path: Path,
        *,
        torch: ModuleType,
        transformers: ModuleType,
        processor: Any,
        model: Any,
        plan: DevicePlan,
        load_seconds: float,
    ) -> None:
        """Wrap an already loaded processor and model (use :meth:`load`)."""
        self.profile = profile
        self.snapshot_path = snapshot_path
        self.plan = plan
        self.load_seconds = load_seconds
        self._torch = torch
        self._transformers = transformers
        self._processor: Any = processor
        self._model: Any = model
        tokenizer = getattr(processor, "tokenizer", processor)
        self._tokenizer: Any = tokenizer
        self._vocabulary: TokenVocabulary | None = TokenVocabulary.from_tokenizer(tokenizer)
        self._llg_tokenizer: Any = None

    @classmethod
    def load(
        cls, profile: ModelProfile, snapshot_path: Path, progress: ProgressCallback
    ) -> TransformersBackend:
        """Check the snapshot, then load processor and model.

        Args:
            profile: A profile whose backend is ``transformers``.
            snapshot_path: The completed snapshot directory.
            progress: Receives indeterminate LOAD events.

        Returns:
            The loaded backend.

        Raises:
            UnsupportedBackendError: The profile names another backend.
            IncompleteSnapshotError: The snapshot is not complete.
            EngineNotInstalledError: torch or transformers is missing.
            QuantizationNotInstalledError: The profile quantizes at load
                (``:nf4``/``:int8``) and bitsandbytes is missing.
            ModelLoadError: Transformers could not load the files.
        """
        if profile.backend != ENGINE_NAME:
            raise UnsupportedBackendError(
                profile.profile_id, "backend", profile.backend, ENGINE_NAME
            )
        path = require_completed_snapshot(
            Path(snapshot_path), repository=profile.repository, revision=profile.revision
        )
        torch, transformers = import_engine()
        plan = plan_device(profile, torch)
        started = time.perf_counter()
        report = load_reporter(progress, started)
        hide_library_bars(transformers)
        # One device only: weights go straight there (no accelerate needed unless
        # bitsandbytes quantizes them on the way: _quantize).
        placement: dict[str, Any] = {"device_map": plan.device} if plan.device != "cpu" else {}
        placement |= quantization_arguments(profile, torch, transformers, plan)
        report("Loading processor")
        processor = load_processor(transformers, profile, path)
        quantized = profile.load_quantization
        how = f", {quantized.label}" if quantized is not None else ""
        report(f"Loading model ({plan.device}, {plan.dtype_name}{how})")
        try:
            model = transformers.AutoModelForImageTextToText.from_pretrained(
                str(path),
                local_files_only=True,
                trust_remote_code=False,
                dtype=plan.torch_dtype(torch),
                attn_implementation=ATTENTION_IMPLEMENTATION,
                **placement,
            )
        except (OSError, ValueError, KeyError, TypeError) as error:
            where = (ENGINE_NAME, profile.profile_id, str(path))
            raise ModelLoadError(*where, "model", str(error)) from error
        model.eval()
        if quantized is not None and plan.device == "cpu":
            keep_unaligned_nf4_off_the_packed_cpu_path(model)
        seconds = time.perf_counter() - started
        report("Model loaded")
        return cls(
            profile,
            path,
            torch=torch,
            transformers=transformers,
            processor=processor,
            model=model,
            plan=plan,
            load_seconds=seconds,
        )

    @property
    def vocabulary(self) -> TokenVocabulary | None:
        """The tokenizer's vocabulary for the reasoning parser (kept after unload)."""
        return self._vocabulary

    @property
    def loaded(self) -> bool:
        """Whether the model is still in memory."""
        return self._model is not None

    def _decode(self, ids: Any) -> str:
        return str(self._tokenizer.decode(list(ids), skip_special_tokens=True))

    def _constraint(self, settings: GenerationSettings) -> JsonConstraint | None:
        schema = settings.schema
        if schema is None:
            return None
        width = int(self._model.config.get_text_config().vocab_size)
        if self._llg_tokenizer is None:
            ends = eos_ids(self._model.generation_config)
            self._llg_tokenizer = llg_tokenizer(self._tokenizer, width, ends)
        gate = reasoning_end_id(
            self.profile.reasoning_parser,
            self.profile.architecture,
            enable_reasoning=settings.enable_reasoning,
            vocabulary=self._vocabulary,
        )
        return JsonConstraint(schema, self._llg_tokenizer, width, gate_id=gate)

    def generate(
        self, inputs: PreparedInputs, settings: GenerationSettings, sink: TokenSink
    ) -> BackendResult:
        """Generate a response, handing every token to ``sink``.

        Images go first, then the video frames in order, then the prompt text.
        For qwen3 profiles ``settings.enable_reasoning`` is passed to the chat
        template as ``enable_thinking``. ``max_new_tokens`` is capped to what
        the profile's context leaves after the prompt.

        Args:
            inputs: Engine-neutral prompt, images and video frames.
            settings: Sampling settings (temperature 0 is greedy; seed seeds
                torch before sampling).
            sink: Gets the prompt's reasoning state, then each token with the
                text so far; may raise to stop.

        Returns:
            Every generated id (``<think>``/``</think>`` and the end token
            kept), the text decoded with special tokens skipped, timings, the
            finish reason and whether the prompt opened the reasoning block.

        Raises:
            BackendUnloadedError: :meth:`unload` was called.
            PromptTooLongError: The prompt fills the profile's context.
            GenerationOutOfMemoryError: CUDA ran out of memory (``_memory_fit``).
            Exception: Whatever ``sink`` raised, unchanged.
        """
        if self._model is None:
            raise BackendUnloadedError(self.profile.profile_id)
        started = time.perf_counter()
        encoded, budget = self._encode(inputs, settings)
        sink.prompt_opened(encoded.opened_reasoning)  # the live view's split
        constraint = self._constraint(settings)
        streamed = False

        def on_token(token_id: int, text: str) -> None:
            nonlocal streamed
            streamed = True
            sink.token(token_id, text)

        run = attempt(
            self._torch,
            lambda: run_generate(
                self._torch,
                self._model,
                encoded.tensors,
                settings=settings,
                max_new_tokens=budget,
                decode=self._decode,
                on_token=on_token,
                started=started,
                constraint=constraint,
                tokenizer=self._tokenizer,
            ),
        )
        if isinstance(run, OutOfMemory):
            raise out_of_memory_error(
                self._torch, self.profile.profile_id, 1, after_tokens=streamed, failed=run
            )
        return self._result(run, encoded, constrained=constraint is not None)

    def can_batch(self, items: Sequence[BatchItem]) -> bool:
        """Greedy items without a schema only (``_batch``), never on 8-bit (``_quantize``)."""
        return batches_like_single_runs(self.profile) and batchable(items)

    def generate_batch(
        self, items: Sequence[BatchItem], sink: BatchTokenSink
    ) -> list[BackendResult]:
        """Generate items of equal prompt shape in one ``generate`` per group (see ``_batch``).

        Raises:
            BackendUnloadedError: :meth:`unload` was called.
            PromptTooLongError: A prompt fills the profile's context.
            GenerationOutOfMemoryError: Even one prompt did not fit (``_memory_fit``).
            Exception: Whatever ``sink`` raised, unchanged.
        """
        if self._model is None:
            raise BackendUnloadedError(self.profile.profile_id)
        return generate_groups(self, items, sink)

    def _encode(self, inputs: PreparedInputs, settings: GenerationSettings) -> tuple[Any, int]:
        """The encoded prompt and the token budget the context leaves after it."""
        template_kwargs = chat_template_kwargs(
            self.profile.reasoning_parser,
            self.profile.architecture,
            enable_reasoning=settings.enable_reasoning,
        )
        encoded = encode_prompt(self._processor, inputs, template_kwargs)
        context = self.profile.limits.context_tokens
        if encoded.prompt_tokens >= context:
            raise PromptTooLongError(encoded.prompt_tokens, context)
        return encoded, min(settings.max_new_tokens, context - encoded.prompt_tokens)

    def _result(
        self, run: Any, encoded: Any, *, constrained: bool = False, together: int = 1
    ) -> BackendResult:
        return BackendResult(
            token_ids=run.token_ids,
            text=self._decode(run.token_ids),
            native_reasoning=None,
            timings=BackendTimings(
                generation_seconds=run.generation_seconds, prompt_tokens=encoded.prompt_tokens
            ),
            prompt_opened_reasoning=encoded.opened_reasoning,
            finish_reason=run.finish_reason,
            constrained=constrained,
            batch_size=together,
        )

    def unload(self) -> None:
        """Drop the model and processor, collect garbage, empty torch's CUDA cache.

        Safe to call more than once.
        """
        self._model = None
        self._processor = None
        gc.collect()
        if self.plan.device == "cuda" and self._torch.cuda.is_available():
            self._torch.cuda.empty_cache()

    def runtime_metadata(self) -> dict[str, object]:
        """Return JSON-ready facts about the engine.

        Returns:
            ``engine``, ``engine_version`` (transformers), ``torch_version``,
            ``device`` (``cpu``/``cuda:N``), ``device_name``, ``dtype``,
            ``requested_dtype``, ``attention_implementation``, ``model_class``,
            ``load_seconds``, ``loaded``, ``quantization_method`` (and for a
            profile quantized at load ``quantization``, ``quantization_library``,
            ``quantized_linear_layers``, ``weight_memory_bytes``); on CUDA also
            ``cuda_memory_allocated_bytes`` and ``cuda_memory_reserved_bytes``.
        """
        torch = self._torch
        model = self._model
        metadata: dict[str, object] = {
            "engine": ENGINE_NAME,
            "engine_version": str(self._transformers.__version__),
            "torch_version": str(torch.__version__),
            "device": str(model.device) if model is not None else self.plan.device,
            "dtype": str(model.dtype).removeprefix("torch.") if model is not None else None,
            "requested_dtype": self.plan.requested_dtype,
            "attention_implementation": _attention(model),
            "model_class": type(model).__name__ if model is not None else None,
            "load_seconds": round(self.load_seconds, 4),
            "loaded": model is not None,
            **quantization_report(self.profile, model),
        }
        if self.plan.device == "cuda" and torch.cuda.is_available():
            index = torch.cuda.current_device()
            metadata["device_name"] = str(torch.cuda.get_device_name(index))
            metadata["cuda_memory_allocated_bytes"] = int(torch.cuda.memory_allocated(index))
            metadata["cuda_memory_reserved_bytes"] = int(torch.cuda.memory_reserved(index))
        else:
            metadata["device_name"] = "cpu"
        return metadata


def _attention(model: Any) -> str | None:
    if model is None:
        return None
    value = getattr(getattr(model, "config", None), "_attn_implementation", None)
    return str(value) if value is not None else ATTENTION_IMPLEMENTATION
