"""The llama.cpp backend object: check, load, generate, close, metadata.

No llama.cpp import at module level: ``_engine`` (which imports
llama-cpp-python) is imported only after both GGUF files passed their checks,
so a refused file never reaches the C++ parser, and the package imports on
machines without the engine.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

import psutil
from comfy_llm_core import Modality, ProgressEvent, ProgressStage, ignore_progress
from comfy_llm_inputs import chat_messages
from comfy_llm_reasoning import chat_template_kwargs, prompt_opens_reasoning, reasoning_end_id
from comfy_llm_residency.errors import UnsupportedInputError

from ._files import CheckedFiles, check_files
from ._offload import plan_offload
from ._prompt import TemplateError, render_prompt
from ._vocab import vocabulary_of
from .errors import ENGINE_NAME, BackendUnloadedError, EngineNotInstalledError, GenerationError

if TYPE_CHECKING:
    from comfy_llm_core import ProgressCallback
    from comfy_llm_inputs import PreparedInputs
    from comfy_llm_reasoning import TokenVocabulary
    from comfy_llm_residency.backend import BackendResult, GenerationSettings, TokenSink

    from ._engine import LoadedLlama

__all__ = ["DEFAULT_CONTEXT_TOKENS", "ENGINE_NAMES", "LlamaCppBackend"]

ENGINE_NAMES: Final = (ENGINE_NAME,)
"""The engine records (``ModelProfile.backend``) this package serves."""

DEFAULT_CONTEXT_TOKENS = 8192
"""Context the model is loaded with unless the caller says (capped by the model's own)."""

_COMPUTE_ALLOWANCE = 512 * 2**20  # compute buffers on the GPU, beside weights and KV


def _import_engine() -> ModuleType:
    """Import ``_engine`` (llama-cpp-python).

    Raises:
        EngineNotInstalledError: llama-cpp-python cannot be imported.
    """
    try:
        from . import _engine
    except ImportError as error:
        missing = (error.name or "").split(".")[0]
        if missing and missing != "llama_cpp":
            raise
        raise EngineNotInstalledError(ENGINE_NAME, "llama_cpp", str(error)) from error
    except OSError as error:  # the shared library exists but does not load
        raise EngineNotInstalledError(ENGINE_NAME, "llama_cpp", str(error)) from error
    return _engine


def _kv_bytes(files: CheckedFiles, context: int) -> int:
    """K and V at f16 for every layer and position (llama.cpp's default cache type)."""
    meta, arch = files.model.file, files.model.architecture
    heads = meta.integer(f"{arch}.attention.head_count") or 1
    kv_heads = meta.integer(f"{arch}.attention.head_count_kv") or heads
    head_dim = meta.integer(f"{arch}.attention.key_length") or (
        files.model.embedding_width // max(1, heads)
    )
    return 2 * context * files.model.layers * kv_heads * head_dim * 2


class LlamaCppBackend:
    """A GGUF model (and its projector) loaded by llama.cpp; a residency ``Backend``.

    Build it with :meth:`open` (files) or ``create_backend`` (a profile). Calls
    are serialized by an internal lock as well as by the resident manager.
    """

    ENGINE_NAME: Final = ENGINE_NAME

    def __init__(
        self,
        label: str,
        files: CheckedFiles,
        loaded: LoadedLlama,
        engine: ModuleType,
        *,
        load_seconds: float,
        reasoning_parser: str | None,
        architecture: str | None,
    ) -> None:
        """Wrap a loaded model; use :meth:`open` instead."""
        self._label = label
        self._files = files
        self._loaded: LoadedLlama | None = loaded
        self._engine = engine
        self._load_seconds = load_seconds
        self._reasoning_parser = reasoning_parser
        self._architecture = architecture
        self._vocabulary = vocabulary_of(files.model, self._decode)
        self._plan = loaded.plan
        self._lock = threading.Lock()
        self._last: dict[str, object] = {}

    def _decode(self, ids: Sequence[int]) -> str:
        """Ids to text through the loaded vocabulary (never a freed one)."""
        loaded = self._loaded
        if loaded is None:
            raise BackendUnloadedError(self._label)
        return str(self._engine.decode(loaded, ids))

    @classmethod
    def open(
        cls,
        model_path: Path | str,
        projector_path: Path | str | None = None,
        *,
        label: str | None = None,
        reasoning_parser: str | None = None,
        architecture: str | None = None,
        context_tokens: int = DEFAULT_CONTEXT_TOKENS,
        gpu_budget_bytes: int | None = None,
        use_gpu: bool = True,
        threads: int | None = None,
        progress: ProgressCallback = ignore_progress,
    ) -> LlamaCppBackend:
        """Check both files, then load them with llama.cpp.

        Args:
            model_path: The model GGUF.
            projector_path: Its vision projector (``mmproj``), or None (text only).
            label: A name for messages (default: the model file's name).
            reasoning_parser: The profile's ``reasoning_parser`` (``qwen3``, ...).
            architecture: The profile's architecture (parser fallback).
            context_tokens: Context to load with (capped by the model's own).
            gpu_budget_bytes: GPU memory admission granted (minus the reserve);
                None: every layer on the GPU when the build has one.
            use_gpu: False keeps every layer on the CPU.
            threads: CPU threads (default: llama-cpp-python's, half the cores).
            progress: Receives LOAD events; may raise to cancel.

        Returns:
            The loaded backend.

        Raises:
            UnsafeGgufError: A file was refused (llama.cpp never saw it).
            EngineNotInstalledError: llama-cpp-python is not installed.
            ModelLoadError: llama.cpp or libmtmd could not load a checked file.
        """
        files = check_files(
            Path(model_path), None if projector_path is None else Path(projector_path)
        )
        name = label or files.model.path.name
        started = time.perf_counter()
        progress(
            ProgressEvent(
                stage=ProgressStage.LOAD,
                message=f"Loading {name} with llama.cpp",
                indeterminate=True,
                elapsed_seconds=0.0,
            )
        )
        engine = _import_engine()
        context = min(context_tokens, files.model.context_tokens or context_tokens)
        projector_bytes = files.projector.weight_bytes if files.projector is not None else 0
        plan = plan_offload(
            layers=files.model.layers,
            weight_bytes=files.model.weight_bytes,
            fixed_bytes=_kv_bytes(files, context) + projector_bytes + _COMPUTE_ALLOWANCE,
            available_bytes=gpu_budget_bytes,
            gpu=use_gpu and engine.gpu_offload_supported(),
        )
        loaded = engine.load(files, label=name, context_tokens=context, plan=plan, threads=threads)
        backend = cls(
            name,
            files,
            loaded,
            engine,
            load_seconds=time.perf_counter() - started,
            reasoning_parser=reasoning_parser,
            architecture=architecture,
        )
        try:
            progress(
                ProgressEvent(
                    stage=ProgressStage.LOAD,
                    message=f"Loaded {name} in {backend.load_seconds:.1f} s",
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
    def load_seconds(self) -> float:
        """Seconds the load took (checks included)."""
        return self._load_seconds

    @property
    def loaded(self) -> bool:
        """False once :meth:`unload` ran."""
        return self._loaded is not None

    @property
    def modalities(self) -> frozenset[Modality]:
        """Text and files always; images and video frames with a vision projector."""
        if self._loaded is not None and self._loaded.mtmd is None:
            return frozenset({Modality.TEXT, Modality.FILE})
        return frozenset({Modality.TEXT, Modality.IMAGE, Modality.VIDEO, Modality.FILE})

    @property
    def vocabulary(self) -> TokenVocabulary | None:
        """The vocabulary for the reasoning parser (kept after unload)."""
        return self._vocabulary

    def generate(
        self, inputs: PreparedInputs, settings: GenerationSettings, sink: TokenSink
    ) -> BackendResult:
        """Generate a response, handing every token to ``sink``.

        Raises:
            BackendUnloadedError: :meth:`unload` already ran.
            UnsupportedInputError: Images were sent to a model without a projector.
            GenerationError: The chat template or llama.cpp failed.
            PromptTooLongError: The prompt does not fit the context.
            Exception: Whatever ``sink`` raised, unchanged.
        """
        with self._lock:
            loaded = self._loaded
            if loaded is None:
                raise BackendUnloadedError(self._label)
            images = inputs.images_in_order()
            if images and loaded.mtmd is None:
                raise UnsupportedInputError("image", f"{ENGINE_NAME} without a projector (mmproj)")
            kwargs = chat_template_kwargs(
                self._reasoning_parser,
                self._architecture,
                enable_reasoning=settings.enable_reasoning,
            )
            try:
                prompt = render_prompt(
                    self._files.model.chat_template,
                    chat_messages(inputs, plain_text=True, media_marker=loaded.marker),
                    bos_text=loaded.bos_text,
                    eos_text=loaded.eos_text,
                    strip_bos=loaded.add_bos,
                    template_kwargs=kwargs,
                )
            except TemplateError as error:
                raise GenerationError("chat template", str(error)) from error
            result: BackendResult = self._engine.generate(
                loaded,
                prompt=prompt,
                images=images,
                opened=prompt_opens_reasoning(prompt),
                settings=settings,
                gate_id=reasoning_end_id(
                    self._reasoning_parser,
                    self._architecture,
                    enable_reasoning=settings.enable_reasoning,
                    vocabulary=self._vocabulary,
                ),
                sink=sink,
            )
            self._last = {
                "prompt_tokens": result.timings.prompt_tokens,
                "finish_reason": result.finish_reason,
                "rss_bytes": psutil.Process().memory_info().rss,
            }
            return result

    def unload(self) -> None:
        """Free the projector, the model, its context and KV cache; safe to call twice."""
        with self._lock:
            loaded, self._loaded = self._loaded, None
            if loaded is not None:
                self._engine.close(loaded)

    close = unload

    def runtime_metadata(self) -> dict[str, object]:
        """JSON-ready facts: engine, files, quantization, GPU offload, last request."""
        model, projector = self._files.model, self._files.projector
        metadata: dict[str, Any] = {
            **self._engine.engine_facts(),
            "device": "gpu" if self._plan.offloaded_layers else "cpu",
            "gguf_file": model.path.name,
            "gguf_architecture": model.architecture,
            "quantization": model.quantization,
            "mmproj_file": projector.path.name if projector is not None else None,
            "projector_type": projector.projector_type if projector is not None else None,
            "context_tokens": self._loaded.n_ctx if self._loaded is not None else None,
            "model_loaded": self._loaded is not None,
            "engine_load_seconds": round(self._load_seconds, 4),
            **self._plan.as_metadata(),
        }
        metadata.update(self._last)
        return metadata
