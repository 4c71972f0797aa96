"""A tiny GLM-4.1V checkpoint (zai-org/GLM-4.1V-9B-Thinking's layout), scripted or random.

GLM-4.1V is a native thinking VLM: the model opens ``<think>`` itself after
``<|assistant|>``, closes it and answers, and a turn ends when it emits
``<|user|>`` (one of its three end ids). Images are written
``<|begin_of_image|><|image|><|end_of_image|>`` where the image part stands;
``Glm4vProcessor`` repeats ``<|image|>`` once per merged patch
(``processing_glm4v.py`` ``replace_image_token``). The text model uses
M-RoPE on half of each head (``partial_rotary_factor`` 0.5), so the sections
sum to a quarter of the head size.

The scripted variant (see ``checkpoints``) emits ``<think>``, `` a``, `` b``,
``</think>``, `` answer``, ``<|user|>`` after the generation prompt: a
reasoning parser reports reasoning "a b" and answer "answer".
"""

from __future__ import annotations

from typing import Any

from comfy_llm_testworld._ckpt_configs import (
    HEAD_DIM,
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
from comfy_llm_testworld._ckpt_weights import WeightLayout
from comfy_llm_testworld._fam_base import CLIP_MEAN, CLIP_STD, FamilySpec

__all__ = ["GLM4V", "GLM4V_LAYOUT"]

_SPECIALS = (
    "<|endoftext|>",
    "[MASK]",
    "[gMASK]",
    "[sMASK]",
    "<sop>",
    "<eop>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|observation|>",
    "<|begin_of_image|>",
    "<|end_of_image|>",
    "<|begin_of_video|>",
    "<|end_of_video|>",
    "<|image|>",
    "<|video|>",
    "<|begin_of_box|>",
    "<|end_of_box|>",
)

# GLM-4.1V-Thinking, reduced: "[gMASK]<sop>", role tags, image and video triples where the
# parts stand, "<|assistant|>" as the generation prompt (the model opens <think> itself).
# With enable_thinking false (GLM-4.5V's switch) an empty think block is written for it.
GLM4V_TEMPLATE = (
    "[gMASK]<sop>"
    "{%- for msg in messages %}"
    "{%- if msg.role == 'system' %}<|system|>\n"
    "{%- if msg.content is string %}{{ msg.content }}"
    "{%- else %}{{ msg.content[0].text }}{%- endif %}"
    "{%- elif msg.role == 'user' %}<|user|>\n"
    "{%- if msg.content is string %}{{ msg.content }}"
    "{%- else %}{%- for item in msg.content %}"
    "{%- if item.type == 'video' or 'video' in item %}<|begin_of_video|><|video|><|end_of_video|>"
    "{%- elif item.type == 'image' or 'image' in item %}<|begin_of_image|><|image|><|end_of_image|>"
    "{%- elif item.type == 'text' %}{{ item.text }}{%- endif %}"
    "{%- endfor %}{%- endif %}"
    "{%- elif msg.role == 'assistant' %}<|assistant|>\n{{ msg.content }}{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|assistant|>"
    "{%- if enable_thinking is defined and enable_thinking is false %}<think></think>{%- endif %}"
    "{%- endif %}"
)

_PATCH = 14
_MERGE = 2
_UNIT = _PATCH * _MERGE

#: Where the scripted surgery acts (Transformers 5 saves GLM-4V under these names).
GLM4V_LAYOUT = WeightLayout(
    embed="model.language_model.embed_tokens.weight",
    lm_head="lm_head.weight",
    final_norm="model.language_model.norm.weight",
    final_norm_identity=1.0,
    layers_prefix="model.language_model.layers.",
    residual_writers=(".self_attn.o_proj.weight", ".mlp.down_proj.weight"),
)


def glm4v_configs(ids: dict[str, int], vocab_size: int) -> ArchConfigs:
    """A tiny ``Glm4vForConditionalGeneration``."""
    mrope = {"rope_type": "default", "mrope_section": [2, 3, 3]}
    text: dict[str, Any] = {
        "model_type": "glm4v_text",
        "vocab_size": vocab_size,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "attention_bias": True,
        "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "partial_rotary_factor": 0.5,
        "rope_scaling": mrope,
        "rope_parameters": {**mrope, "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
        "tie_word_embeddings": False,
        "image_token_id": ids["<|image|>"],
        "video_token_id": ids["<|video|>"],
        "eos_token_id": [ids["<|endoftext|>"], ids["<|user|>"], ids["<|observation|>"]],
        "pad_token_id": ids["<|endoftext|>"],
        "dtype": "float32",
    }
    vision = {
        "model_type": "glm4v_vision",
        "depth": 1,
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_INTERMEDIATE,
        "num_heads": 2,
        "hidden_act": "silu",
        "in_channels": 3,
        "image_size": 2 * _UNIT,
        "patch_size": _PATCH,
        "spatial_merge_size": _MERGE,
        "temporal_patch_size": 2,
        "out_hidden_size": HIDDEN,
        "rms_norm_eps": 1e-5,
        "attention_bias": False,
    }
    config = {
        "architectures": ["Glm4vForConditionalGeneration"],
        "model_type": "glm4v",
        "text_config": text,
        "vision_config": vision,
        "image_token_id": ids["<|image|>"],
        "video_token_id": ids["<|video|>"],
        "image_start_token_id": ids["<|begin_of_image|>"],
        "image_end_token_id": ids["<|end_of_image|>"],
        "video_start_token_id": ids["<|begin_of_video|>"],
        "video_end_token_id": ids["<|end_of_video|>"],
        "tie_word_embeddings": False,
        "dtype": "float32",
    }
    common = {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": CLIP_MEAN,
        "image_std": CLIP_STD,
        "patch_size": _PATCH,
        "merge_size": _MERGE,
        "temporal_patch_size": 2,
        "resample": 3,
        "rescale_factor": 1 / 255,
    }
    processors: dict[str, dict[str, Any]] = {
        "preprocessor_config.json": {
            **common,
            "image_processor_type": "Glm4vImageProcessor",
            "processor_class": "Glm4vProcessor",
            "size": {"shortest_edge": (2 * _UNIT) ** 2, "longest_edge": (4 * _UNIT) ** 2},
        },
        "video_preprocessor_config.json": {
            **common,
            "video_processor_type": "Glm4vVideoProcessor",
            "processor_class": "Glm4vProcessor",
            "size": {"shortest_edge": (2 * _UNIT) ** 2, "longest_edge": 8 * (4 * _UNIT) ** 2},
            "do_sample_frames": True,
            "fps": 2,
            "num_frames": 4,
            "max_duration": 300,
        },
    }
    eos = ("<|user|>", "<|endoftext|>", "<|observation|>")
    generation = {
        "eos_token_id": [ids[token] for token in eos],
        "pad_token_id": ids["<|endoftext|>"],
    }
    return ArchConfigs(config, generation, processors, eos)


GLM4V = FamilySpec(
    kind="glm4v",
    architecture="Glm4vForConditionalGeneration",
    model_type="glm4v",
    tokenizer=TokenizerSpec(
        specials=_SPECIALS,
        qwen_pretokenizer=False,
        end_token="<|user|>",
        chat_template=GLM4V_TEMPLATE,
        tokenizer_config={
            "tokenizer_class": "PreTrainedTokenizerFast",
            "eos_token": "<|endoftext|>",
            "pad_token": "<|endoftext|>",
            "clean_up_tokenization_spaces": False,
            "do_lower_case": False,
            "model_max_length": MAX_POSITIONS,
            "remove_space": False,
            "padding_side": "left",
        },
    ),
    configs=glm4v_configs,
    image_marker="<|begin_of_image|><|image|><|end_of_image|>",
    video_marker="<|begin_of_video|><|video|><|end_of_video|>",
    engines={"transformers": "", "mlx_vlm": "", "vllm": ""},
    thinking=True,
    generation_prompt="<|assistant|>",
    layout=GLM4V_LAYOUT,
)
