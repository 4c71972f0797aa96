"""Published shapes of the checkpoints the GPU budget is computed for (no weights).

config.json of Qwen3.5-2B and Qwen3.5-27B-FP8 as the vLLM review r2 (§2)
records them: hybrid layouts with one full-attention layer in four, Gated
DeltaNet state declared float32 (``mamba_ssm_dtype``), a 24-block vision
tower with 16-pixel patches merged 2 x 2 (32 pixels a token side). The memory
arithmetic (profiles), its replay through vLLM's own planner (the vLLM tier)
and the GPU check's random-weight checkpoint of real size all start here.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["QWEN35_27B_FP8", "QWEN35_2B", "qwen35_shape"]

QWEN35_2B: dict[str, Any] = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "model_type": "qwen3_5",
    "image_token_id": 248056,
    "video_token_id": 248057,
    "text_config": {
        "model_type": "qwen3_5_text",
        "dtype": "bfloat16",
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "num_hidden_layers": 24,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 6,
        "full_attention_interval": 4,
        "linear_num_value_heads": 16,
        "linear_num_key_heads": 16,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4,
        "mamba_ssm_dtype": "float32",
        "max_position_embeddings": 262144,
        "vocab_size": 248320,
    },
    "vision_config": {
        "model_type": "qwen3_5",
        "depth": 24,
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "num_heads": 16,
        "in_channels": 3,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "out_hidden_size": 2048,
    },
}

QWEN35_27B_FP8: dict[str, Any] = copy.deepcopy(QWEN35_2B)
QWEN35_27B_FP8["text_config"].update(
    hidden_size=5120,
    intermediate_size=17408,
    num_hidden_layers=64,
    num_attention_heads=24,
    num_key_value_heads=4,
    layer_types=(["linear_attention"] * 3 + ["full_attention"]) * 16,
    linear_num_value_heads=48,
)
QWEN35_27B_FP8["vision_config"].update(
    hidden_size=1152, intermediate_size=4304, out_hidden_size=5120
)
QWEN35_27B_FP8["quantization_config"] = {
    "quant_method": "fp8",
    "fmt": "e4m3",
    "activation_scheme": "dynamic",
    "weight_block_size": [128, 128],
}

_SHAPES = {"2b": QWEN35_2B, "27b-fp8": QWEN35_27B_FP8}


def qwen35_shape(size: str) -> dict[str, Any]:
    """A fresh copy of ``2b`` or ``27b-fp8``'s config.json."""
    return copy.deepcopy(_SHAPES[size])
