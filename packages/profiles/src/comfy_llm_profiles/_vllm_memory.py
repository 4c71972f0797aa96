"""What a vLLM engine takes on the GPU, term by term.

vLLM is given an explicit KV-cache budget (``kv_cache_memory_bytes``), so its
footprint is that budget plus what it allocates around it: the weights, the
activation peak its profile run measures (``max_num_batched_tokens`` through
the text model, the sampler's logits, the vision encoder), the CUDA-graph
pool in throughput mode and the engine-core process's own CUDA context and
workspaces. Each term is kept separately in the profile's backend options
(``memory_<term>_bytes``) so the backend hands vLLM exactly the KV term and
reports every term (``vllm_memory_terms``); the estimate admission checks is
their sum::

    weights    = runtime_weights (no overhead factor: the terms below are it)
    kv         = 2 x attention_layers x kv_heads x head_dim x kv_element_bytes x context
                 (one sequence of the full context; vLLM refuses to start when
                 its KV cache cannot hold one)
               + linear-attention state x max_num_seqs (Gated DeltaNet layers
                 keep a fixed recurrent + conv state per running sequence)
    activation = max_num_batched_tokens x (4 x hidden + 2 x intermediate) x 2 bytes
               + max_num_seqs x vocab x 4 bytes (float32 logits)
               + VISION_ENCODER_BYTES when the model has a vision tower
    cudagraph  = CUDAGRAPH_POOL_BYTES (throughput mode captures graphs; auto
                 promotes a process to throughput, so it is always reserved)
    context    = CUDA_CONTEXT_BYTES (the engine-core process's CUDA context,
                 cuBLAS/NCCL workspaces; it lives in its own process)

The fixed allowances are deliberately round: they are what this project
budgets, not measurements of one GPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "CUDAGRAPH_POOL_BYTES",
    "CUDA_CONTEXT_BYTES",
    "MAX_NUM_BATCHED_TOKENS",
    "MAX_NUM_SEQS",
    "MEMORY_TERMS",
    "VISION_ENCODER_BYTES",
    "vllm_memory_terms",
]

_MIB: Final = 1024**2
_GIB: Final = 1024**3
#: vLLM's own default for AsyncLLM (SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS, 0.32),
#: passed explicitly so the activation term and the engine agree.
MAX_NUM_BATCHED_TOKENS: Final = 2048
#: Requests the engine schedules together (a caption batch's width).
MAX_NUM_SEQS: Final = 32
VISION_ENCODER_BYTES: Final = 512 * _MIB
CUDAGRAPH_POOL_BYTES: Final = 1 * _GIB
CUDA_CONTEXT_BYTES: Final = 768 * _MIB
#: The terms, in the order they are reported; each is ``memory_<term>_bytes`` in the options.
MEMORY_TERMS: Final = ("weights", "kv", "activation", "cudagraph", "context")


def _text(config: Mapping[str, Any]) -> Mapping[str, Any]:
    text = config.get("text_config")
    return text if isinstance(text, Mapping) else config


def _int(section: Mapping[str, Any], key: str) -> int:
    value = section.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _linear_state_bytes(text: Mapping[str, Any], element_bytes: int) -> int:
    """One sequence's Gated DeltaNet state over every linear-attention layer."""
    layer_types = text.get("layer_types")
    if not isinstance(layer_types, list):
        return 0
    layers = sum(1 for kind in layer_types if kind == "linear_attention")
    value_heads = _int(text, "linear_num_value_heads")
    key_heads = _int(text, "linear_num_key_heads")
    key_dim = _int(text, "linear_key_head_dim")
    value_dim = _int(text, "linear_value_head_dim")
    kernel = _int(text, "linear_conv_kernel_dim")
    recurrent = value_heads * key_dim * value_dim
    conv = (2 * key_heads * key_dim + value_heads * value_dim) * max(0, kernel - 1)
    return layers * (recurrent + conv) * element_bytes


def vllm_memory_terms(
    config: Mapping[str, Any],
    *,
    runtime_weight_bytes: int,
    attention_kv_bytes: int,
    kv_element_bytes: int,
    max_num_seqs: int = MAX_NUM_SEQS,
    max_num_batched_tokens: int = MAX_NUM_BATCHED_TOKENS,
) -> dict[str, int]:
    """The five terms (bytes) of a vLLM engine's footprint; see the module docstring.

    Args:
        config: The parsed config.json.
        runtime_weight_bytes: Weights as they sit on the device.
        attention_kv_bytes: Full-attention KV for one sequence of the whole context.
        kv_element_bytes: Bytes per KV (and linear-state) element.
        max_num_seqs: Sequences the engine runs at once.
        max_num_batched_tokens: Tokens of one engine step (the activation peak).

    Returns:
        ``{term: bytes}`` in :data:`MEMORY_TERMS` order.
    """
    text = _text(config)
    hidden = _int(text, "hidden_size")
    intermediate = _int(text, "intermediate_size") or 4 * hidden
    vocab = _int(text, "vocab_size") or _int(config, "vocab_size")
    activation = max_num_batched_tokens * (4 * hidden + 2 * intermediate) * 2
    activation += max_num_seqs * vocab * 4
    if isinstance(config.get("vision_config"), Mapping):
        activation += VISION_ENCODER_BYTES
    kv = attention_kv_bytes + _linear_state_bytes(text, kv_element_bytes) * max_num_seqs
    return {
        "weights": int(runtime_weight_bytes),
        "kv": int(kv),
        "activation": int(activation),
        "cudagraph": CUDAGRAPH_POOL_BYTES,
        "context": CUDA_CONTEXT_BYTES,
    }
