"""The MLX-VLM backend object: load, generate, unload, metadata.

No MLX import at module level: ``_engine`` (which imports MLX and MLX-VLM) is
imported when a backend is loaded, so this module, and the package, import
on machines without MLX.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Final

from comfy_llm_core import ExecutionTarget, Modality, ProgressEvent, ProgressStage, ignore_progress
from comfy_llm_inputs import chat_messages
from comfy_llm_reasoning import reasoning_end_id
from comfy_llm_staging import require_completed_snapshot

from ._prompt import template_kwargs
from ._thinking import thinking_budget_for
from .errors import (
    ENGINE_NAME,
    BackendUnloadedError,
    EngineNotInstalledError,
    UnsupportedBackendError,
)

if TYPE_CHECKING:
    from comfy_llm_core import ProgressCallback
    from comfy_llm_inputs import PreparedInputs
    from comfy_llm_profiles import ModelProfile
    from comfy_llm_reasoning import TokenVocabulary
    from comfy_llm_residency.backend import (
        BackendResult,
        BatchItem,
        BatchTokenSink,
        GenerationSettings,
        TokenSink,
    )

    from ._engine import LoadedModel

__all__ = ["ENGINE_NAMES", "MlxVlmBackend", "create_backend"]

ENGINE_NAMES: Final = (ENGINE_NAME,)
"""The ``ModelProfile.backend`` values (engine records) this package serves."""

_ENGINE_MODULES = ("mlx", "mlx_vlm")


def _import_engine() -> ModuleType:
    """Import ``_engine`` (MLX and MLX-VLM).

    Raises:
        EngineNotInstalledError: MLX or MLX-VLM cannot be imported.
    """
    try:
        from . import _engine
    except ImportError as error:
        missing = (error.name or "").split(".")[0]
        if missing and missing not in _ENGINE_MODULES:
            raise
        raise EngineNotInstalledError(ENGINE_NAME, missing or "mlx", str(error)) from error
    return _engine


def _check_profile(profile: ModelProfile) -> None:
    """Refuse a profile made for another engine or target.

    Raises:
        UnsupportedBackendError: ``backend`` is not ``mlx_vlm`` or the target is
            not ``local_apple``.
    """
    if profile.backend != ENGINE_NAME:
        raise UnsupportedBackendError(profile.profile_id, "backend", profile.backend, ENGINE_NAME)
    if profile.execution_target != ExecutionTarget.LOCAL_APPLE:
        raise UnsupportedBackendError(
            profile.profile_id,
            "execution_target",
            ExecutionTarget(profile.execution_target).value,
            ExecutionTarget.LOCAL_APPLE.value,
        )


class MlxVlmBackend:
    """A model loaded by MLX-VLM from a completed local snapshot.

    Implements ``comfy_llm_residency.Backend``. Build it with
    :meth:`load` (or :func:`create_backend`, the residency factory). Calls are
    serialized by an internal lock as well as by the resident manager.
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
        loaded: LoadedModel,
        engine: ModuleType,
        load_seconds: float,
    ) -> None:
        """Wrap an already loaded model; use :meth:`load` instead.

        Args:
            profile: The profile the model was loaded for.
            snapshot_path: The snapshot it was loaded from.
            loaded: What ``_engine.load_snapshot`` returned.
            engine: The ``_engine`` module.
            load_seconds: How long loading took.
        """
        self._profile = profile
        self._snapshot_path = snapshot_path
        self._loaded: LoadedModel | None = loaded
        self._engine = engine
        self._load_seconds = load_seconds
        self._vocabulary: TokenVocabulary | None = loaded.vocabulary
        self._dtype = loaded.dtype
        self._lock = threading.Lock()
        self._last: dict[str, object] = {}
        self._llg_tokenizers: dict[int, Any] = {}

    @classmethod
    def load(
        cls,
        profile: ModelProfile,
        snapshot_path: Path,
        progress: ProgressCallback = ignore_progress,
    ) -> MlxVlmBackend:
        """Load the profile's model from its completed snapshot.

        Only the local directory is read (never a Hub id); remote code is
        never trusted.

        Args:
            profile: A ``local_apple`` profile with backend ``mlx_vlm``.
            snapshot_path: The completed snapshot directory.
            progress: Receives LOAD events; may raise to cancel (the model is
                freed again).

        Returns:
            The loaded backend.

        Raises:
            UnsupportedBackendError: The profile is for another engine or target.
            comfy_llm_staging.errors.IncompleteSnapshotError: The directory is
                not a completed snapshot of the profile's repository revision.
            EngineNotInstalledError: MLX or MLX-VLM is not installed.
            ModelLoadError: MLX-VLM failed to load the snapshot.
        """
        _check_profile(profile)
        path = require_completed_snapshot(
            Path(snapshot_path), repository=profile.repository, revision=profile.revision
        )
        started = time.perf_counter()
        progress(
            ProgressEvent(
                stage=ProgressStage.LOAD,
                message=f"Loading {profile.repository} with MLX-VLM",
                indeterminate=True,
                elapsed_seconds=0.0,
            )
        )
        engine = _import_engine()
        loaded = engine.load_snapshot(path, profile.profile_id)
        backend = cls(profile, path, loaded, engine, time.perf_counter() - started)
        try:
            progress(
                ProgressEvent(
                    stage=ProgressStage.LOAD,
                    message=f"Loaded {profile.repository} in {backend.load_seconds:.1f} s",
                    value=1.0,
                    maximum=1.0,
                    elapsed_seconds=backend.load_seconds,
                )
            )
        except BaseException:
            backend.unload()
            raise
        return backend

    @property
    def profile(self) -> ModelProfile:
        """The profile this backend was loaded for."""
        return self._profile

    @property
    def load_seconds(self) -> float:
        """Seconds the load took."""
        return self._load_seconds

    @property
    def loaded(self) -> bool:
        """False once :meth:`unload` ran."""
        return self._loaded is not None

    @property
    def vocabulary(self) -> TokenVocabulary | None:
        """The tokenizer's vocabulary for the reasoning parser (kept after unload)."""
        return self._vocabulary

    def generate(
        self, inputs: PreparedInputs, settings: GenerationSettings, sink: TokenSink
    ) -> BackendResult:
        """Generate a response, handing every token to ``sink``.

        Images go in first, then the sampled video frames, in order. For
        ``qwen3`` profiles ``enable_reasoning`` is passed as the template's
        ``enable_thinking``, and, when enabled, reasoning is capped at half
        of ``max_new_tokens`` (see ``_thinking``).

        Args:
            inputs: Engine-neutral prompt, system prompt, images and frames.
            settings: Sampling settings (temperature 0 is greedy; a seed makes
                sampling reproducible).
            sink: Gets the prompt's reasoning state, then each token with the
                text so far; may raise to cancel.

        Returns:
            Every generated id (``<think>``/``</think>`` and the stop token
            kept), the text decoded without special tokens, and timings.

        Raises:
            BackendUnloadedError: :meth:`unload` already ran.
            comfy_llm_reasoning.ReasoningError: The profile names an unknown
                reasoning parser.
            Exception: Whatever ``sink`` raised, unchanged.
        """
        _refuse_min_tokens(settings)
        with self._lock:
            loaded = self._loaded
            if loaded is None:
                raise BackendUnloadedError(self._profile.profile_id)
            kwargs = template_kwargs(self._profile, enable_reasoning=settings.enable_reasoning)
            cap_thinking = bool(settings.enable_reasoning and kwargs.get("enable_thinking"))
            result: BackendResult = self._engine.generate(
                loaded,
                messages=chat_messages(inputs),
                images=inputs.images_in_order(),
                template_kwargs=kwargs,
                settings=settings,
                cap_thinking=cap_thinking,
                sink=sink,
                schema_mask=self._schema_mask(loaded, settings),
            )
            self._last = {
                "thinking_budget_tokens": (
                    thinking_budget_for(settings.max_new_tokens) if cap_thinking else None
                ),
                "prompt_tokens": result.timings.prompt_tokens,
                "finish_reason": result.finish_reason,
                **self._engine.memory_snapshot(),
            }
            return result

    def can_batch(self, items: Sequence[BatchItem]) -> bool:
        """Greedy items without a schema or a thinking budget (see ``_batch`` for why)."""
        first = items[0].settings if items else None
        return first is not None and all(
            item.settings.temperature == 0
            and item.settings.schema is None
            and item.settings.enable_reasoning == first.enable_reasoning
            and not self._caps_thinking(item.settings)
            for item in items
        )

    def generate_batch(
        self, items: Sequence[BatchItem], sink: BatchTokenSink
    ) -> list[BackendResult]:
        """Generate items of one prompt shape together with MLX-VLM's ``BatchGenerator``.

        Raises:
            BackendUnloadedError: :meth:`unload` already ran.
            Exception: Whatever ``sink`` raised, unchanged.
        """
        for item in items:
            _refuse_min_tokens(item.settings)
        with self._lock:
            loaded = self._loaded
            if loaded is None:
                raise BackendUnloadedError(self._profile.profile_id)
            from . import _batch

            settings = items[0].settings
            results: list[BackendResult] = _batch.generate_rows(
                loaded,
                [
                    _batch.BatchRow(chat_messages(i.inputs), i.inputs.images_in_order())
                    for i in items
                ],
                template_kwargs=template_kwargs(
                    self._profile, enable_reasoning=settings.enable_reasoning
                ),
                settings=[item.settings for item in items],
                sink=sink,
            )
            self._last = {
                "thinking_budget_tokens": None,
                "prompt_tokens": results[-1].timings.prompt_tokens,
                "finish_reason": results[-1].finish_reason,
                **self._engine.memory_snapshot(),
            }
            return results

    def _caps_thinking(self, settings: GenerationSettings) -> bool:
        kwargs = template_kwargs(self._profile, enable_reasoning=settings.enable_reasoning)
        return bool(settings.enable_reasoning and kwargs.get("enable_thinking"))

    def _schema_mask(self, loaded: Any, settings: GenerationSettings) -> Any:
        schema = settings.schema
        if schema is None:
            return None
        from ._constraint import SchemaMask

        gate = reasoning_end_id(
            self._profile.reasoning_parser,
            self._profile.architecture,
            enable_reasoning=settings.enable_reasoning,
            vocabulary=loaded.vocabulary,
        )
        return SchemaMask(schema, loaded.tokenizer, loaded.stop_ids, gate, self._llg_tokenizers)

    def unload(self) -> None:
        """Drop the model and processor and clear MLX's cache; safe to call twice."""
        with self._lock:
            self._loaded = None
            self._llg_tokenizers.clear()
            self._engine.clear_cache()

    def runtime_metadata(self) -> dict[str, object]:
        """Return JSON-ready facts: engine, versions, device, dtype, memory, last request."""
        metadata: dict[str, Any] = {
            **self._engine.engine_versions(),
            "dtype": self._dtype,
            "profile_dtype": self._profile.dtype,
            "quantization_method": self._profile.quantization_method,
            "model_loaded": self._loaded is not None,
            "engine_load_seconds": round(self._load_seconds, 4),
        }
        metadata.update(self._last)
        return metadata


def create_backend(
    profile: ModelProfile, snapshot_path: Path, progress: ProgressCallback
) -> MlxVlmBackend:
    """Load an MLX-VLM backend (a ``comfy_llm_residency.BackendFactory``).

    Args:
        profile: A ``local_apple`` profile with backend ``mlx_vlm``.
        snapshot_path: The completed snapshot directory.
        progress: Receives LOAD events; may raise to cancel.

    Returns:
        The loaded backend.

    Raises:
        UnsupportedBackendError: The profile is for another engine or target.
        comfy_llm_staging.errors.IncompleteSnapshotError: Not a completed snapshot.
        EngineNotInstalledError: MLX or MLX-VLM is not installed; the message
            names the command that installs the ``apple`` extra from here.
        ModelLoadError: MLX-VLM failed to load the snapshot.
    """
    return MlxVlmBackend.load(profile, snapshot_path, progress)


def _refuse_min_tokens(settings: GenerationSettings) -> None:
    """MLX-VLM's generate has no minimum length: say so rather than ignore it."""
    if settings.min_new_tokens:
        from comfy_llm_residency import GenerationSettingsError

        raise GenerationSettingsError(
            "min_new_tokens",
            f"min_new_tokens={settings.min_new_tokens} is not supported by the MLX backend "
            "(MLX-VLM's generate stops at the stop token); use 0.",
        )
