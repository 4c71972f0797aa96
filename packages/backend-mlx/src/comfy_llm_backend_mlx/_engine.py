"""Everything that touches MLX and MLX-VLM: loading, the decode loop, metadata.

Imported only when a backend is created, so ``import comfy_llm_backend_mlx``
works on machines without MLX. Uses MLX-VLM's public pieces: ``load``,
``apply_chat_template``, ``prepare_inputs``, ``generate_step`` (the token
loop, with its hook for forcing the next token), ``wired_limit`` and the
streaming detokenizer.
"""

from __future__ import annotations

import dataclasses
import gc
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx_vlm
from comfy_llm_core import SEED_BITS_UINT64, fold_seed
from comfy_llm_inputs import template_wrote_bos
from comfy_llm_reasoning import THINK_CLOSE, THINK_OPEN, TokenVocabulary, prompt_opens_reasoning
from comfy_llm_residency.backend import (
    BackendResult,
    BackendTimings,
    GenerationSettings,
    TokenSink,
)
from mlx.utils import tree_flatten
from mlx_vlm import load as _mlx_vlm_load
from mlx_vlm.generate import generate_step, generation_stream, wired_limit
from mlx_vlm.prompt_utils import apply_chat_template
from mlx_vlm.tokenizer_utils import make_streaming_detokenizer
from mlx_vlm.utils import prepare_inputs, should_add_special_tokens

from ._thinking import ThinkingBudget
from .errors import ENGINE_NAME, ModelLoadError

__all__ = [
    "LoadedModel",
    "encoded_prompt",
    "clear_cache",
    "engine_versions",
    "generate",
    "load_snapshot",
    "memory_snapshot",
]

_TEMPLATE_NEWLINE_BEFORE_CLOSE = "\n" + THINK_CLOSE


def encoded_prompt(model: Any, processor: Any, prompt_text: str) -> tuple[str, bool]:
    """The text ``prepare_inputs`` encodes and its ``add_special_tokens``: one BOS.

    Mistral 3's, LFM2-VL's and Gemma 3's templates write ``bos_token``
    (:func:`comfy_llm_inputs.template_wrote_bos`), and their tokenizers add
    another when asked for special tokens. MLX-VLM 0.7.10 cannot be told not
    to ask: ``process_inputs`` forwards ``add_special_tokens`` only to a
    processor whose signature names it (mlx_vlm/utils.py:1773-1774), which
    neither its own Mistral 3 / LLaVA-NeXT / Gemma 3 processors nor
    Transformers' name, so the tokenizer's default (add them) applies, even
    where ``should_add_special_tokens`` (utils.py:2346-2357) says no. So a
    BOS the template wrote is dropped from the text when the tokenizer adds
    one itself (what the llama.cpp engine does too), and encoding adds it.
    The rendered text itself (the reasoning check, the metadata) is unchanged.
    """
    tokenizer = getattr(processor, "tokenizer", processor)
    bos = getattr(tokenizer, "bos_token", None)
    if isinstance(bos, str) and template_wrote_bos(prompt_text, bos) and _adds_bos(tokenizer):
        return prompt_text[len(bos) :], True
    return prompt_text, bool(should_add_special_tokens(model.config.model_type, processor))


def _adds_bos(tokenizer: Any) -> bool:
    """Whether encoding with special tokens puts the BOS first."""
    bos_id = getattr(tokenizer, "bos_token_id", None)
    return bos_id is not None and list(tokenizer("a")["input_ids"][:1]) == [bos_id]


@dataclasses.dataclass(slots=True)
class LoadedModel:
    r"""A model and processor MLX-VLM loaded, plus facts read once at load.

    Attributes:
        model: The MLX-VLM model.
        processor: Its processor (tokenizer, image processor, chat template).
        tokenizer: The Hugging Face tokenizer inside the processor.
        vocabulary: The token vocabulary for the reasoning parser.
        stop_ids: Ids that end generation (the end-of-turn tokens).
        special_ids: Ids the streamed text skips.
        open_id: The id of ``<think>``, or None.
        close_id: The id of ``</think>``, or None.
        newline_id: The single-token ``"\n"`` forced before ``</think>`` when
            the chat template writes one there, else None.
        dtype: The dtype of the loaded weights (``"bfloat16"``, ...).
    """

    model: Any
    processor: Any
    tokenizer: Any
    vocabulary: TokenVocabulary
    stop_ids: frozenset[int]
    special_ids: list[int]
    open_id: int | None
    close_id: int | None
    newline_id: int | None
    dtype: str


def load_snapshot(path: Path, profile_id: str) -> LoadedModel:
    """Load a completed local snapshot with MLX-VLM (never a Hub id).

    Args:
        path: The completed snapshot directory (it must exist: MLX-VLM would
            treat a missing path as a Hub repository id and download it).
        profile_id: The profile being loaded (for the error).

    Returns:
        The loaded model and the facts the generation loop needs.

    Raises:
        ModelLoadError: The directory is missing or MLX-VLM failed to load it.
    """
    directory = Path(path).resolve()
    if not directory.is_dir():
        raise ModelLoadError(ENGINE_NAME, profile_id, str(directory), "model", "no such directory")
    try:
        model, processor = _mlx_vlm_load(str(directory), trust_remote_code=False)
    except Exception as error:  # MLX-VLM raises many kinds; report them all the same way.
        reason = f"{type(error).__name__}: {error}"
        raise ModelLoadError(ENGINE_NAME, profile_id, str(directory), "model", reason) from error
    tokenizer = getattr(processor, "tokenizer", processor)
    vocabulary = TokenVocabulary.from_tokenizer(tokenizer)
    open_id = vocabulary.id_of(THINK_OPEN)
    close_id = vocabulary.id_of(THINK_CLOSE)
    return LoadedModel(
        model=model,
        processor=processor,
        tokenizer=tokenizer,
        vocabulary=vocabulary,
        stop_ids=_stop_ids(tokenizer),
        special_ids=sorted(vocabulary.special_ids),
        open_id=open_id,
        close_id=close_id,
        newline_id=_newline_before_close(processor, tokenizer) if close_id is not None else None,
        dtype=_weights_dtype(model),
    )


def _stop_ids(tokenizer: Any) -> frozenset[int]:
    """Return the end-of-generation ids MLX-VLM resolved at load, plus the tokenizer's EOS."""
    criteria = getattr(tokenizer, "stopping_criteria", None)
    ids = {int(token) for token in (getattr(criteria, "eos_token_ids", None) or ())}
    eos = getattr(tokenizer, "eos_token_id", None)
    if isinstance(eos, int):
        ids.add(eos)
    return frozenset(ids)


def _newline_before_close(processor: Any, tokenizer: Any) -> int | None:
    r"""Return the ``"\n"`` id when the chat template writes ``"\n</think>"``, else None."""
    templates = (
        getattr(processor, "chat_template", None),
        getattr(tokenizer, "chat_template", None),
    )
    if not any(isinstance(t, str) and _TEMPLATE_NEWLINE_BEFORE_CLOSE in t for t in templates):
        return None
    ids = tokenizer.encode("\n", add_special_tokens=False)
    return int(ids[0]) if len(ids) == 1 else None


def _weights_dtype(model: Any) -> str:
    """Return the dtype name of the model's first weight (``"float32"``, ``"bfloat16"``, ...)."""
    flat: Any = tree_flatten(model.parameters())
    for _name, value in flat:
        return str(value.dtype).removeprefix("mlx.core.")
    return "unknown"


class _ForcedToken:
    """The hook ``generate_step`` reads after each token: the token to force next, if any."""

    __slots__ = ("next_id",)

    def __init__(self) -> None:
        self.next_id: int | None = None

    def pop_forced_token_id(self) -> int | None:
        """Return and clear the token to force (``generate_step`` calls this)."""
        token_id, self.next_id = self.next_id, None
        return token_id


class _TextSoFar:
    """The decoded text after each token, for the callback's live preview.

    Uses MLX-VLM's streaming detokenizer (constant work per token); if it
    cannot map a token (an id beyond the tokenizer's vocabulary, which a
    model with a padded embedding can sample), falls back to decoding the
    whole sequence each time.
    """

    def __init__(self, loaded: LoadedModel) -> None:
        self._detokenizer = make_streaming_detokenizer(loaded.processor)
        self._tokenizer = loaded.tokenizer
        self._special = frozenset(loaded.special_ids)
        self._visible: list[int] = []
        self._fallback = False

    def add(self, token_id: int, *, final: bool) -> str:
        """Add one token and return the text so far (complete when ``final``)."""
        if token_id not in self._special:
            self._visible.append(token_id)
        if not self._fallback:
            try:
                self._detokenizer.add_token(token_id, skip_special_token_ids=self._special)
                if final:
                    self._detokenizer.finalize()
                return str(self._detokenizer.text)
            except (IndexError, KeyError, TypeError):
                self._fallback = True
        return str(self._tokenizer.decode(self._visible, skip_special_tokens=True))


def generate(
    loaded: LoadedModel,
    *,
    messages: list[dict[str, Any]],
    images: Sequence[Any],
    template_kwargs: dict[str, object],
    settings: GenerationSettings,
    cap_thinking: bool,
    sink: TokenSink,
    schema_mask: Callable[[Any, Any], Any] | None = None,
) -> BackendResult:
    """Render the prompt, run the decode loop and return the generated ids.

    Args:
        loaded: The loaded model.
        messages: Chat messages (system, user) with typed parts: MLX-VLM keeps
            an image part where it stands (``mlx_vlm/prompt_utils.py:434-451``);
            told only a count it would place images by its own per-model table
            (``:33-130``: after the text for Qwen2-VL, LLaVA, Gemma 3, ...),
            unlike Transformers and vLLM.
        images: Images then video frames, in order.
        template_kwargs: Extra chat-template arguments (``enable_thinking``).
        settings: Sampling settings.
        cap_thinking: Cap reasoning at half of ``max_new_tokens``.
        sink: Gets the prompt's reasoning state, then each token with the
            text so far; its exceptions propagate unchanged and stop generation.
        schema_mask: The response schema's logits processor, or None.

    Returns:
        The generated ids (boundary and stop tokens kept), the decoded text,
        timings and whether the prompt opened the reasoning block.

    Raises:
        Exception: Whatever ``sink`` raised.
    """
    started = time.perf_counter()
    model, processor = loaded.model, loaded.processor
    chat_kwargs: dict[str, Any] = dict(template_kwargs)
    prompt_text: str = apply_chat_template(  # type: ignore[assignment]
        processor, model.config, messages, num_images=len(images), **chat_kwargs
    )
    opened = prompt_opens_reasoning(prompt_text)
    sink.prompt_opened(opened)  # the live view's split
    encoded, special = encoded_prompt(model, processor, prompt_text)
    prepared = prepare_inputs(
        processor,
        images=list(images) or None,
        prompts=encoded,
        image_token_index=getattr(model.config, "image_token_index", None),
        add_special_tokens=special,
    )
    input_ids = prepared["input_ids"]
    extra = {
        key: value
        for key, value in prepared.items()
        if key not in ("input_ids", "pixel_values", "attention_mask")
    }
    budget = _budget(loaded, settings, opened) if cap_thinking else None
    forced = _ForcedToken()
    text_so_far = _TextSoFar(loaded)
    # mx.random.seed stores a uint64: every ComfyUI seed is its own stream (comfy_llm_core)
    seed = fold_seed(settings.seed, SEED_BITS_UINT64)
    if seed is not None:
        mx.random.seed(seed)
    reset_peak = getattr(mx, "reset_peak_memory", None)
    if reset_peak is not None:
        reset_peak()

    ids: list[int] = []
    finish_reason = "length"
    streams: list[Any] = [generation_stream]
    with wired_limit(model, streams):
        steps = generate_step(
            input_ids,
            model,
            prepared.get("pixel_values"),
            prepared.get("attention_mask"),
            max_tokens=settings.max_new_tokens,
            temperature=float(settings.temperature),
            top_p=float(settings.top_p),
            seed=seed,
            thinking_budget_criteria=forced,
            logits_processors=[schema_mask] if schema_mask is not None else None,
            **extra,
        )
        try:
            for token, _logprobs in steps:
                token_id = int(token)
                ids.append(token_id)
                if budget is not None:
                    budget.observe(token_id)
                    forced.next_id = budget.forced()
                stop = token_id in loaded.stop_ids
                final = stop or len(ids) >= settings.max_new_tokens
                sink.token(token_id, text_so_far.add(token_id, final=final))
                if stop:
                    finish_reason = "stop"
                    break
        finally:
            steps.close()
    text = loaded.tokenizer.decode(ids, skip_special_tokens=True) if ids else ""
    return BackendResult(
        token_ids=tuple(ids),
        text=text,
        native_reasoning=None,
        timings=_timings(started, int(input_ids.size)),
        prompt_opened_reasoning=opened,
        finish_reason=finish_reason,
        constrained=schema_mask is not None,
    )


def _budget(
    loaded: LoadedModel, settings: GenerationSettings, opened: bool
) -> ThinkingBudget | None:
    """Build the thinking budget, or None when the vocabulary has no think markers."""
    if loaded.open_id is None or loaded.close_id is None:
        return None
    tokenizer = loaded.tokenizer

    def ends_line(token_id: int) -> bool:
        return str(tokenizer.decode([token_id])).endswith("\n")

    return ThinkingBudget(
        max_new_tokens=settings.max_new_tokens,
        open_id=loaded.open_id,
        close_id=loaded.close_id,
        newline_id=loaded.newline_id,
        starts_inside=opened,
        ends_line=ends_line,
    )


def _timings(started: float, prompt_tokens: int) -> BackendTimings:
    """Wall time since ``started`` (the sink measures the token times)."""
    return BackendTimings(
        generation_seconds=time.perf_counter() - started, prompt_tokens=prompt_tokens
    )


def clear_cache() -> None:
    """Collect garbage and release MLX's buffer cache."""
    gc.collect()
    clear = getattr(mx, "clear_cache", None)
    if clear is None:  # older MLX spelled it under mx.metal
        clear = getattr(getattr(mx, "metal", None), "clear_cache", None)
    if clear is not None:
        clear()


def engine_versions() -> dict[str, object]:
    """Return the engine's name, versions and device."""
    return {
        "engine": "mlx-vlm",
        "mlx_vlm_version": str(getattr(mlx_vlm, "__version__", "unknown")),
        "mlx_version": str(getattr(mx, "__version__", "unknown")),
        "device": _device_name(),
        "mlx_device": str(mx.default_device()),
    }


def _device_name() -> str:
    """Return ``"gpu"`` (Metal) or ``"cpu"``: where MLX runs by default."""
    device_type = getattr(mx.default_device(), "type", None)
    return str(getattr(device_type, "name", device_type))


def memory_snapshot() -> dict[str, object]:
    """Return MLX's active, cached and peak memory in bytes (those this MLX exposes)."""
    readings: dict[str, object] = {}
    for key, name in (
        ("active_memory_bytes", "get_active_memory"),
        ("cache_memory_bytes", "get_cache_memory"),
        ("peak_memory_bytes", "get_peak_memory"),
    ):
        reader = getattr(mx, name, None)
        if reader is not None:
            readings[key] = int(reader())
    return readings
