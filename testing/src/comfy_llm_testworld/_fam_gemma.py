r"""A tiny Gemma 3 checkpoint (google/gemma-3-4b-it's layout).

The tokenizer is SentencePiece-style (``GemmaTokenizer`` rebuilds it from
vocab + merges with spaces as ``▁`` and byte fallback,
``models/gemma/tokenization_gemma.py``), so it is trained that way. The chat
template writes ``<start_of_image>`` where an image part stands;
``Gemma3Processor`` replaces each with ``\n\n<start_of_image>`` +
``<image_soft_token>`` x ``image_seq_length`` + ``<end_of_image>\n\n``
(``processing_gemma3.py`` ``full_image_sequence``). The two text layers are
one sliding-window and one global layer (the real 4B repeats five sliding,
one global).
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
    ArchConfigs,
)
from comfy_llm_testworld._ckpt_tokenizer import TokenizerSpec
from comfy_llm_testworld._fam_base import NESTED_TOWER, FamilySpec, siglip_vision

__all__ = ["GEMMA3"]

_SPECIALS = (
    "<mask>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<start_of_image>",
    "<end_of_image>",
    "<image_soft_token>",
)

# google/gemma-3-*-it: a system turn becomes the first user turn's prefix, the assistant
# is "model", <start_of_image> where each image part stands; contents are trimmed.
GEMMA3_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- if messages[0]['content'] is string -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}"
    "{%- else -%}{%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}"
    "{%- endif -%}{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}{%- set first_user_prefix = '' -%}"
    "{%- set loop_messages = messages -%}{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{%- endif -%}"
    "{%- if message['role'] == 'assistant' -%}{%- set role = 'model' -%}"
    "{%- else -%}{%- set role = message['role'] -%}{%- endif -%}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}"
    "{%- if message['content'] is string -%}{{ message['content'] | trim }}"
    "{%- elif message['content'] is iterable -%}{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'image' -%}{{ '<start_of_image>' }}"
    "{%- elif item['type'] == 'text' -%}{{ item['text'] | trim }}{%- endif -%}"
    "{%- endfor -%}{%- else -%}{{ raise_exception('Invalid content type') }}{%- endif -%}"
    "{{ '<end_of_turn>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}"
)

_IMAGE_SIZE = 64
_PATCH = 16
#: 4 x 4 patches average-pooled to 2 x 2 soft tokens.
_TOKENS_PER_IMAGE = 4
_SLIDING_WINDOW = 512


def gemma3_configs(ids: dict[str, int], vocab_size: int) -> ArchConfigs:
    """A tiny ``Gemma3ForConditionalGeneration``."""
    text: dict[str, Any] = {
        "model_type": "gemma3_text",
        "vocab_size": vocab_size,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "query_pre_attn_scalar": HEAD_DIM,
        "hidden_activation": "gelu_pytorch_tanh",
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1_000_000.0,
        "rope_local_base_freq": 10_000.0,
        "sliding_window": _SLIDING_WINDOW,
        "sliding_window_pattern": 2,
        # MLX-VLM reads the pooling size here (mlx_vlm/models/gemma3/gemma3.py:27), with a
        # default of 256 that happens to match the real checkpoints' top-level value.
        "mm_tokens_per_image": _TOKENS_PER_IMAGE,
        "layer_types": ["sliding_attention", "full_attention"],
        "final_logit_softcapping": None,
        "attn_logit_softcapping": None,
        "tie_word_embeddings": True,
        "bos_token_id": ids["<bos>"],
        "eos_token_id": ids["<eos>"],
        "pad_token_id": ids["<pad>"],
        "dtype": "float32",
    }
    config = {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "text_config": text,
        "vision_config": siglip_vision(_IMAGE_SIZE, _PATCH),
        "boi_token_index": ids["<start_of_image>"],
        "eoi_token_index": ids["<end_of_image>"],
        "image_token_index": ids["<image_soft_token>"],
        "mm_tokens_per_image": _TOKENS_PER_IMAGE,
        "eos_token_id": [ids["<eos>"], ids["<end_of_turn>"]],
        "initializer_range": 0.02,
        "dtype": "float32",
    }
    image_processor = {
        "image_processor_type": "Gemma3ImageProcessor",
        "processor_class": "Gemma3Processor",
        "do_convert_rgb": None,
        "do_normalize": True,
        "do_pan_and_scan": None,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "image_seq_length": _TOKENS_PER_IMAGE,
        "resample": 2,
        "rescale_factor": 1 / 255,
        "size": {"height": _IMAGE_SIZE, "width": _IMAGE_SIZE},
    }
    processors: dict[str, dict[str, Any]] = {
        "preprocessor_config.json": image_processor,
        "processor_config.json": {
            "processor_class": "Gemma3Processor",
            "image_seq_length": _TOKENS_PER_IMAGE,
        },
    }
    eos = ("<end_of_turn>", "<eos>")
    generation = {
        "bos_token_id": ids["<bos>"],
        "eos_token_id": [ids[token] for token in eos],
        "pad_token_id": ids["<pad>"],
        "cache_implementation": "hybrid",
    }
    return ArchConfigs(config, generation, processors, eos)


GEMMA3 = FamilySpec(
    kind="gemma3",
    architecture="Gemma3ForConditionalGeneration",
    model_type="gemma3",
    tokenizer=TokenizerSpec(
        specials=_SPECIALS,
        qwen_pretokenizer=False,
        metaspace=True,
        end_token="<end_of_turn>",
        chat_template=GEMMA3_TEMPLATE,
        tokenizer_config={
            "tokenizer_class": "GemmaTokenizer",
            "bos_token": "<bos>",
            "eos_token": "<eos>",
            "pad_token": "<pad>",
            "unk_token": "<unk>",
            "mask_token": "<mask>",
            "add_bos_token": True,
            "add_eos_token": False,
            "spaces_between_special_tokens": False,
            "model_max_length": 4096,
            "extra_special_tokens": {
                "boi_token": "<start_of_image>",
                "eoi_token": "<end_of_image>",
                "image_token": "<image_soft_token>",
            },
        },
    ),
    configs=gemma3_configs,
    image_marker="<start_of_image>",
    renames=NESTED_TOWER,
    engines={"transformers": "", "mlx_vlm": "", "vllm": ""},
    template_file="chat_template.json",
    generation_prompt="<start_of_turn>model\n",
)
