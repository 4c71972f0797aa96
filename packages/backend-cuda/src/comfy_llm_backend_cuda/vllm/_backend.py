"""The vLLM backend: one resident ``AsyncLLM`` per profile, driven synchronously.

Order of one load: snapshot check -> import vLLM -> quantization check ->
compile-cache namespace -> engine on the backend's loop thread (eager or
throughput, from :mod:`._modes`; started by :mod:`._start`) -> processor for
the chat template.

Order of one batch: see ``_batch`` (all items submitted at once).

Order of one request: images downscaled to the processor's cap (a caption
batch's to the caption cap) -> chat template (``enable_thinking`` from the
request) -> ``engine.generate`` with images and video frames as multi-modal data and
``RequestOutputKind.DELTA`` -> each drain's ids reach the sink's ``step`` at
once on the caller's thread -> an exception there cancels the submission (vLLM
aborts it by internal id, even while it still waits for preprocessing) and
aborts the engine request, then propagates -> vLLM's ``qwen3`` reasoning
parser fills the native reasoning field.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import queue
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from comfy_llm_core import Modality, ProgressCallback
from comfy_llm_inputs import chat_messages
from comfy_llm_profiles import ModelProfile
from comfy_llm_reasoning import TokenVocabulary, chat_template_kwargs, prompt_opens_reasoning
from comfy_llm_residency import serving_batch
from comfy_llm_residency.backend import (
    BackendResult,
    BackendTimings,
    BatchItem,
    BatchTokenSink,
    GenerationSettings,
    TokenSink,
)
from comfy_llm_staging import require_completed_snapshot

from .._processor import VLLM_ENGINE_NAME, load_processor, load_reporter, render_chat
from .._stream import stream_decoder
from ..errors import BackendUnloadedError, EngineDiedError
from ._batch import generate_batch
from ._cache import CompileCache, apply_compile_cache, current_stack
from ._drain import EngineGone, dead_reason, end_request, hand_over, take_drain
from ._engine import (
    LoopThread,
    check_quantization,
    cuda_capability,
    image_pixel_cap,
    import_vllm,
    quantization_kernel,
    vllm_version,
)
from ._kernels import check_driver, cuda_driver_version
from ._memory import memory_terms
from ._modes import execution_modes
from ._reasoning import native_reasoning
from ._requests import (
    capped_image,
    engine_prompt,
    next_request_id,
    raise_translated,
    sampling_params,
)
from ._start import start_engine
from ._stats import EngineLoad

if TYPE_CHECKING:
    from comfy_llm_inputs import PreparedInputs

__all__ = ["VllmBackend"]

logger = logging.getLogger(__name__)
_ABORT_TIMEOUT_SECONDS = 60.0


class VllmBackend:
    """A resident ``AsyncLLM`` for one profile (the residency ``Backend`` protocol).

    Attributes:
        profile: The profile it serves.
        snapshot_path: The snapshot it loaded from.
        mode: ``eager`` or ``throughput``: how the current engine was built.
        compile_cache: The namespace the compile caches use.
        load_seconds: Wall time of the last engine start.
    """

    ENGINE_NAME: ClassVar[str] = VLLM_ENGINE_NAME
    modalities: frozenset[Modality] = frozenset(
        {Modality.TEXT, Modality.IMAGE, Modality.VIDEO, Modality.FILE}
    )
    """What this engine takes: text (files inlined), images, video frames as images."""

    def __init__(self, profile: ModelProfile, path: Path, vllm: Any) -> None:
        """Prepare an unstarted backend (use :meth:`load`)."""
        self.profile = profile
        self.snapshot_path = path
        self._vllm = vllm
        self._loop: LoopThread | None = None
        self._engine: Any = None
        self._processor: Any = None
        self._tokenizer: Any = None
        self._vocabulary: TokenVocabulary | None = None
        self.mode = "eager"
        self.compile_cache: CompileCache | None = None
        self.load_seconds = 0.0
        self.on_cpu = True
        self.device_name = "cpu"
        #: ``native`` / ``marlin`` for a quantized profile on CUDA (vLLM's kernel path), else None.
        self.quantization_kernel: str | None = None
        #: Why the engine core died, once it did (then ``loaded`` is False).
        self.dead_reason: str | None = None
        #: ``kv_cache_memory_bytes`` / ``gpu_memory_utilization`` the engine was given.
        self.engine_memory: dict[str, int | float] = {}
        #: (request id, finish reason the engine reported) of the last aborted request.
        self.last_abort: tuple[str, str | None] | None = None
        #: The same for every request of the last aborted batch.
        self.last_batch_abort: tuple[tuple[str, str | None], ...] = ()
        #: Running/waiting requests and KV usage peaks of the last request or batch.
        self.load_stats = EngineLoad()

    @classmethod
    def load(
        cls, profile: ModelProfile, snapshot_path: Path, progress: ProgressCallback
    ) -> VllmBackend:
        """Check the snapshot, start the engine in the current mode, load the processor."""
        path = require_completed_snapshot(
            Path(snapshot_path), repository=profile.repository, revision=profile.revision
        )
        # the CUDA 13 build needs driver R580+: say so before vLLM's import patches anything
        check_driver(profile.profile_id, cuda_driver_version())
        vllm = import_vllm()
        quantization = dict(profile.backend_options).get("quantization")
        check_quantization(profile.profile_id, str(quantization) if quantization else None)
        backend = cls(profile, path, vllm)
        backend._start(progress)
        return backend

    def _start(self, progress: ProgressCallback) -> None:
        import torch

        started = time.perf_counter()
        modes = execution_modes()
        if serving_batch():  # captions: compiled from the first job
            modes.observe_captions()
        self.mode = modes.mode()
        self.on_cpu = not torch.cuda.is_available()
        self.compile_cache = apply_compile_cache(current_stack(torch, vllm_version()))
        self.device_name = self.compile_cache.gpu_type
        quantization = dict(self.profile.backend_options).get("quantization")
        capability = None if self.on_cpu else cuda_capability()
        self.quantization_kernel = quantization_kernel(
            str(quantization) if quantization else None, capability
        )

        report = load_reporter(progress, started)
        report("Loading processor")
        import transformers

        self._processor = load_processor(transformers, self.profile, self.snapshot_path)
        self._tokenizer = getattr(self._processor, "tokenizer", self._processor)
        self._vocabulary = TokenVocabulary.from_tokenizer(self._tokenizer)
        report(f"Starting vLLM engine ({self.mode} mode)")
        self._loop, self._engine, self.engine_memory = start_engine(
            self.profile,
            self.snapshot_path,
            self.compile_cache,
            eager=self.mode == "eager",
            on_cpu=self.on_cpu,
            capability=capability,
            load_stats=self.load_stats,
        )
        self.load_seconds = time.perf_counter() - started
        report(f"vLLM engine ready ({self.mode} mode)")

    @property
    def vocabulary(self) -> TokenVocabulary | None:
        """The tokenizer's vocabulary for the reasoning parser."""
        return self._vocabulary

    @property
    def loaded(self) -> bool:
        """Whether the engine is running (False once its engine core died: the manager evicts)."""
        if self._engine is None:
            return False
        if self.dead_reason is None:
            self.dead_reason = dead_reason(self._engine)
        return self.dead_reason is None

    def _died(self, reason: str) -> EngineDiedError:
        """Note the engine's death (``loaded`` turns False) and the error the request ends with."""
        self.dead_reason = reason
        logger.error("The vLLM engine of %s died: %s", self.profile.profile_id, reason)
        return EngineDiedError(self.profile.profile_id, reason)

    @property
    def enforce_eager(self) -> bool | None:
        """The running engine's ``enforce_eager``, as vLLM's config holds it."""
        if self._engine is None:
            return None
        return bool(self._engine.vllm_config.model_config.enforce_eager)

    def observe_workflow(self, prompt_id: str | None) -> str | None:
        """Note a request's prompt id; say why the engine must be rebuilt first, if so.

        Returns:
            A reason (the manager unloads and loads again, after an ENGINE
            progress stage) when auto just promoted the process (a second
            workflow, or a caption batch: ``serving_batch()``), or an earlier
            promotion or setting wants another mode than this engine's.
        """
        modes = execution_modes()
        modes.observe(prompt_id)
        if serving_batch():
            modes.observe_captions()
        wanted = modes.mode()
        if self._engine is not None and wanted != self.mode:
            return f"Rebuilding the vLLM engine in {wanted} mode (was {self.mode})"
        return None

    def _decode(self, ids: Any) -> str:
        return str(self._tokenizer.decode(list(ids), skip_special_tokens=True))

    def image_pixels(self, *, caption: bool) -> int:
        """The pixel cap images are downscaled to: the engine's, or the caption cap."""
        options = dict(self.profile.backend_options)
        cap = image_pixel_cap(self.profile, self.snapshot_path)
        if caption:
            cap = min(cap, int(options.get("caption_image_pixels") or cap))
        return cap

    def _render(
        self, inputs: PreparedInputs, settings: GenerationSettings, *, max_pixels: int
    ) -> tuple[str, list]:
        images = [capped_image(i, max_pixels) for i in inputs.images_in_order()]
        messages = chat_messages(inputs)
        kwargs = chat_template_kwargs(
            self.profile.reasoning_parser,
            self.profile.architecture,
            enable_reasoning=settings.enable_reasoning,
        )
        return render_chat(self._processor, messages, kwargs), images

    def generate(
        self, inputs: PreparedInputs, settings: GenerationSettings, sink: TokenSink
    ) -> BackendResult:
        """Generate, handing ``sink`` every engine step's tokens as one step.

        Raises:
            BackendUnloadedError: :meth:`unload` was called.
            PromptTooLongError: vLLM refused the prompt as longer than the context.
            Exception: Whatever ``sink`` raised, after the engine request
                was aborted (the engine then serves the next request).
        """
        if self._engine is None or self._loop is None:
            raise BackendUnloadedError(self.profile.profile_id)
        if self.dead_reason is not None:
            raise EngineDiedError(self.profile.profile_id, self.dead_reason)
        started = time.perf_counter()
        rendered, images = self._render(
            inputs, settings, max_pixels=self.image_pixels(caption=False)
        )
        opened = prompt_opens_reasoning(rendered)
        sink.prompt_opened(opened)  # the live view's split
        request = engine_prompt(rendered, images, self._tokenizer)
        request_id = next_request_id()
        self.load_stats.reset()
        steps: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        engine = self._engine
        tasks: list[asyncio.Task[Any]] = []

        async def pump() -> None:
            task = asyncio.current_task()
            if task is not None:
                tasks.append(task)
            try:
                outputs = engine.generate(
                    request.prompt,
                    sampling_params(settings),
                    request_id,
                    tokenization_kwargs=request.tokenization,
                )
                async for output in outputs:
                    steps.put(("step", output))
            except BaseException as error:
                steps.put(("error", error))
                raise
            steps.put(("end", None))

        running = self._loop.submit(pump())
        decoder = stream_decoder(self._tokenizer, self._decode)
        times: list[float] = []
        finish = "stop"
        prompt_tokens: int | None = None
        failure: BaseException | None = None
        ended = False
        try:
            while not ended and failure is None:
                drained: list[int] = []
                for kind, item in take_drain(steps, engine=engine, wait=sink.wait):
                    if kind == "end":
                        ended = True
                    elif kind == "error":
                        failure = item
                    else:
                        if item.prompt_token_ids is not None:
                            prompt_tokens = len(item.prompt_token_ids)
                        completion = item.outputs[0]
                        drained.extend(int(t) for t in completion.token_ids)
                        if completion.finish_reason is not None:
                            finish = str(completion.finish_reason)
                if drained:
                    hand_over(drained, decoder, times, sink.step)
        except EngineGone as gone:
            raise self._died(gone.reason) from None
        except BaseException:
            assert self._loop is not None
            self.last_abort = end_request(
                self._loop,
                engine,
                request_id,
                running=running,
                tasks=tasks,
                steps=steps,
                timeout=_ABORT_TIMEOUT_SECONDS,
            )
            raise
        if failure is not None:
            reason = dead_reason(engine, failure)
            if reason is not None:
                raise self._died(reason) from failure
            raise_translated(failure)
        running.result(_ABORT_TIMEOUT_SECONDS)
        ids = tuple(decoder.ids)
        text = self._decode(ids)
        reasoning = None
        if settings.enable_reasoning and self.profile.reasoning_parser == "qwen3":
            reasoning, text = native_reasoning(self._tokenizer, text)
        return BackendResult(
            token_ids=ids,
            text=text,
            native_reasoning=reasoning,
            timings=BackendTimings(
                generation_seconds=time.perf_counter() - started, prompt_tokens=prompt_tokens
            ),
            prompt_opened_reasoning=opened,
            finish_reason=finish,
            constrained=settings.schema is not None,
        )

    def can_batch(self, items: Sequence[BatchItem]) -> bool:
        """Always: each request keeps its own seed and sampling in vLLM's batch."""
        return True

    def generate_batch(
        self, items: Sequence[BatchItem], sink: BatchTokenSink
    ) -> list[BackendResult]:
        """Submit every item to the engine at once (see ``_batch``)."""
        return generate_batch(self, items, sink)

    def unload(self) -> None:
        """Shut the engine down, stop its loop thread and free its memory (idempotent)."""
        engine, loop = self._engine, self._loop
        self._engine, self._loop = None, None
        self._processor = None
        if engine is not None and loop is not None:

            async def shutdown() -> None:
                engine.shutdown()

            try:
                loop.call(shutdown(), _ABORT_TIMEOUT_SECONDS)
            finally:
                loop.stop()
        engine = None
        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass

    def runtime_metadata(self) -> dict[str, object]:
        """JSON-ready facts: engine, versions, device, mode, cache namespace, ``vllm_*`` fields."""
        import torch

        metadata: dict[str, object] = {
            "engine": VLLM_ENGINE_NAME,
            "engine_version": vllm_version(),
            "torch_version": str(torch.__version__),
            "device": "cpu" if self.on_cpu else "cuda:0",
            "device_name": self.device_name,  # NVML's (no CUDA context in this process)
            "load_seconds": round(self.load_seconds, 4),
            "loaded": self.loaded,
            "vllm_enforce_eager": self.enforce_eager,
            **execution_modes().metadata(),
        }
        metadata["vllm_execution_mode"] = self.mode
        metadata["vllm_memory_terms"] = memory_terms(self.profile)
        metadata["vllm_quantization_kernel"] = self.quantization_kernel
        metadata["vllm_engine_memory"] = dict(self.engine_memory)
        metadata["vllm_engine_load"] = self.load_stats.metadata()
        if self.compile_cache is not None:
            metadata.update(self.compile_cache.metadata())
        return metadata
