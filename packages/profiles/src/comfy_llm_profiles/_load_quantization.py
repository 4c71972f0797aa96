"""Quantizing an unquantized checkpoint as it loads: bitsandbytes 8-bit and NF4 (issue 30).

A *load quantization* is asked for, not detected: ``owner/model:nf4`` (or
``:int8``, the ``:<quantization>`` form a GGUF repository's file is picked
with) keeps the repository's safetensors and has the engine quantize its
linear layers while they load. The profile records it as its
``quantization_method`` (``bnb_nf4``, ``bnb_int8``: names no checkpoint
format is detected as, so a profile still says which of the two it is), and
the id hashes it: the quantized and the full-precision profile of one commit
are two profiles.

What the weights cost once loaded, read from the installed libraries
(Transformers 5.24, bitsandbytes 0.50.2), per parameter of a quantized layer:

* **NF4**: two 4-bit values per byte plus one float32 ``absmax`` per block of
  64 (``bitsandbytes/nn/modules.py`` ``Params4bit.__new__``: ``blocksize = 64``
  by default; ``backends/cuda/ops.py`` ``quantize_4bit``: ``absmax`` float32 of
  ``ceil(n / blocksize)``, ``out`` of ``(n + 1) // 2`` bytes): 0.5 + 4/64 =
  0.5625 bytes. Transformers leaves double quantization off
  (``BitsAndBytesConfig.bnb_4bit_use_double_quant=False``).
* **8-bit** (LLM.int8()): one int8 per weight plus one float32 scale per
  output row (``backends/cuda/ops.py`` ``int8_vectorwise_quant``: ``row_stats``
  float32 of ``rows``): 1 + 4/in_features bytes, ``in_features`` taken as the
  text model's hidden size.

Transformers converts every ``nn.Linear`` except the output embedding, tied
weights and the last module (``transformers/quantizers/base.py``
``get_keys_to_not_convert``); the input embedding is an ``nn.Embedding`` and
a vision tower's patch embedding a convolution, neither converted. So the
estimate keeps ``vocab_size x hidden_size`` parameters (twice when the
embeddings are not tied, or the config does not say they are) and the patch
convolution (``num_channels x temporal_patch_size x patch_size² x`` the vision
hidden size) at the runtime dtype, and prices the rest at the rates above.
Norms, biases and position embeddings are counted as quantized: a fraction of
a percent of a real model's weights (the test world's tiny models, where they
weigh more, land within 5 % (3 % off at most): ``test_bitsandbytes.py``); the
target's ``weight_overhead`` (1.10-1.15) covers the rest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from comfy_llm_profiles._kv_cache import positive_int

__all__ = [
    "LOAD_QUANTIZATIONS",
    "LoadQuantization",
    "load_quantization_for_tag",
    "quantized_weight_bytes",
]

_NF4_BLOCK = 64
_ABSMAX_BYTES = 4
_ROW_SCALE_BYTES = 4
_CHECKPOINT_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
_RUNTIME_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


@dataclass(frozen=True, slots=True)
class LoadQuantization:
    """One quantization an engine applies while it loads an unquantized checkpoint.

    Attributes:
        name: The profile's ``quantization_method`` (``bnb_nf4``).
        tag: What a reference says after ``:`` (``nf4``; matched ignoring case).
        label: Its name in messages and metadata.
        bits: Bits per quantized weight.
        extra: The ``comfy-llm`` extra that installs its library.
        library: The library's import name (the engine's availability check).
    """

    name: str
    tag: str
    label: str
    bits: int
    extra: str = "bitsandbytes"
    library: str = "bitsandbytes"

    def bytes_per_parameter(self, hidden_size: int) -> float:
        """Bytes one weight of a quantized layer takes, scales included (module docstring)."""
        if self.bits == 4:
            return 0.5 + _ABSMAX_BYTES / _NF4_BLOCK
        return 1.0 + _ROW_SCALE_BYTES / max(1, hidden_size)


LOAD_QUANTIZATIONS: Final[dict[str, LoadQuantization]] = {
    q.name: q
    for q in (
        LoadQuantization(name="bnb_int8", tag="int8", label="bitsandbytes 8-bit", bits=8),
        LoadQuantization(name="bnb_nf4", tag="nf4", label="bitsandbytes 4-bit NF4", bits=4),
    )
}
"""Every load quantization by profile name: smaller, slower than the unquantized model."""


def load_quantization_for_tag(tag: str | None) -> LoadQuantization | None:
    """The load quantization a reference's ``:<tag>`` asks for, None for any other tag."""
    if not tag:
        return None
    wanted = tag.lower()
    return next((q for q in LOAD_QUANTIZATIONS.values() if q.tag == wanted), None)


def _tied(config: Mapping[str, Any]) -> bool:
    for source in (config, config.get("text_config")):
        if isinstance(source, Mapping) and isinstance(source.get("tie_word_embeddings"), bool):
            return bool(source["tie_word_embeddings"])
    return False  # unsaid: count an untied output embedding (the larger estimate)


def _patch_embedding(config: Mapping[str, Any]) -> int:
    """Parameters of the vision tower's patch convolution (0 without a ``vision_config``)."""
    vision = config.get("vision_config")
    if not isinstance(vision, Mapping):
        return 0
    patch = positive_int(vision, "patch_size") or 0
    width = positive_int(vision, "hidden_size") or positive_int(vision, "embed_dim") or 0
    channels = positive_int(vision, "num_channels") or positive_int(vision, "in_channels") or 3
    frames = positive_int(vision, "temporal_patch_size") or 1
    return channels * frames * patch * patch * width


def quantized_weight_bytes(
    config: Mapping[str, Any],
    weight_bytes: int,
    *,
    checkpoint_dtype: str,
    runtime_dtype: str,
    quantization: LoadQuantization,
) -> int:
    """The weights' bytes once loaded with ``quantization`` (module docstring).

    Args:
        config: The parsed config.json (class defaults filled in).
        weight_bytes: Total safetensors bytes.
        checkpoint_dtype: The checkpoint's declared dtype (``auto``: 2 bytes a weight).
        runtime_dtype: The dtype the unconverted layers run in (``auto``: the checkpoint's).
        quantization: The load quantization.
    """
    stored = _CHECKPOINT_BYTES.get(checkpoint_dtype, 2)
    kept_bytes = _RUNTIME_BYTES.get(runtime_dtype, stored)
    parameters = weight_bytes // stored
    vocab = positive_int(config, "vocab_size") or 0
    hidden = positive_int(config, "hidden_size") or 0
    embeddings = vocab * hidden * (1 if _tied(config) else 2)
    kept = min(parameters, embeddings + _patch_embedding(config))
    converted = parameters - kept
    return kept * kept_bytes + math.ceil(converted * quantization.bytes_per_parameter(hidden))
