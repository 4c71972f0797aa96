"""Tiny LLaVA-1.5, JoyCaption (LLaVA + Llama 3.1), LLaVA-NeXT, Llama 3.2 Vision and Mistral 3.

These families use a Llama-style text model (Llama, Mistral) and a
non-Qwen tokenizer; the vocabulary is byte-level and declared as
``PreTrainedTokenizerFast`` (which Transformers 5 loads from
``tokenizer.json`` as it is, ``tokenization_utils_tokenizers.py``
``convert_to_native_format``). The real LLaVA-1.5/NeXT repositories ship a
SentencePiece Llama tokenizer, Mistral 3 a Tekken one (``tekken.json``, read
through ``mistral-common`` when installed); that difference is in the
tokenizer only, not in the placement of images, which is what these
checkpoints check.
"""

from __future__ import annotations

from typing import Any

from comfy_llm_testworld._ckpt_configs import (
    LAYERS,
    VISION_HIDDEN,
    VISION_INTERMEDIATE,
    ArchConfigs,
)
from comfy_llm_testworld._ckpt_tokenizer import TokenizerSpec
from comfy_llm_testworld._fam_base import (
    CLIP_MEAN,
    CLIP_STD,
    NESTED_TOWER,
    FamilySpec,
    llama_text,
    siglip_vision,
)

__all__ = ["LLAVA", "LLAVA_JOYCAPTION", "LLAVA_NEXT", "MISTRAL3", "MLLAMA"]

_PATCH = 14
#: A 28 px CLIP tile: 2 x 2 patches (+ CLS, dropped by the "default" strategy).
_TILE = 28


def _fast(bos: str, eos: str, pad: str | None = None, **extra: object) -> dict[str, object]:
    config: dict[str, object] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": bos,
        "eos_token": eos,
        "pad_token": pad,
        "model_max_length": 4096,
        "clean_up_tokenization_spaces": False,
    }
    config.update(extra)
    return config


def _clip_vision() -> dict[str, Any]:
    return {
        "model_type": "clip_vision_model",
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_INTERMEDIATE,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "image_size": _TILE,
        "patch_size": _PATCH,
        "projection_dim": VISION_HIDDEN,
        "hidden_act": "quick_gelu",
        "layer_norm_eps": 1e-5,
    }


def _clip_processor(processor_class: str, **extra: Any) -> dict[str, Any]:
    config = {
        "image_processor_type": "CLIPImageProcessor",
        "processor_class": processor_class,
        "crop_size": {"height": _TILE, "width": _TILE},
        "do_center_crop": True,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": CLIP_MEAN,
        "image_std": CLIP_STD,
        "resample": 3,
        "rescale_factor": 1 / 255,
        "size": {"shortest_edge": _TILE},
    }
    config.update(extra)
    return config


# ------------------------------------------------------------------ LLaVA-1.5

_MLX_LLAVA_PROCESSOR = (
    "mlx-vlm 0.7.10's own LlavaProcessor passes the tokenizer's padding arguments to the "
    "image processor (mlx_vlm/models/llava/processing_llava.py:90, mlx_vlm/utils.py:1766), "
    "which Transformers 5.24 refuses: every LLaVA-1.5/JoyCaption request fails"
)

_LLAVA_SPECIALS = ("<s>", "</s>", "<unk>", "<image>", "<pad>")

# llava-hf/llava-1.5-*-hf: "USER: <image>\n<text> ASSISTANT:", images first.
LLAVA_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] != 'system' %}"
    "{{ message['role'].upper() + ': '}}{% endif %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}"
    "{{ '<image>\n' }}{% endfor %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{{ content['text'] + ' '}}{% endfor %}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)


def llava_configs(ids: dict[str, int], vocab_size: int) -> ArchConfigs:
    """A tiny ``LlavaForConditionalGeneration`` (llava-1.5-7b-hf's layout: CLIP + Llama)."""
    config = {
        "architectures": ["LlavaForConditionalGeneration"],
        "model_type": "llava",
        "text_config": llama_text(ids, vocab_size, bos="<s>", eos="</s>", pad="<pad>"),
        "vision_config": _clip_vision(),
        "image_token_index": ids["<image>"],
        "image_seq_length": (_TILE // _PATCH) ** 2,
        "projector_hidden_act": "gelu",
        "vision_feature_layer": -2,
        "vision_feature_select_strategy": "default",
        "pad_token_id": ids["<pad>"],
        "vocab_size": vocab_size,
        "tie_word_embeddings": False,
        "dtype": "float32",
    }
    processors: dict[str, dict[str, Any]] = {
        "preprocessor_config.json": _clip_processor("LlavaProcessor"),
        "processor_config.json": {
            "processor_class": "LlavaProcessor",
            "image_token": "<image>",
            "num_additional_image_tokens": 1,
            "patch_size": _PATCH,
            "vision_feature_select_strategy": "default",
        },
    }
    generation = {
        "bos_token_id": ids["<s>"],
        "eos_token_id": ids["</s>"],
        "pad_token_id": ids["<pad>"],
    }
    return ArchConfigs(config, generation, processors, ("</s>",))


LLAVA = FamilySpec(
    kind="llava",
    architecture="LlavaForConditionalGeneration",
    model_type="llava",
    tokenizer=TokenizerSpec(
        specials=_LLAVA_SPECIALS,
        adds_bos=True,
        qwen_pretokenizer=False,
        end_token="</s>",
        chat_template=LLAVA_TEMPLATE,
        tokenizer_config=_fast("<s>", "</s>", "<pad>", unk_token="<unk>", image_token="<image>"),
    ),
    configs=llava_configs,
    image_marker="<image>\n",
    renames=NESTED_TOWER,
    engines={"transformers": "", "mlx_vlm": _MLX_LLAVA_PROCESSOR, "vllm": ""},
    template_file="chat_template.json",
    generation_prompt="ASSISTANT:",
)

# --------------------------------------------------- JoyCaption Beta One

_LLAMA3_SPECIALS = (
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|finetune_right_pad_id|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eom_id|>",
    "<|eot_id|>",
    "<|python_tag|>",
    # JoyCaption's image start, image and image end tokens (ids 128078, 128077, 128079
    # in the real vocabulary).
    "<|reserved_special_token_70|>",
    "<|reserved_special_token_69|>",
    "<|reserved_special_token_71|>",
)
_JOY_IMAGE = "<|reserved_special_token_69|>"
_JOY_TRIPLE = (
    "<|reserved_special_token_70|><|reserved_special_token_69|><|reserved_special_token_71|>"
)

# fancyfeast/llama-joycaption-beta-one-hf-llava, as rendered: Llama 3.1's header with its
# knowledge-date lines, and the image triple written into the first user turn by the
# template itself (the conversation carries no image part; content is a string).
JOYCAPTION_TEMPLATE = (
    "{{- bos_token }}"
    "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] %}"
    "{%- set messages = messages[1:] %}{%- else %}{%- set system_message = '' %}{%- endif %}"
    "{{- '<|start_header_id|>system<|end_header_id|>\n\n' }}"
    "{{- 'Cutting Knowledge Date: December 2023\nToday Date: 26 July 2024\n\n' }}"
    "{{- system_message }}{{- '<|eot_id|>' }}"
    "{%- set ns = namespace(first=true) %}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' }}"
    "{%- if ns.first and message['role'] == 'user' %}{%- set ns.first = false %}"
    "{{- '" + _JOY_TRIPLE + "' + message['content'].replace('" + _JOY_IMAGE + "', '').lstrip() }}"
    "{%- else %}{{- message['content'] }}{%- endif %}{{- '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{%- endif %}"
)


def joycaption_configs(ids: dict[str, int], vocab_size: int) -> ArchConfigs:
    """A tiny JoyCaption: LLaVA with a SigLIP tower, "full" features and a Llama 3.1 text model."""
    text = llama_text(
        ids,
        vocab_size,
        bos="<|begin_of_text|>",
        eos="<|eot_id|>",
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 2048,
        },
        rope_theta=500000.0,
        architectures=["LlamaForCausalLM"],
    )
    vision = siglip_vision(_TILE, _PATCH)
    config = {
        "architectures": ["LlavaForConditionalGeneration"],
        "model_type": "llava",
        "text_config": text,
        "vision_config": vision,
        "image_token_index": ids[_JOY_IMAGE],
        "image_seq_length": (_TILE // _PATCH) ** 2,
        "projector_hidden_act": "gelu",
        "vision_feature_layer": -2,
        "vision_feature_select_strategy": "full",
        "tie_word_embeddings": False,
        "dtype": "float32",
    }
    image_processor = {
        "image_processor_type": "SiglipImageProcessor",
        "processor_class": "LlavaProcessor",
        "do_convert_rgb": None,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "resample": 3,
        "rescale_factor": 1 / 255,
        "size": {"height": _TILE, "width": _TILE},
    }
    processors: dict[str, dict[str, Any]] = {
        "preprocessor_config.json": image_processor,
        "processor_config.json": {
            "processor_class": "LlavaProcessor",
            "image_token": _JOY_IMAGE,
            "num_additional_image_tokens": 0,
            "patch_size": _PATCH,
            "vision_feature_select_strategy": "full",
        },
    }
    eos = ("<|eot_id|>", "<|end_of_text|>", "<|eom_id|>")
    generation = {
        "bos_token_id": ids["<|begin_of_text|>"],
        "eos_token_id": [ids[token] for token in eos],
    }
    return ArchConfigs(config, generation, processors, eos)


LLAVA_JOYCAPTION = FamilySpec(
    kind="llava_joycaption",
    architecture="LlavaForConditionalGeneration",
    model_type="llava",
    tokenizer=TokenizerSpec(
        specials=_LLAMA3_SPECIALS,
        adds_bos=True,
        qwen_pretokenizer=False,
        end_token="<|eot_id|>",
        chat_template=JOYCAPTION_TEMPLATE,
        tokenizer_config=_fast("<|begin_of_text|>", "<|eot_id|>", "<|finetune_right_pad_id|>"),
    ),
    configs=joycaption_configs,
    image_marker=_JOY_TRIPLE,
    renames=NESTED_TOWER,
    engines={
        "transformers": "",
        "mlx_vlm": (
            "mlx-vlm 0.7.10 renders the conversation as typed parts (mlx_vlm/prompt_utils.py:84 "
            "llava: LIST_WITH_IMAGE) and JoyCaption's template reads content as a string; "
            "given the rendered text it still fails as LLaVA-1.5 does: " + _MLX_LLAVA_PROCESSOR
        ),
        "vllm": "",
    },
    template_file="chat_template.json",
    generation_prompt="<|start_header_id|>assistant<|end_header_id|>\n\n",
)

# ------------------------------------------------------------------ LLaVA-NeXT

# llava-hf/llava-v1.6-mistral-7b-hf: "[INST] <image>\n<text> [/INST]".
LLAVA_NEXT_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'system' %}"
    "{{ '<<SYS>>\n' + message['content'][0]['text'] + '\n<</SYS>>\n\n' }}"
    "{% elif message['role'] == 'user' %}{{ '[INST] ' }}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}"
    "{{ '<image>\n' }}{% endfor %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{{ content['text'] }}{% endfor %}{{' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'][0]['text'] + '</s>' }}"
    "{% endif %}{% endfor %}"
)

_PINPOINTS = [[_TILE, 2 * _TILE], [2 * _TILE, _TILE], [2 * _TILE, 2 * _TILE]]


def llava_next_configs(ids: dict[str, int], vocab_size: int) -> ArchConfigs:
    """A tiny ``LlavaNextForConditionalGeneration`` (CLIP + Mistral, AnyRes tiles)."""
    text = llama_text(
        ids, vocab_size, model_type="mistral", bos="<s>", eos="</s>", sliding_window=None
    )
    config = {
        "architectures": ["LlavaNextForConditionalGeneration"],
        "model_type": "llava_next",
        "text_config": text,
        "vision_config": _clip_vision(),
        "image_grid_pinpoints": _PINPOINTS,
        "image_token_index": ids["<image>"],
        "image_seq_length": (_TILE // _PATCH) ** 2,
        "projector_hidden_act": "gelu",
        "vision_feature_layer": -2,
        "vision_feature_select_strategy": "default",
        "use_image_newline_parameter": True,
        "tie_word_embeddings": False,
        "dtype": "float32",
    }
    image_processor = _clip_processor(
        "LlavaNextProcessor",
        image_processor_type="LlavaNextImageProcessor",
        image_grid_pinpoints=_PINPOINTS,
        do_pad=True,
    )
    processors: dict[str, dict[str, Any]] = {
        "preprocessor_config.json": image_processor,
        "processor_config.json": {
            "processor_class": "LlavaNextProcessor",
            "image_token": "<image>",
            "num_additional_image_tokens": 1,
            "patch_size": _PATCH,
            "vision_feature_select_strategy": "default",
        },
    }
    generation = {"bos_token_id": ids["<s>"], "eos_token_id": ids["</s>"]}
    return ArchConfigs(config, generation, processors, ("</s>",))


LLAVA_NEXT = FamilySpec(
    kind="llava_next",
    architecture="LlavaNextForConditionalGeneration",
    model_type="llava_next",
    tokenizer=TokenizerSpec(
        specials=_LLAVA_SPECIALS,
        adds_bos=True,
        qwen_pretokenizer=False,
        end_token="</s>",
        chat_template=LLAVA_NEXT_TEMPLATE,
        tokenizer_config=_fast("<s>", "</s>", "<pad>", unk_token="<unk>", image_token="<image>"),
    ),
    configs=llava_next_configs,
    image_marker="<image>\n",
    renames=NESTED_TOWER,
    engines={"transformers": "", "mlx_vlm": "", "vllm": ""},
    template_file="chat_template.json",
    generation_prompt=" [/INST]",
)

# ----------------------------------------------------------- Llama 3.2 Vision

_MLLAMA_SPECIALS = (*_LLAMA3_SPECIALS[:8], "<|image|>")

# meta-llama/Llama-3.2-11B-Vision-Instruct, reduced: <|image|> where the image part stands.
MLLAMA_TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}"
    "{%- else %}{%- for content in message['content'] %}"
    "{%- if content['type'] == 'image' %}{{- '<|image|>' }}"
    "{%- elif content['type'] == 'text' %}{{- content['text'] }}{%- endif %}"
    "{%- endfor %}{%- endif %}{{- '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{%- endif %}"
)

_MLLAMA_TILE = 28


def mllama_configs(ids: dict[str, int], vocab_size: int) -> ArchConfigs:
    """A tiny ``MllamaForConditionalGeneration``: 3 text layers, layer 1 cross-attention.

    The vision encoder reads 28 px tiles (2 x 2 patches), up to 4 tiles, one
    global layer, features from local layer 0 (``vision_output_dim`` = 2 x 32).
    """
    text = llama_text(
        ids,
        vocab_size,
        model_type="mllama_text_model",
        bos="<|begin_of_text|>",
        eos="<|eot_id|>",
        pad="<|finetune_right_pad_id|>",
        num_hidden_layers=LAYERS + 1,
        cross_attention_layers=[1],
    )
    text.pop("head_dim")
    vision = {
        "model_type": "mllama_vision_model",
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_INTERMEDIATE,
        "num_hidden_layers": 2,
        "num_global_layers": 1,
        "attention_heads": 2,
        "num_channels": 3,
        "image_size": _MLLAMA_TILE,
        "patch_size": _PATCH,
        # the real tiling (up to 4 tiles, 8 aspect ratios): MLX-VLM sizes the tile
        # embeddings for it whatever the config says
        "max_num_tiles": 4,
        "intermediate_layers_indices": [0],
        "vision_output_dim": 2 * VISION_HIDDEN,
        "supported_aspect_ratios": [[1, 1], [1, 2], [1, 3], [1, 4], [2, 1], [2, 2], [3, 1], [4, 1]],
        "norm_eps": 1e-5,
    }
    config = {
        "architectures": ["MllamaForConditionalGeneration"],
        "model_type": "mllama",
        "text_config": text,
        "vision_config": vision,
        "image_token_index": ids["<|image|>"],
        "dtype": "float32",
    }
    image_processor = {
        "image_processor_type": "MllamaImageProcessor",
        "processor_class": "MllamaProcessor",
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_pad": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": CLIP_MEAN,
        "image_std": CLIP_STD,
        "max_image_tiles": 4,
        "resample": 2,
        "rescale_factor": 1 / 255,
        "size": {"height": _MLLAMA_TILE, "width": _MLLAMA_TILE},
    }
    eos = ("<|eot_id|>", "<|end_of_text|>", "<|eom_id|>")
    generation = {
        "bos_token_id": ids["<|begin_of_text|>"],
        "eos_token_id": [ids[token] for token in eos],
        "pad_token_id": ids["<|finetune_right_pad_id|>"],
    }
    return ArchConfigs(config, generation, {"preprocessor_config.json": image_processor}, eos)


MLLAMA = FamilySpec(
    kind="mllama",
    architecture="MllamaForConditionalGeneration",
    model_type="mllama",
    tokenizer=TokenizerSpec(
        specials=_MLLAMA_SPECIALS,
        adds_bos=True,
        qwen_pretokenizer=False,
        end_token="<|eot_id|>",
        chat_template=MLLAMA_TEMPLATE,
        tokenizer_config=_fast("<|begin_of_text|>", "<|eot_id|>", "<|finetune_right_pad_id|>"),
    ),
    configs=mllama_configs,
    image_marker="<|image|>",
    engines={
        "transformers": "",
        "mlx_vlm": "",
        "vllm": (
            "vLLM 0.32 dropped MllamaForConditionalGeneration in 0.10.2 "
            "(vllm/model_executor/models/registry.py _PREVIOUSLY_SUPPORTED_MODELS)"
        ),
    },
    template_file="chat_template.json",
    generation_prompt="<|start_header_id|>assistant<|end_header_id|>\n\n",
)

# ------------------------------------------------------------------- Mistral 3

_MISTRAL_SPECIALS = (
    "<unk>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "[IMG]",
    "[IMG_BREAK]",
    "[IMG_END]",
    "<pad>",
)

# mistralai/Mistral-Small-3.1-24B-Instruct-2503 (HF format), reduced: no default system
# prompt; [IMG] where each image part stands, inside [INST] ... [/INST].
MISTRAL3_TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'system' %}{{- '[SYSTEM_PROMPT]' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}"
    "{%- else %}{{- message['content'][0]['text'] }}{%- endif %}{{- '[/SYSTEM_PROMPT]' }}"
    "{%- elif message['role'] == 'user' %}{{- '[INST]' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}"
    "{%- else %}{%- for block in message['content'] %}"
    "{%- if block['type'] == 'text' %}{{- block['text'] }}"
    "{%- elif block['type'] in ['image', 'image_url'] %}{{- '[IMG]' }}{%- endif %}"
    "{%- endfor %}{%- endif %}{{- '[/INST]' }}"
    "{%- elif message['role'] == 'assistant' %}{{- message['content'] + eos_token }}{%- endif %}"
    "{%- endfor %}"
)


def mistral3_configs(ids: dict[str, int], vocab_size: int) -> ArchConfigs:
    """A tiny ``Mistral3ForConditionalGeneration``: Pixtral tower, 2 x 2 merger, Mistral text."""
    text = llama_text(
        ids, vocab_size, model_type="mistral", bos="<s>", eos="</s>", sliding_window=None
    )
    vision = {
        "model_type": "pixtral",
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_INTERMEDIATE,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "head_dim": VISION_HIDDEN // 2,
        "num_channels": 3,
        "image_size": 4 * _TILE,
        "patch_size": _PATCH,
        "hidden_act": "silu",
        "rope_theta": 10000.0,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    }
    config = {
        "architectures": ["Mistral3ForConditionalGeneration"],
        "model_type": "mistral3",
        "text_config": text,
        "vision_config": vision,
        "image_token_index": ids["[IMG]"],
        "multimodal_projector_bias": False,
        "projector_hidden_act": "gelu",
        "spatial_merge_size": 2,
        "vision_feature_layer": -1,
        "tie_word_embeddings": False,
        "dtype": "float32",
    }
    image_processor = {
        "image_processor_type": "PixtralImageProcessor",
        "processor_class": "PixtralProcessor",
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": CLIP_MEAN,
        "image_std": CLIP_STD,
        "patch_size": _PATCH,
        "resample": 3,
        "rescale_factor": 1 / 255,
        "size": {"longest_edge": 4 * _TILE},
    }
    processors: dict[str, dict[str, Any]] = {
        "preprocessor_config.json": image_processor,
        "processor_config.json": {
            "processor_class": "PixtralProcessor",
            "image_break_token": "[IMG_BREAK]",
            "image_end_token": "[IMG_END]",
            "image_token": "[IMG]",
            "patch_size": _PATCH,
            "spatial_merge_size": 2,
        },
    }
    generation = {
        "bos_token_id": ids["<s>"],
        "eos_token_id": ids["</s>"],
        "pad_token_id": ids["<pad>"],
    }
    return ArchConfigs(config, generation, processors, ("</s>",))


MISTRAL3 = FamilySpec(
    kind="mistral3",
    architecture="Mistral3ForConditionalGeneration",
    model_type="mistral3",
    tokenizer=TokenizerSpec(
        specials=_MISTRAL_SPECIALS,
        adds_bos=True,
        qwen_pretokenizer=False,
        end_token="</s>",
        chat_template=MISTRAL3_TEMPLATE,
        tokenizer_config=_fast("<s>", "</s>", "<pad>", unk_token="<unk>"),
    ),
    configs=mistral3_configs,
    image_marker="[IMG]",
    engines={"transformers": "", "mlx_vlm": "", "vllm": ""},
    generation_prompt="[/INST]",
)
