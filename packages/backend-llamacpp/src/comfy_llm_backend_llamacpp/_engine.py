"""Everything that touches llama.cpp: load, the decode loop, close.

Imported only when a backend is created, so ``import comfy_llm_backend_llamacpp``
works without llama-cpp-python. Uses llama-cpp-python 0.3.36's ``Llama`` for
the model, context and batch (``eval`` keeps its token count) and the public
C API it binds for the rest: libmtmd (``mtmd_init_from_file``,
``mtmd_bitmap_init`` from raw RGB, ``mtmd_tokenize``,
``mtmd_helper_eval_chunk_single``), the sampler chain (temperature, top-p,
seeded ``dist`` or greedy) and the vocabulary. ``Llama.create_chat_completion``
and ``MTMDChatHandler`` are not used: they return text, not token ids (the
reasoning parser needs the ids), fetch non-``data:`` image URLs with urllib,
decode images through stb_image, and rebuild the sampler per call.
"""

from __future__ import annotations

import codecs
import ctypes
import dataclasses
import gc
import logging
import time
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import llama_cpp
import numpy as np
from comfy_llm_residency.backend import BackendResult, BackendTimings
from llama_cpp import mtmd_cpp

from ._offload import OffloadPlan
from .errors import ENGINE_NAME, GenerationError, ModelLoadError, PromptTooLongError

if TYPE_CHECKING:
    from comfy_llm_residency.backend import GenerationSettings, TokenSink
    from comfy_llm_structured import ResponseSchema
    from PIL import Image

    from ._files import CheckedFiles

__all__ = [
    "SEED_MODULUS",
    "LoadedLlama",
    "close",
    "decode",
    "engine_facts",
    "fold_llama_seed",
    "generate",
    "gpu_offload_supported",
    "load",
]

logger = logging.getLogger("comfy_llm_backend_llamacpp")
_GGML_LOG_ERROR = 3


@llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
def _mtmd_log(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    """Libmtmd's log: errors to this package's logger, progress chatter dropped."""
    if level == _GGML_LOG_ERROR:
        logger.error("libmtmd: %s", text.decode("utf-8", errors="replace").rstrip())


# libmtmd prints every image slice to stderr by default; the callback lives as long as the module.
mtmd_cpp.mtmd_log_set(_mtmd_log, ctypes.c_void_p(0))
mtmd_cpp.mtmd_helper_log_set(_mtmd_log, ctypes.c_void_p(0))

#: llama.cpp's ``dist`` sampler takes a uint32 seed and reads 0xFFFFFFFF
#: (LLAMA_DEFAULT_SEED) as "pick a random one": seeds fold mod 2**32 - 1.
SEED_MODULUS = 0xFFFFFFFF
_PIECE_BYTES = 256


def fold_llama_seed(seed: int | None) -> int:
    """The uint32 ``dist`` seed: ``seed mod (2**32 - 1)``; None is LLAMA_DEFAULT_SEED (random)."""
    return llama_cpp.LLAMA_DEFAULT_SEED if seed is None else int(seed) % SEED_MODULUS


def gpu_offload_supported() -> bool:
    """Whether this llama.cpp build offloads layers (CUDA, Metal, Vulkan, ...)."""
    return bool(llama_cpp.llama_supports_gpu_offload())


@dataclasses.dataclass(slots=True)
class LoadedLlama:
    """A loaded model, its libmtmd context and facts read once.

    Attributes:
        llama: The llama-cpp-python model (context and batch inside).
        mtmd: The libmtmd context, or None for a text-only model.
        vocab: The llama.cpp vocabulary pointer.
        n_vocab: Logit width.
        n_ctx: Context size the model was loaded with.
        eog_ids: Ids that end generation.
        marker: libmtmd's media marker.
        add_bos: Whether tokenizing adds BOS.
        bos_text: The BOS token's text ('' when none).
        eos_text: The EOS token's text.
        plan: The GPU offload plan.
        llg_tokenizer: llguidance's tokenizer for this vocabulary (built on first use).
    """

    llama: Any
    mtmd: Any
    vocab: Any
    n_vocab: int
    n_ctx: int
    eog_ids: tuple[int, ...]
    marker: str
    add_bos: bool
    bos_text: str
    eos_text: str
    plan: OffloadPlan
    llg_tokenizer: Any = None


def _piece(vocab: Any, token: int, *, special: bool, buffer: Any = None) -> bytes:
    """A token's bytes; ``buffer`` (``_PIECE_BYTES`` long) is reused across a decode loop."""
    if buffer is None:
        buffer = ctypes.create_string_buffer(_PIECE_BYTES)
    size = llama_cpp.llama_token_to_piece(vocab, token, buffer, _PIECE_BYTES, 0, special)
    if size < 0:  # the piece is longer than the buffer: size is minus its length
        buffer = ctypes.create_string_buffer(-size)
        size = llama_cpp.llama_token_to_piece(vocab, token, buffer, -size, 0, special)
    return bytes(buffer.raw[: max(0, size)])


def _token_text(vocab: Any, token: int) -> str:
    if token < 0:
        return ""
    return _piece(vocab, token, special=True).decode("utf-8", errors="replace")


def load(
    files: CheckedFiles,
    *,
    label: str,
    context_tokens: int,
    plan: OffloadPlan,
    threads: int | None = None,
) -> LoadedLlama:
    """Load a checked model (and projector) into llama.cpp (``label`` names it in errors).

    Raises:
        ModelLoadError: llama.cpp or libmtmd refused the files.
    """
    model_path = str(files.model.path)
    try:
        llama = llama_cpp.Llama(
            model_path=model_path,
            n_gpu_layers=plan.gpu_layers,
            n_ctx=context_tokens,
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
        )
    except (ValueError, RuntimeError) as error:
        raise ModelLoadError(ENGINE_NAME, label, model_path, "model", str(error)) from error
    try:
        mtmd = _load_projector(llama, files, plan, label) if files.projector is not None else None
    except BaseException:
        llama.close()
        raise
    vocab = llama_cpp.llama_model_get_vocab(llama.model)
    n_vocab = int(llama_cpp.llama_vocab_n_tokens(vocab))
    eog = tuple(i for i in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, i))
    return LoadedLlama(
        llama=llama,
        mtmd=mtmd,
        vocab=vocab,
        n_vocab=n_vocab,
        n_ctx=int(llama.n_ctx()),
        eog_ids=eog,
        marker=mtmd_cpp.mtmd_default_marker().decode("utf-8"),
        add_bos=bool(llama_cpp.llama_vocab_get_add_bos(vocab)),
        bos_text=_token_text(vocab, int(llama_cpp.llama_vocab_bos(vocab))),
        eos_text=_token_text(vocab, int(llama_cpp.llama_vocab_eos(vocab))),
        plan=plan,
    )


def _load_projector(llama: Any, files: CheckedFiles, plan: OffloadPlan, label: str) -> Any:
    assert files.projector is not None
    path = str(files.projector.path)
    params = mtmd_cpp.mtmd_context_params_default()
    params.use_gpu = plan.mode != "none"
    params.print_timings = False
    params.n_threads = llama.n_threads
    params.warmup = False
    context = mtmd_cpp.mtmd_init_from_file(path.encode(), llama.model, params)
    if not context:
        raise ModelLoadError(ENGINE_NAME, label, path, "projector", "libmtmd refused it")
    if not mtmd_cpp.mtmd_support_vision(context):
        mtmd_cpp.mtmd_free(context)
        raise ModelLoadError(ENGINE_NAME, label, path, "projector", "it has no vision encoder")
    return context


def close(loaded: LoadedLlama) -> None:
    """Free the libmtmd context, then the model, context and batch; collect garbage."""
    if loaded.mtmd is not None:
        mtmd_cpp.mtmd_free(loaded.mtmd)
        loaded.mtmd = None
    loaded.llg_tokenizer = None
    loaded.llama.close()
    gc.collect()


def decode(loaded: LoadedLlama, ids: Sequence[int]) -> str:
    """Ids to text without special (CONTROL) tokens."""
    data = b"".join(_piece(loaded.vocab, int(i), special=False) for i in ids)
    return data.decode("utf-8", errors="replace")


def _bitmaps(images: Sequence[Image.Image]) -> list[Any]:
    """Libmtmd bitmaps from raw RGB pixels (no image decoder in C++ sees the bytes)."""
    bitmaps = []
    try:
        for image in images:
            rgb = image.convert("RGB")
            pixels = rgb.tobytes()
            buffer = (ctypes.c_uint8 * len(pixels)).from_buffer_copy(pixels)
            bitmap = mtmd_cpp.mtmd_bitmap_init(rgb.width, rgb.height, buffer)
            if not bitmap:
                raise GenerationError("image", f"libmtmd refused a {rgb.width}x{rgb.height} image")
            bitmaps.append(bitmap)
    except BaseException:
        for bitmap in bitmaps:
            mtmd_cpp.mtmd_bitmap_free(bitmap)
        raise
    return bitmaps


def _prefill(
    loaded: LoadedLlama, prompt: str, images: Sequence[Image.Image], sink: TokenSink
) -> int:
    """Evaluate the prompt (text and images) and return the positions it took."""
    llama = loaded.llama
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(llama.ctx), True)
    llama.reset()
    if loaded.mtmd is None:
        tokens = llama.tokenize(prompt.encode("utf-8"), add_bos=loaded.add_bos, special=True)
        if len(tokens) >= loaded.n_ctx:
            raise PromptTooLongError(len(tokens), loaded.n_ctx)
        for start in range(0, len(tokens), llama.n_batch):
            sink.wait()  # a cancel point during prefill
            llama.eval(tokens[start : start + llama.n_batch])
        return int(llama.n_tokens)
    return _prefill_mtmd(loaded, prompt, images, sink)


def _prefill_mtmd(
    loaded: LoadedLlama, prompt: str, images: Sequence[Image.Image], sink: TokenSink
) -> int:
    llama = loaded.llama
    bitmaps = _bitmaps(images)
    chunks = mtmd_cpp.mtmd_input_chunks_init()
    try:
        text = mtmd_cpp.mtmd_input_text()
        encoded = prompt.encode("utf-8")
        text.text, text.text_len = encoded, len(encoded)
        text.add_special, text.parse_special = loaded.add_bos, True
        array = (mtmd_cpp.mtmd_bitmap_p_ctypes * max(1, len(bitmaps)))(*bitmaps)
        status = mtmd_cpp.mtmd_tokenize(
            loaded.mtmd, chunks, ctypes.byref(text), array, len(bitmaps)
        )
        if status != 0:
            raise GenerationError("prompt", f"libmtmd could not tokenize it (status {status})")
        needed = int(mtmd_cpp.mtmd_helper_get_n_pos(chunks))
        if needed >= loaded.n_ctx:
            raise PromptTooLongError(needed, loaded.n_ctx)
        count = int(mtmd_cpp.mtmd_input_chunks_size(chunks))
        n_past = 0
        for index in range(count):
            sink.wait()  # a cancel point during prefill
            chunk = mtmd_cpp.mtmd_input_chunks_get(chunks, index)
            # in/out: text chunks add to it, image chunks set it (mtmd-helper.cpp:240)
            new_past = llama_cpp.llama_pos(n_past)
            status = mtmd_cpp.mtmd_helper_eval_chunk_single(
                loaded.mtmd, llama.ctx, chunk, n_past, 0, llama.n_batch,
                index == count - 1, ctypes.byref(new_past),
            )  # fmt: skip
            if status != 0:
                raise GenerationError("prompt", f"llama.cpp failed on prompt chunk {index}")
            n_past = int(new_past.value)
        llama.n_tokens = n_past
        return n_past
    finally:
        mtmd_cpp.mtmd_input_chunks_free(chunks)
        for bitmap in bitmaps:
            mtmd_cpp.mtmd_bitmap_free(bitmap)


def _sampler(settings: GenerationSettings) -> Any:
    """Temperature, then top-p, then a seeded draw (Transformers' order); greedy at 0."""
    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    if settings.temperature == 0:
        llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_greedy())
        return chain
    llama_cpp.llama_sampler_chain_add(
        chain, llama_cpp.llama_sampler_init_temp(settings.temperature)
    )
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_top_p(settings.top_p, 1))
    seed = fold_llama_seed(settings.seed)
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_dist(seed))
    return chain


def _constraint(loaded: LoadedLlama, schema: ResponseSchema | None, gate_id: int | None) -> Any:
    if schema is None:
        return None
    from comfy_llm_structured import JsonConstraint
    from llguidance.llamacpp import lltokenizer_from_vocab

    if loaded.llg_tokenizer is None:
        with warnings.catch_warnings():
            # llguidance 1.x's adapter calls llama_token_get_attr, which
            # llama-cpp-python 0.3.36 deprecates for llama_vocab_get_attr (same function)
            warnings.simplefilter("ignore", DeprecationWarning)
            loaded.llg_tokenizer = lltokenizer_from_vocab(
                loaded.vocab, n_vocab=loaded.n_vocab, eos_token=list(loaded.eog_ids)
            )
    return JsonConstraint(schema, loaded.llg_tokenizer, loaded.n_vocab, gate_id=gate_id)


def generate(
    loaded: LoadedLlama,
    *,
    prompt: str,
    images: Sequence[Image.Image],
    opened: bool,
    settings: GenerationSettings,
    gate_id: int | None,
    sink: TokenSink,
) -> BackendResult:
    """Prefill the prompt, then sample one token at a time until a stop or the limit.

    The sink's ``token`` runs after every token and before the next is
    evaluated, so an exception there (Cancel) stops generation between two
    tokens; its ``wait`` runs between prefill batches.

    Raises:
        PromptTooLongError: The prompt does not fit the context.
        Exception: Whatever ``sink`` raised, unchanged.
    """
    started = time.perf_counter()
    sink.prompt_opened(opened)
    prompt_positions = _prefill(loaded, prompt, images, sink)
    limit = min(settings.max_new_tokens, loaded.n_ctx - prompt_positions)
    constraint = _constraint(loaded, settings.schema, gate_id)
    chain = _sampler(settings)
    llama, vocab, eog = loaded.llama, loaded.vocab, frozenset(loaded.eog_ids)
    ids: list[int] = []
    text, utf8 = "", codecs.getincrementaldecoder("utf-8")(errors="replace")
    buffer = ctypes.create_string_buffer(_PIECE_BYTES)
    finish = "length"
    try:
        while len(ids) < limit:
            if constraint is not None:
                _mask(llama, loaded.n_vocab, constraint.allowed(ids))
            token = int(llama_cpp.llama_sampler_sample(chain, llama.ctx, -1))
            ids.append(token)
            stop = token in eog
            final = stop or len(ids) >= limit
            text += utf8.decode(_piece(vocab, token, special=False, buffer=buffer), final=final)
            sink.token(token, text)
            if stop:
                finish = "stop"
                break
            if not final:
                llama.eval([token])
    finally:
        llama_cpp.llama_sampler_free(chain)
    return BackendResult(
        token_ids=tuple(ids),
        text=text,  # the incremental decode of every id, final on the last: decode(ids)
        native_reasoning=None,
        timings=BackendTimings(
            generation_seconds=time.perf_counter() - started, prompt_tokens=prompt_positions
        ),
        prompt_opened_reasoning=opened,
        finish_reason=finish,
        constrained=constraint is not None,
    )


def _mask(llama: Any, n_vocab: int, allowed: np.ndarray | None) -> None:
    """Set every logit the grammar forbids to minus infinity, in llama.cpp's own buffer."""
    if allowed is None:
        return
    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llama.ctx, -1), shape=(n_vocab,))
    logits[~allowed] = -np.inf


def engine_facts() -> dict[str, object]:
    """The engine's name and version, and whether this build offloads to a GPU."""
    return {
        "engine": "llama.cpp",
        "llama_cpp_python_version": str(llama_cpp.__version__),
        "gpu_offload_supported": gpu_offload_supported(),
    }
