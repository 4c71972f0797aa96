"""Tiny Qwen2-VL, Qwen2.5-VL and InternVL 3 (Transformers-native) checkpoints.

All three use Qwen's tokenizer (``Qwen2Tokenizer``: it rebuilds the pipeline
from vocab + merges with Qwen's split regex, so the vocabulary is trained
with that regex). Qwen2-VL and Qwen2.5-VL write their config.json flat (text
keys at the top, ``vision_config`` nested, M-RoPE under ``rope_scaling``), as
``Qwen/Qwen2.5-VL-3B-Instruct`` does; MLX-VLM's qwen2_5_vl copies the top
level into its text config (``mlx_vlm/models/qwen2_5_vl/config.py``
``ModelConfig.from_dict``) and Transformers 5 pops it into ``text_config``
(``configuration_qwen2_5_vl.py`` ``Qwen2_5_VLConfig.__post_init__``).
"""

from __future__ import annotations

from typing import Any

from comfy_llm_testworld._ckpt_configs import (
    HEADS,
    HIDDEN,
    INTERMEDIATE,
    KV_HEADS,
    LAYERS,
    MAX_POSITIONS,
    VISION_HIDDEN,
    VISION_INTERMEDIATE,
    ArchConfigs,
)
from comfy_llm_testworld._ckpt_tokenizer import TokenizerSpec
from comfy_llm_testworld._fam_base import CLIP_MEAN, CLIP_STD, FamilySpec, llama_text

__all__ = ["INTERNVL", "QWEN2_5_VL", "QWEN2_VL"]

_PATCH = 14
_MERGE = 2
#: The 56 px test image is 4 x 4 patches, 2 x 2 merged tokens.
_UNIT = _PATCH * _MERGE
_ROPE_THETA = 1_000_000.0
#: M-RoPE sections (temporal, height, width) summing to HEAD_DIM / 2.
_MROPE = [4, 6, 6]

_QWEN_VL_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)

# The Qwen2-VL / Qwen2.5-VL Instruct template: a default system turn, then
# <|vision_start|><|image_pad|><|vision_end|> where each image part stands
# (``add_vision_id`` numbers them), the same with <|video_pad|> for video.
QWEN2_VL_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_QWEN_TOKENIZER_CONFIG: dict[str, object] = {
    "tokenizer_class": "Qwen2Tokenizer",
    "bos_token": None,
    "eos_token": "<|im_end|>",
    "pad_token": "<|endoftext|>",
    "unk_token": None,
    "errors": "replace",
    "model_max_length": MAX_POSITIONS,
    "split_special_tokens": False,
    "add_prefix_space": False,
}

QWEN_VL_TOKENIZER = TokenizerSpec(
    specials=_QWEN_VL_SPECIALS,
    qwen_pretokenizer=True,
    end_token="<|im_end|>",
    chat_template=QWEN2_VL_TEMPLATE,
    tokenizer_config=_QWEN_TOKENIZER_CONFIG,
)


def _qwen_vl_flat(
    ids: dict[str, int], vocab_size: int, architecture: str, model_type: str
) -> dict[str, Any]:
    """The flat part both Qwen2-VL generations share (Qwen2-VL-2B's key set)."""
    return {
        "architectures": [architecture],
        "model_type": model_type,
        "vocab_size": vocab_size,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "hidden_act": "silu",
        "max_position_embeddings": MAX_POSITIONS,
        "max_window_layers": LAYERS,
        "rms_norm_eps": 1e-6,
        "rope_theta": _ROPE_THETA,
        "rope_scaling": {"type": "mrope", "mrope_section": _MROPE},
        "sliding_window": MAX_POSITIONS,
        "use_sliding_window": False,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "tie_word_embeddings": False,
        "use_cache": True,
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "vision_token_id": ids["<|vision_pad|>"],
        "dtype": "float32",
    }


def _qwen_processor(processor_class: str) -> dict[str, dict[str, Any]]:
    """preprocessor_config.json as the Qwen2/2.5-VL repositories ship it (pixels bounds tiny)."""
    return {
        "preprocessor_config.json": {
            "image_processor_type": "Qwen2VLImageProcessor",
            "processor_class": processor_class,
            "do_convert_rgb": True,
            "do_normalize": True,
            "do_rescale": True,
            "do_resize": True,
            "image_mean": CLIP_MEAN,
            "image_std": CLIP_STD,
            "rescale_factor": 1 / 255,
            "resample": 3,
            "min_pixels": (2 * _UNIT) ** 2,
            "max_pixels": (4 * _UNIT) ** 2,
            "patch_size": _PATCH,
            "temporal_patch_size": 2,
            "merge_size": _MERGE,
        }
    }


def _generation(ids: dict[str, int]) -> dict[str, Any]:
    return {
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
        "pad_token_id": ids["<|endoftext|>"],
    }


def qwen2_vl_configs(ids: dict[str, int], vocab_size: int) -> ArchConfigs:
    """A tiny ``Qwen2VLForConditionalGeneration`` (Qwen2-VL-2B-Instruct's layout)."""
    config = _qwen_vl_flat(ids, vocab_size, "Qwen2VLForConditionalGeneration", "qwen2_vl")
    config["vision_config"] = {
        "depth": 1,
        "embed_dim": VISION_HIDDEN,
        "mlp_ratio": 2,
        "num_heads": 2,
        "in_chans": 3,
        "hidden_size": HIDDEN,
        "patch_size": _PATCH,
        "spatial_merge_size": _MERGE,
        "spatial_patch_size": _PATCH,
        "temporal_patch_size": 2,
    }
    processors = _qwen_processor("Qwen2VLProcessor")
    return ArchConfigs(config, _generation(ids), processors, ("<|im_end|>", "<|endoftext|>"))


def qwen2_5_vl_configs(ids: dict[str, int], vocab_size: int) -> ArchConfigs:
    """A tiny ``Qwen2_5_VLForConditionalGeneration`` (Qwen2.5-VL-3B-Instruct's layout).

    Two vision blocks: block 0 windowed, block 1 full attention
    (``fullatt_block_indexes``), as the real 32-block tower alternates.
    """
    config = _qwen_vl_flat(ids, vocab_size, "Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl")
    config["vision_config"] = {
        "depth": 2,
        "hidden_act": "silu",
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_INTERMEDIATE,
        "num_heads": 2,
        "in_chans": 3,
        "out_hidden_size": HIDDEN,
        "patch_size": _PATCH,
        "spatial_merge_size": _MERGE,
        "spatial_patch_size": _PATCH,
        "window_size": 2 * _UNIT,
        "fullatt_block_indexes": [1],
        "tokens_per_second": 2,
        "temporal_patch_size": 2,
    }
    processors = _qwen_processor("Qwen2_5_VLProcessor")
    return ArchConfigs(config, _generation(ids), processors, ("<|im_end|>", "<|endoftext|>"))


_IMAGE_MARKER = "<|vision_start|><|image_pad|><|vision_end|>"
_VIDEO_MARKER = "<|vision_start|><|video_pad|><|vision_end|>"

QWEN2_VL = FamilySpec(
    kind="qwen2_vl",
    architecture="Qwen2VLForConditionalGeneration",
    model_type="qwen2_vl",
    tokenizer=QWEN_VL_TOKENIZER,
    configs=qwen2_vl_configs,
    image_marker=_IMAGE_MARKER,
    video_marker=_VIDEO_MARKER,
    engines={"transformers": "", "mlx_vlm": "", "vllm": ""},
    template_file="chat_template.json",
    generation_prompt="<|im_start|>assistant\n",
)

QWEN2_5_VL = FamilySpec(
    kind="qwen2_5_vl",
    architecture="Qwen2_5_VLForConditionalGeneration",
    model_type="qwen2_5_vl",
    tokenizer=QWEN_VL_TOKENIZER,
    configs=qwen2_5_vl_configs,
    image_marker=_IMAGE_MARKER,
    video_marker=_VIDEO_MARKER,
    engines={"transformers": "", "mlx_vlm": "", "vllm": ""},
    template_file="chat_template.json",
    generation_prompt="<|im_start|>assistant\n",
)

# InternVL 3 "-hf" repositories (OpenGVLab/InternVL3-1B-hf ...): Qwen2.5 text, InternViT,
# <IMG_CONTEXT> in the template, which the processor expands to <img><IMG_CONTEXT>*N</img>.
_INTERNVL_SPECIALS = (
    *_QWEN_VL_SPECIALS,
    "<img>",
    "</img>",
    "<IMG_CONTEXT>",
    "<video>",
)

# InternVL3-hf's template: chat-ML, a default system turn, "<IMG_CONTEXT>\n" where each
# image part stands (the processor turns it into <img><IMG_CONTEXT>*N</img>).
INTERNVL_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    # (the fullwidth commas written as escapes)
    "{{'<|im_start|>system\n你是书生·万象\uff0c英文名是InternVL\uff0c是由上海人工智能实验室、"
    "清华大学及多家合作单位联合开发的多模态大语言模型。<|im_end|>\n'}}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n'}}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' %}{{ '<IMG_CONTEXT>\n' }}"
    "{% elif content['type'] == 'video' %}{{ '<video>\n' }}"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}"
    "{% endfor %}{% endif %}{{'<|im_end|>\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{'<|im_start|>assistant\n' }}{% endif %}"
)

INTERNVL_TOKENIZER = TokenizerSpec(
    specials=_INTERNVL_SPECIALS,
    qwen_pretokenizer=True,
    end_token="<|im_end|>",
    chat_template=INTERNVL_TEMPLATE,
    tokenizer_config={
        **_QWEN_TOKENIZER_CONFIG,
        "extra_special_tokens": {
            "context_image_token": "<IMG_CONTEXT>",
            "end_image_token": "</img>",
            "start_image_token": "<img>",
            "video_token": "<video>",
        },
    },
)

_INTERNVL_TILE = 28
_INTERNVL_PATCH = 14


def internvl_configs(ids: dict[str, int], vocab_size: int) -> ArchConfigs:
    """A tiny ``InternVLForConditionalGeneration`` (InternVL3-1B-hf's layout).

    A 28 px tile is 2 x 2 patches; pixel shuffle at ``downsample_ratio`` 0.5
    makes it one token (``image_seq_length`` 1).
    """
    text = llama_text(
        ids,
        vocab_size,
        model_type="qwen2",
        bos="<|endoftext|>",
        eos="<|im_end|>",
        pad="<|endoftext|>",
        rms_norm_eps=1e-6,
        use_sliding_window=False,
        sliding_window=None,
        max_window_layers=LAYERS,
        architectures=["Qwen2ForCausalLM"],
    )
    text.pop("head_dim")  # Qwen2 configs carry none
    vision = {
        "model_type": "internvl_vision",
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_INTERMEDIATE,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_channels": 3,
        "image_size": [_INTERNVL_TILE, _INTERNVL_TILE],
        "patch_size": [_INTERNVL_PATCH, _INTERNVL_PATCH],
        "hidden_act": "gelu",
        "layer_norm_eps": 1e-6,
        "norm_type": "layer_norm",
        "use_qk_norm": False,
        "use_mean_pooling": True,
        "layer_scale_init_value": 0.1,
        "attention_bias": True,
        "projection_dropout": 0.0,
        "use_absolute_position_embeddings": True,
    }
    config = {
        "architectures": ["InternVLForConditionalGeneration"],
        "model_type": "internvl",
        "text_config": text,
        "vision_config": vision,
        "image_token_id": ids["<IMG_CONTEXT>"],
        "image_seq_length": 1,
        "downsample_ratio": 0.5,
        "projector_hidden_act": "gelu",
        "vision_feature_layer": -1,
        "vision_feature_select_strategy": "default",
        "tie_word_embeddings": False,
        "dtype": "float32",
    }
    image_processor = {
        "image_processor_type": "GotOcr2ImageProcessor",
        "processor_class": "InternVLProcessor",
        "crop_to_patches": False,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.485, 0.456, 0.406],
        "image_std": [0.229, 0.224, 0.225],
        "max_patches": 12,
        "min_patches": 1,
        "resample": 3,
        "rescale_factor": 1 / 255,
        "size": {"height": _INTERNVL_TILE, "width": _INTERNVL_TILE},
    }
    video_processor = {
        **{
            k: v
            for k, v in image_processor.items()
            if k not in ("crop_to_patches", "max_patches", "min_patches")
        },
        "video_processor_type": "InternVLVideoProcessor",
        "initial_shift": True,
    }
    video_processor.pop("image_processor_type")
    processors: dict[str, dict[str, Any]] = {
        "preprocessor_config.json": image_processor,
        "video_preprocessor_config.json": video_processor,
        "processor_config.json": {"processor_class": "InternVLProcessor", "image_seq_length": 1},
    }
    return ArchConfigs(config, _generation(ids), processors, ("<|im_end|>", "<|endoftext|>"))


INTERNVL = FamilySpec(
    kind="internvl",
    architecture="InternVLForConditionalGeneration",
    model_type="internvl",
    tokenizer=INTERNVL_TOKENIZER,
    configs=internvl_configs,
    image_marker="<IMG_CONTEXT>\n",
    video_marker="<video>\n",
    engines={
        "transformers": "",
        "mlx_vlm": (
            "mlx-vlm 0.7.10's internvl reads a Qwen3 text model (mlx_vlm/models/internvl/"
            "config.py:4 TextConfig = qwen3's ModelConfig: head_dim required, no q/k/v bias); "
            "InternVL 3's Qwen2.5 text is refused (InternVL 3.5 is its MLX route)"
        ),
        "vllm": "",
    },
    generation_prompt="<|im_start|>assistant\n",
)
