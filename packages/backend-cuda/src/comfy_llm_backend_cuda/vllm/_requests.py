"""One vLLM request's pieces shared by single requests and batches.

The raw prompt and how vLLM tokenizes it, images capped to the processor's
size, sampling parameters (the seed folded into vLLM's int64 seed storage),
request ids, the decode rate, and the translation of vLLM's errors into
this package's. Nothing here holds engine
state, so both the backend and the batch module import it (one way).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from typing import TYPE_CHECKING, Any, Final

from comfy_llm_core import SEED_BITS_INT64, fold_seed
from comfy_llm_inputs import template_wrote_bos

from ..errors import PromptTooLongError

if TYPE_CHECKING:
    from comfy_llm_residency.backend import GenerationSettings

__all__ = [
    "CAPTION_STREAM_INTERVAL",
    "EnginePrompt",
    "capped_image",
    "engine_prompt",
    "VLLM_SEED_BITS",
    "next_request_id",
    "raise_translated",
    "sampling_params",
    "translate_error",
]

#: vLLM's Model Runner V2 (the CUDA default in 0.32) stores per-request seeds in an
#: int64 numpy array (v1/worker/gpu/sample/states.py:26,53-57): 2**63 and above
#: overflow inside EngineCore, which is fatal. Seeds are folded to 63 bits.
VLLM_SEED_BITS: Final = SEED_BITS_INT64
#: Tokens vLLM coalesces per streamed output of a caption batch item
#: (SamplingParams.stream_interval; first and last outputs come at once).
CAPTION_STREAM_INTERVAL: Final = 8
_numbers = itertools.count(1)


def next_request_id() -> str:
    """A request id unique in this process (``comfy-llm-<n>``)."""
    return f"comfy-llm-{next(_numbers)}"


@dataclasses.dataclass(frozen=True, slots=True)
class EnginePrompt:
    """What ``AsyncLLM.generate`` is given for one rendered prompt.

    Attributes:
        prompt: vLLM's raw prompt (``prompt`` and, with images,
            ``multi_modal_data``).
        tokenization: ``tokenization_kwargs`` for ``generate``; None keeps
            vLLM's defaults.
    """

    prompt: dict[str, Any]
    tokenization: dict[str, Any] | None


def engine_prompt(rendered: str, images: list[Any], tokenizer: Any) -> EnginePrompt:
    """The raw prompt for ``rendered`` and how vLLM must tokenize it.

    vLLM tokenizes a raw prompt with ``add_special_tokens=True``, multimodal
    ones included (multimodal/processing/context.py:524-528
    ``get_default_tok_params``, used by renderers/base.py:478-481 for every
    completion prompt); ``tokenization_kwargs`` reaches that call through
    v1/engine/input_processor.py:421-423 and renderers/params.py:297-299.
    A template that wrote the tokenizer's BOS itself
    (:func:`comfy_llm_inputs.template_wrote_bos`) is encoded without special
    tokens, so the engine reads one BOS, as the Transformers engine does.
    """
    prompt: dict[str, Any] = {"prompt": rendered}
    if images:
        prompt["multi_modal_data"] = {"image": images}
    wrote = template_wrote_bos(rendered, getattr(tokenizer, "bos_token", None))
    return EnginePrompt(prompt, {"add_special_tokens": False} if wrote else None)


def sampling_params(settings: GenerationSettings, *, stream_interval: int | None = None) -> Any:
    """VLLM ``SamplingParams`` for one request.

    DELTA outputs with ``detokenize=False`` (ids are decoded here), the seed
    folded to :data:`VLLM_SEED_BITS`, greedy at temperature 0, the response
    schema as vLLM's structured outputs, and ``stream_interval`` when given.
    """
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    greedy = settings.temperature == 0
    extra: dict[str, Any] = {}
    schema = settings.schema
    if schema is not None:  # vLLM's own constrained decoding (the guided_* fields are gone)
        from vllm.sampling_params import StructuredOutputsParams

        extra["structured_outputs"] = StructuredOutputsParams(
            json=schema.schema, disable_any_whitespace=True
        )
    if stream_interval is not None:
        extra["stream_interval"] = int(stream_interval)
    if settings.min_new_tokens:
        extra["min_tokens"] = int(settings.min_new_tokens)
    return SamplingParams(
        max_tokens=settings.max_new_tokens,
        temperature=0.0 if greedy else float(settings.temperature),
        top_p=1.0 if greedy else float(settings.top_p),
        seed=fold_seed(settings.seed, VLLM_SEED_BITS),
        output_kind=RequestOutputKind.DELTA,
        detokenize=False,
        skip_special_tokens=False,
        **extra,
    )


_LIMIT = re.compile(r"maximum (?:model|context) length (?:of|is) (\d+)")
_PROMPT_LENGTH = re.compile(r"\(length (\d+)\)|contains (?:at least )?(\d+) input tokens")


def raise_translated(error: BaseException) -> None:
    """Raise :func:`translate_error`'s answer, chained to ``error`` when it is another.

    ``raise error from error`` would make the error its own cause and hide
    the one vLLM chained to it (``EngineGenerateError`` from the real failure).
    """
    translated = translate_error(error)
    if translated is error:
        raise error
    raise translated from error


def translate_error(error: BaseException) -> BaseException:
    """Turn vLLM's prompt-length refusal into :class:`PromptTooLongError`; pass the rest.

    vLLM 0.32 raises ``VLLMValidationError`` (not a ``ValueError``) from two
    places with different words: its renderer ("This model's maximum context
    length is M tokens. However, your prompt contains [at least] N input
    tokens ...", ``parameter="input_tokens"``, or an upper bound on
    characters, ``parameter="input_text"``) and its input processor ("The
    decoder prompt (length N) is longer than the maximum model length of M").
    """
    message = str(error)
    limit = _LIMIT.search(message)
    if limit is None or "prompt" not in message:
        return error
    context = int(limit.group(1))
    length = _PROMPT_LENGTH.search(message)
    if getattr(error, "parameter", None) == "input_tokens" and isinstance(
        getattr(error, "value", None), int
    ):
        prompt_tokens = int(error.value)  # type: ignore[attr-defined]
    elif length is not None:
        prompt_tokens = int(length.group(1) or length.group(2))
    else:  # only a character count is known: the prompt is over the limit
        prompt_tokens = context + 1
    return PromptTooLongError(prompt_tokens, context)


def capped_image(image: Any, max_pixels: int) -> Any:
    """The image in RGB, downscaled (aspect kept) to at most ``max_pixels`` pixels.

    vLLM's processor would resize it to its cap anyway (smart_resize); doing
    it here first keeps the multi-megapixel original out of vLLM's
    preprocessing thread and its IPC.
    """
    rgb = image if image.mode == "RGB" else image.convert("RGB")
    width, height = rgb.size
    if width * height <= max_pixels:
        return rgb
    scale = math.sqrt(max_pixels / (width * height))
    size = (max(1, math.floor(width * scale)), max(1, math.floor(height * scale)))
    from PIL import Image

    return rgb.resize(size, Image.Resampling.BICUBIC)
