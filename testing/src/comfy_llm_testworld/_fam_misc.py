"""Tiny Phi-4-multimodal (Transformers-native), LFM2-VL and Florence-2 checkpoints.

* Phi-4-multimodal (``Phi4MultimodalForCausalLM``, the Transformers-native
  conversion): not an image-text-to-text model in Transformers 5 but a
  multimodal LM (``models/auto/modeling_auto.py``
  ``MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES``), so it is built through
  ``AutoModelForCausalLM``. Its image processor counts ``256 + 1 + ... + 16``
  tokens per image (``image_processing_phi4_multimodal.py``), which holds
  only for a 448 px crop of 14 px patches pooled 2 x 2, so the tiny vision
  tower keeps 448 px (32 wide, it stays small). The processor also needs the
  audio feature extractor.
* LFM2-VL (``Lfm2VlForConditionalGeneration``): SigLIP2 NaFlex tower, pixel
  unshuffle, an LFM2 text model of short-convolution and attention layers.
* Florence-2 (``Florence2ForConditionalGeneration``): DaViT + BART, an
  encoder-decoder with task prompts and no chat template: the processor
  writes ``<image>`` x N, ``<s>``, the task's prompt and ``</s>``
  (``processing_florence2.py`` ``_construct_prompts`` and ``__call__``).
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
from comfy_llm_testworld._fam_base import NESTED_TOWER, FamilySpec

__all__ = ["FLORENCE2", "LFM2_VL", "PHI4_MULTIMODAL"]

# ----------------------------------------------------------- Phi-4-multimodal

_PHI4_SPECIALS = (
    "<|endoftext|>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|end|>",
    "<|image|>",
    "<|audio|>",
)

# microsoft/Phi-4-multimodal-instruct (Transformers format), reduced: "<|role|>" + content +
# "<|end|>", <|image|> / <|audio|> where the parts stand, "<|assistant|>" to generate.
PHI4_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|' + message['role'] + '|>' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for content in message['content'] -%}"
    "{%- if content['type'] == 'image' -%}{{- '<|image|>' -}}"
    "{%- elif content['type'] == 'audio' -%}{{- '<|audio|>' -}}"
    "{%- elif content['type'] == 'text' -%}{{- content['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}{{- '<|end|>' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|assistant|>' -}}"
    "{%- else -%}{{- eos_token -}}{%- endif -%}"
)

_PHI4_CROP = 448
_PATCH = 14


def phi4_configs(ids: dict[str, int], vocab_size: int) -> ArchConfigs:
    """A tiny ``Phi4MultimodalForCausalLM`` (flat Phi-3-style text keys, vision + audio towers)."""
    vision = {
        "model_type": "phi4_multimodal_vision",
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_INTERMEDIATE,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_channels": 3,
        "image_size": _PHI4_CROP,
        "crop_size": _PHI4_CROP,
        "patch_size": _PATCH,
        "feature_layer": -2,
        "image_token_id": ids["<|image|>"],
    }
    audio = {
        "model_type": "phi4_multimodal_audio",
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_INTERMEDIATE,
        "num_blocks": 1,
        "num_attention_heads": 2,
        "ext_pw_out_channel": VISION_HIDDEN,
        "depthwise_separable_out_channel": VISION_HIDDEN,
        "nemo_conv_channels": VISION_HIDDEN,
        "audio_token_id": ids["<|audio|>"],
    }
    config = {
        "architectures": ["Phi4MultimodalForCausalLM"],
        "model_type": "phi4_multimodal",
        "vocab_size": vocab_size,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "hidden_act": "silu",
        "max_position_embeddings": MAX_POSITIONS,
        "original_max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": 1e-5,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 10000.0,
            "partial_rotary_factor": 0.75,
        },
        "tie_word_embeddings": True,
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": [ids["<|endoftext|>"], ids["<|end|>"]],
        "pad_token_id": ids["<|endoftext|>"],
        "vision_config": vision,
        "audio_config": audio,
        "dtype": "float32",
    }
    processors: dict[str, dict[str, Any]] = {
        "preprocessor_config.json": {
            "processor_class": "Phi4MultimodalProcessor",
            "image_processor_type": "Phi4MultimodalImageProcessor",
            "feature_extractor_type": "Phi4MultimodalFeatureExtractor",
            "dynamic_hd": 4,
            "patch_size": _PATCH,
            "size": {"height": _PHI4_CROP, "width": _PHI4_CROP},
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
            "do_convert_rgb": True,
            "do_normalize": True,
            "do_rescale": True,
            "do_resize": True,
            "rescale_factor": 1 / 255,
            "audio_compression_rate": 8,
            "audio_downsample_rate": 1,
            "audio_feat_stride": 1,
            "feature_size": 80,
            "sampling_rate": 16000,
        },
    }
    eos = ("<|end|>", "<|endoftext|>")
    generation = {
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": [ids[token] for token in eos],
        "pad_token_id": ids["<|endoftext|>"],
    }
    return ArchConfigs(config, generation, processors, eos)


PHI4_MULTIMODAL = FamilySpec(
    kind="phi4_multimodal",
    architecture="Phi4MultimodalForCausalLM",
    model_type="phi4_multimodal",
    tokenizer=TokenizerSpec(
        specials=_PHI4_SPECIALS,
        qwen_pretokenizer=False,
        end_token="<|end|>",
        chat_template=PHI4_TEMPLATE,
        tokenizer_config={
            "tokenizer_class": "GPT2Tokenizer",
            "bos_token": "<|endoftext|>",
            "eos_token": "<|endoftext|>",
            "pad_token": "<|endoftext|>",
            "unk_token": "<|endoftext|>",
            "model_max_length": MAX_POSITIONS,
            "add_prefix_space": False,
            "extra_special_tokens": {"image_token": "<|image|>", "audio_token": "<|audio|>"},
        },
    ),
    configs=phi4_configs,
    image_marker="<|image|>",
    engines={
        "transformers": "",
        "mlx_vlm": (
            "mlx-vlm 0.7.10 has no phi4_multimodal module: its phi4mm reads the remote-code "
            "Phi4MMForCausalLM layout (mlx_vlm/utils.py:252-269 get_model_and_args imports "
            "mlx_vlm.models.<model_type>)"
        ),
        "vllm": (
            "vLLM 0.32 removed Phi4MultimodalForCausalLM in 0.12.0; only the remote-code "
            "Phi4MMForCausalLM remains (vllm/model_executor/models/registry.py "
            "_PREVIOUSLY_SUPPORTED_MODELS)"
        ),
    },
    auto_class="AutoModelForCausalLM",
    generation_prompt="<|assistant|>",
)

# -------------------------------------------------------------------- LFM2-VL

_LFM2_SPECIALS = (
    "<|pad|>",
    "<|startoftext|>",
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<image>",
    "<|image_start|>",
    "<|image_end|>",
    "<|img_thumbnail|>",
    "<|img_row_1_col_1|>",
    "<|img_row_1_col_2|>",
    "<|img_row_2_col_1|>",
    "<|img_row_2_col_2|>",
)

# LiquidAI/LFM2-VL-*: chat-ML after bos_token, "<image>" where each image part stands.
LFM2_VL_TEMPLATE = (
    "{{- bos_token -}}"
    "{%- for message in messages -%}{{- '<|im_start|>' + message['role'] + '\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for content in message['content'] -%}"
    "{%- if content['type'] == 'image' -%}{{- '<image>' -}}"
    "{%- elif content['type'] == 'text' -%}{{- content['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}{{- '<|im_end|>\n' -}}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}"
)

_LFM2_PATCH = 16


def lfm2_vl_configs(ids: dict[str, int], vocab_size: int) -> ArchConfigs:
    """A tiny ``Lfm2VlForConditionalGeneration``: layer 0 short convolution, layer 1 attention.

    A 64 px image is 4 x 4 SigLIP2 patches, unshuffled 2 x 2 into 4 tokens.
    """
    text: dict[str, Any] = {
        "model_type": "lfm2",
        "vocab_size": vocab_size,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        # the real configs spell the widths out again under block_*/conv_* (MLX-VLM reads
        # those, with 1024-wide defaults: mlx_vlm/models/lfm2_vl/config.py TextConfig)
        "block_dim": HIDDEN,
        "block_ff_dim": INTERMEDIATE,
        "block_auto_adjust_ff_dim": False,
        "block_multiple_of": 32,
        "block_ffn_dim_multiplier": 1.0,
        "conv_dim": HIDDEN,
        "conv_dim_out": HIDDEN,
        "num_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "max_position_embeddings": MAX_POSITIONS,
        "norm_eps": 1e-5,
        "conv_bias": False,
        "conv_L_cache": 3,
        "layer_types": ["conv", "full_attention"],
        "full_attn_idxs": [1],
        "rope_theta": 1_000_000.0,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1_000_000.0},
        "tie_word_embeddings": True,
        "bos_token_id": ids["<|startoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|pad|>"],
        "dtype": "float32",
    }
    vision = {
        "model_type": "siglip2_vision_model",
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_INTERMEDIATE,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_channels": 3,
        "patch_size": _LFM2_PATCH,
        "num_patches": 16,
        "hidden_act": "gelu_pytorch_tanh",
        "layer_norm_eps": 1e-6,
        "vision_use_head": False,
    }
    config = {
        "architectures": ["Lfm2VlForConditionalGeneration"],
        "model_type": "lfm2_vl",
        "text_config": text,
        "vision_config": vision,
        "image_token_id": ids["<image>"],
        "downsample_factor": 2,
        "projector_hidden_act": "gelu",
        "projector_hidden_size": 2 * HIDDEN,
        "projector_bias": True,
        "projector_use_layernorm": True,
        "vision_feature_layer": -1,
        "tie_word_embeddings": True,
        "dtype": "float32",
    }
    image_processor = {
        "image_processor_type": "Lfm2VlImageProcessor",
        "processor_class": "Lfm2VlProcessor",
        "do_image_splitting": False,
        "downsample_factor": 2,
        "encoder_patch_size": _LFM2_PATCH,
        "max_image_tokens": 4,
        "min_image_tokens": 4,
        "max_num_patches": 16,
        "tile_size": 4 * _LFM2_PATCH,
        "use_thumbnail": False,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "rescale_factor": 1 / 255,
    }
    processors: dict[str, dict[str, Any]] = {
        "preprocessor_config.json": image_processor,
        "processor_config.json": {
            "processor_class": "Lfm2VlProcessor",
            "use_image_special_tokens": True,
        },
    }
    generation = {
        "bos_token_id": ids["<|startoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|pad|>"],
    }
    return ArchConfigs(config, generation, processors, ("<|im_end|>",))


LFM2_VL = FamilySpec(
    kind="lfm2_vl",
    architecture="Lfm2VlForConditionalGeneration",
    model_type="lfm2_vl",
    tokenizer=TokenizerSpec(
        specials=_LFM2_SPECIALS,
        qwen_pretokenizer=False,
        end_token="<|im_end|>",
        chat_template=LFM2_VL_TEMPLATE,
        tokenizer_config={
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": "<|startoftext|>",
            "eos_token": "<|im_end|>",
            "pad_token": "<|pad|>",
            "model_max_length": MAX_POSITIONS,
            "extra_special_tokens": {
                "image_token": "<image>",
                "image_start_token": "<|image_start|>",
                "image_end_token": "<|image_end|>",
                "image_thumbnail": "<|img_thumbnail|>",
            },
        },
    ),
    configs=lfm2_vl_configs,
    image_marker="<image>",
    renames=NESTED_TOWER,
    engines={"transformers": "", "mlx_vlm": "", "vllm": ""},
    generation_prompt="<|im_start|>assistant\n",
)

# ------------------------------------------------------------------ Florence-2

_FLORENCE_SPECIALS = (
    "<s>",
    "<pad>",
    "</s>",
    "<unk>",
    "<mask>",
    "<image>",
    *(f"<loc_{index}>" for index in range(8)),
    "<cap>",
    "</cap>",
    "<ncap>",
    "</ncap>",
    "<dcap>",
    "</dcap>",
    "<ocr>",
    "</ocr>",
    "<od>",
    "</od>",
    "<poly>",
    "</poly>",
    "<sep>",
)

_FLORENCE_IMAGE = 32
#: Two DaViT stages (stride 4, then 2): a 32 px image is 4 x 4 features, plus the pooled one.
_FLORENCE_TOKENS = (_FLORENCE_IMAGE // 8) ** 2 + 1


def florence2_configs(ids: dict[str, int], vocab_size: int) -> ArchConfigs:
    """A tiny ``Florence2ForConditionalGeneration`` (florence-community's converted layout)."""
    text = {
        "model_type": "bart",
        "vocab_size": vocab_size,
        "d_model": HIDDEN,
        "encoder_layers": 1,
        "decoder_layers": 1,
        "encoder_attention_heads": HEADS,
        "decoder_attention_heads": HEADS,
        "encoder_ffn_dim": INTERMEDIATE,
        "decoder_ffn_dim": INTERMEDIATE,
        "activation_function": "gelu",
        "max_position_embeddings": 1024,
        "scale_embedding": False,
        "bos_token_id": ids["<s>"],
        "pad_token_id": ids["<pad>"],
        "eos_token_id": ids["</s>"],
        "decoder_start_token_id": ids["</s>"],
        "forced_bos_token_id": ids["<s>"],
        "forced_eos_token_id": ids["</s>"],
        "dtype": "float32",
    }
    vision = {
        "model_type": "florence_vision",
        "in_channels": 3,
        "depths": [1, 1],
        "patch_size": [7, 3],
        "patch_stride": [4, 2],
        "patch_padding": [3, 1],
        "patch_prenorm": [False, True],
        "embed_dim": [VISION_HIDDEN, 2 * VISION_HIDDEN],
        "num_heads": [2, 4],
        "num_groups": [2, 4],
        "window_size": 2,
        "mlp_ratio": 2.0,
        "projection_dim": HIDDEN,
        "max_position_embeddings": 16,
        "max_temporal_embeddings": 4,
    }
    config = {
        "architectures": ["Florence2ForConditionalGeneration"],
        "model_type": "florence2",
        "text_config": text,
        "vision_config": vision,
        "image_token_id": ids["<image>"],
        "is_encoder_decoder": True,
        "tie_word_embeddings": True,
        "dtype": "float32",
    }
    image_processor = {
        "image_processor_type": "CLIPImageProcessor",
        "processor_class": "Florence2Processor",
        "crop_size": {"height": _FLORENCE_IMAGE, "width": _FLORENCE_IMAGE},
        "do_center_crop": False,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.485, 0.456, 0.406],
        "image_std": [0.229, 0.224, 0.225],
        "image_seq_length": _FLORENCE_TOKENS,
        "resample": 3,
        "rescale_factor": 1 / 255,
        "size": {"height": _FLORENCE_IMAGE, "width": _FLORENCE_IMAGE},
    }
    processors: dict[str, dict[str, Any]] = {
        "preprocessor_config.json": image_processor,
        "processor_config.json": {
            "processor_class": "Florence2Processor",
            "num_additional_image_tokens": 0,
        },
    }
    generation = {
        "bos_token_id": ids["<s>"],
        "eos_token_id": ids["</s>"],
        "pad_token_id": ids["<pad>"],
        "decoder_start_token_id": ids["</s>"],
        "forced_bos_token_id": ids["<s>"],
        "forced_eos_token_id": ids["</s>"],
        "num_beams": 1,
    }
    return ArchConfigs(config, generation, processors, ("</s>",))


FLORENCE2 = FamilySpec(
    kind="florence2",
    architecture="Florence2ForConditionalGeneration",
    model_type="florence2",
    tokenizer=TokenizerSpec(
        specials=_FLORENCE_SPECIALS,
        qwen_pretokenizer=False,
        end_token="</s>",
        chat_template="",
        tokenizer_config={
            "tokenizer_class": "BartTokenizer",
            "bos_token": "<s>",
            "eos_token": "</s>",
            "pad_token": "<pad>",
            "unk_token": "<unk>",
            "mask_token": "<mask>",
            "cls_token": "<s>",
            "sep_token": "</s>",
            "add_prefix_space": False,
            "model_max_length": 1024,
            "extra_special_tokens": {"image_token": "<image>"},
        },
    ),
    configs=florence2_configs,
    image_marker="",
    engines={
        "transformers": "",
        "mlx_vlm": (
            "mlx-vlm 0.7.10's florence2 reads the remote-code layout (vision model_type "
            "'davit', dim_embed: mlx_vlm/models/florence2/vision.py:443-449), not the "
            "Transformers-native florence_vision config"
        ),
        "vllm": (
            "vLLM 0.32 runs Florence-2 only through the out-of-tree bart-plugin "
            "(vllm/model_executor/models/registry.py _OOT_SUPPORTED_MODELS)"
        ),
    },
    template_file="",
)
