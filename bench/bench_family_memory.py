"""The profiles' memory estimate next to what Transformers allocates, per reviewed family.

For one member per family (2-4B where the family has one), the
reconstructed config (``comfy_llm_testworld.real_configs``) goes through:

* **the estimate** the profiles model gives today on ``local_cuda``
  (``comfy_llm_profiles.estimate_memory_bytes``: weights x 1.15 + its KV
  term + 1.5 GiB), with the context the profile configures (``decide``'s:
  the advertised one, class defaults included, capped at 32768; for a
  refused family the config's own value, capped);
* **the engine's allocation**, scaled from Transformers' own code: the
  weights are the parameters of the model Transformers 5.24 builds from that
  config (on the meta device, so no memory is used) at 2 bytes each; the KV
  cache is what Transformers' ``DynamicCache`` keeps for the same context:
  per layer, ``cache_utils.get_layer_types_and_kwargs`` decides full,
  sliding (``min(context, sliding_window)`` tokens) or convolution state,
  times ``2 x kv_heads x head_dim x 2`` bytes; Llama 3.2 Vision's
  cross-attention layers keep one image's vision tokens.

The scaling is checked first on each family's tiny checkpoint: a real CPU
generation's parameter bytes and its returned cache's tensor bytes must equal
what the same computation predicts for the tiny config (``checks``).

    uv run --frozen python bench/bench_family_memory.py --out bench/results/family_memory.json
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from pathlib import Path
from typing import Any

#: The member measured per family: the 2-4B one where the family has one.
MEMBERS = {
    "qwen2_5_vl": "Qwen/Qwen2.5-VL-3B-Instruct",
    "qwen2_vl": "Qwen/Qwen2-VL-2B-Instruct",
    "gemma3": "google/gemma-3-4b-it",
    "llava_joycaption": "fancyfeast/llama-joycaption-beta-one-hf-llava",
    "llava_next": "llava-hf/llava-v1.6-mistral-7b-hf",
    "mllama": "meta-llama/Llama-3.2-11B-Vision-Instruct",
    "internvl": "OpenGVLab/InternVL3-2B-hf",
    "mistral3": "mistralai/Mistral-Small-3.1-24B-Instruct-2503",
    "phi4_multimodal": "microsoft/Phi-4-multimodal-instruct",
    "glm4v": "zai-org/GLM-4.1V-9B-Thinking",
    "lfm2_vl": "LiquidAI/LFM2-VL-1.6B",
    "florence2": "florence-community/Florence-2-base-ft",
}
_GIB = 1024**3
_CONTEXT_CAP = 32768


def _text(config: Any) -> Any:
    return config.get_text_config(decoder=True)


def kv_bytes(config: Any, tokens: int, element_bytes: int, encoder_tokens: int = 0) -> int:
    """KV bytes Transformers' DynamicCache holds after ``tokens`` tokens (see the module doc).

    An encoder-decoder (Florence-2) caches its decoder's ``tokens`` and, for
    cross-attention, the encoder's ``encoder_tokens`` (image tokens + prompt).
    """
    from transformers.cache_utils import get_layer_types_and_kwargs

    text = _text(config)
    if getattr(config, "is_encoder_decoder", False):
        text = config.text_config
        per_token = 2 * text.d_model * element_bytes  # all heads: d_model = heads x head_dim
        return text.decoder_layers * per_token * (tokens + encoder_tokens)
    layer_types, kwargs = get_layer_types_and_kwargs(text)
    heads = text.num_attention_heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    per_token = 2 * kv_heads * head_dim * element_bytes
    cross = set(getattr(text, "cross_attention_layers", None) or ())
    vision_tokens = _vision_tokens(config)
    total = 0
    for index, (kind, options) in enumerate(zip(layer_types, kwargs, strict=True)):
        if index in cross:
            total += per_token * vision_tokens
        elif kind in ("sliding_attention", "chunked_attention"):
            total += per_token * min(tokens, int(options["sliding_window"]))
        elif kind == "conv":
            total += text.hidden_size * text.conv_L_cache * element_bytes
        elif kind != "dummy":
            total += per_token * tokens
    return total


def _vision_tokens(config: Any) -> int:
    """Tokens one image leaves in Llama 3.2 Vision's cross-attention cache (0 elsewhere)."""
    vision = getattr(config, "vision_config", None)
    if getattr(config, "model_type", "") != "mllama" or vision is None:
        return 0
    patches = (vision.image_size // vision.patch_size) ** 2 + 1
    return int(vision.max_num_tiles * patches)


def parameter_bytes(model: Any, element_bytes: int) -> int:
    return sum(p.numel() for p in model.parameters()) * element_bytes


def _meta_model(path: Path, auto_class: str) -> tuple[Any, Any]:
    import torch
    import transformers

    config = transformers.AutoConfig.from_pretrained(path)
    with torch.device("meta"):
        model = getattr(transformers, auto_class).from_config(config)
    return config, model


def _context(config: dict[str, Any], weight_bytes: int) -> int:
    """The context the profile configures on local_cuda (the advertised one, capped, else)."""
    from comfy_llm_profiles import ProfileError, decide

    try:
        only = {"transformers"}
        return decide(
            "local_cuda", config, weight_bytes=weight_bytes, backends=only
        ).limits.context_tokens
    except ProfileError:  # a family refused today: its advertised context, capped
        pass
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    declared = text.get("max_position_embeddings", config.get("max_position_embeddings"))
    return min(int(declared or 4096), _CONTEXT_CAP)


def measure_member(kind: str, repository: str) -> dict[str, Any]:
    from comfy_llm_profiles import estimate_memory_bytes, registry_for
    from comfy_llm_testworld.families import family_spec
    from comfy_llm_testworld.real_configs import REAL_CHECKPOINTS, real_checkpoint_files

    entry = REAL_CHECKPOINTS[repository]
    folder = Path(tempfile.mkdtemp())
    files = real_checkpoint_files(repository)
    for name, content in files.items():
        (folder / name).write_bytes(content)
    raw = json.loads(files["config.json"])
    context = _context(raw, entry.weight_bytes)
    registry = registry_for("local_cuda")
    estimate = estimate_memory_bytes(raw, entry.weight_bytes, context, registry, "bfloat16")
    weights_term = math.ceil(entry.weight_bytes * registry.policy.weight_overhead)
    estimate_kv = estimate - weights_term - registry.policy.activation_bytes
    config, model = _meta_model(folder, family_spec(kind).auto_class)
    engine_weights = parameter_bytes(model, 2)
    # an encoder-decoder's cross-attention keeps the encoder's input: the image's tokens
    image_tokens = json.loads(files["preprocessor_config.json"]).get("image_seq_length", 0)
    encoder = image_tokens if getattr(config, "is_encoder_decoder", False) else 0
    engine_kv = kv_bytes(config, context, 2, encoder)
    return {
        "family": kind,
        "repository": repository,
        "context_tokens": context,
        "estimate_gib": round(estimate / _GIB, 2),
        "estimate_kv_gib": round(estimate_kv / _GIB, 2),
        "engine_weights_gib": round(engine_weights / _GIB, 2),
        "engine_kv_gib": round(engine_kv / _GIB, 2),
        "engine_weights_plus_kv_gib": round((engine_weights + engine_kv) / _GIB, 2),
        "estimate_over_engine": round(estimate / (engine_weights + engine_kv), 2),
        "kv_estimate_over_engine": (round(estimate_kv / engine_kv, 2) if engine_kv else None),
        # what the engine would keep at the cap, where the profile configured less
        "engine_kv_at_cap_gib": round(kv_bytes(config, _CONTEXT_CAP, 2, encoder) / _GIB, 2),
    }


def check_tiny(kind: str) -> dict[str, Any]:
    """A real generation on the tiny checkpoint against the scaled computation."""
    import torch
    import transformers
    from comfy_llm_testworld.families import family_spec, write_family_checkpoint
    from PIL import Image

    spec = family_spec(kind)
    path = write_family_checkpoint(kind, Path(tempfile.mkdtemp()) / kind)
    processor = transformers.AutoProcessor.from_pretrained(path)
    model = getattr(transformers, spec.auto_class).from_pretrained(path, dtype=torch.float32)
    side = {"phi4_multimodal": 448, "gemma3": 64, "lfm2_vl": 64, "florence2": 32}.get(kind, 56)
    image = Image.new("RGB", (side, side), (90, 120, 200))
    if kind == "florence2":
        inputs = processor(text=["<CAPTION>"], images=image, return_tensors="pt")
    else:
        content: Any = (
            "Describe."
            if kind == "llava_joycaption"
            else [
                {"type": "image"},
                {"type": "text", "text": "Describe."},
            ]
        )
        owner = processor if processor.chat_template else processor.tokenizer
        prompt = owner.apply_chat_template(
            [{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True
        )
        bos = processor.tokenizer.bos_token
        extra = {"add_special_tokens": False} if bos and prompt.startswith(bos) else {}
        inputs = processor(text=[prompt], images=[[image]], return_tensors="pt", **extra)
    new = 6
    with torch.inference_mode():
        out = model.generate(
            **inputs,
            max_new_tokens=new,
            min_new_tokens=new,
            do_sample=False,
            return_dict_in_generate=True,
        )
    cache = out.past_key_values
    encoder_tokens = 0
    if getattr(model.config, "is_encoder_decoder", False):
        parts = cache.self_attention_cache, cache.cross_attention_cache
        measured = sum(_cache_bytes(part) for part in parts)
        tokens = new  # the start token and new - 1 generated ones
        encoder_tokens = int(inputs["input_ids"].shape[1])
    else:
        measured = _cache_bytes(cache)
        tokens = inputs["input_ids"].shape[1] + new - 1  # the last token is not cached
    predicted = kv_bytes(model.config, tokens, 4, encoder_tokens)
    return {
        "family": kind,
        "tokens": int(tokens),
        "kv_measured_bytes": measured,
        "kv_predicted_bytes": predicted,
        "weights_measured_bytes": parameter_bytes(model, 4),
        "weights_meta_bytes": parameter_bytes(_meta_model(path, spec.auto_class)[1], 4),
    }


def _cache_bytes(cache: Any) -> int:
    total = 0
    for layer in getattr(cache, "layers", ()):
        for name in ("keys", "values", "conv_states", "recurrent_states"):
            value = getattr(layer, name, None)
            if isinstance(value, dict):  # linear-attention/conv layers: one entry per state
                value = list(value.values())
            tensors = value if isinstance(value, list | tuple) else [value]
            for tensor in tensors:
                if getattr(tensor, "numel", None) is not None and tensor.numel():
                    total += tensor.numel() * tensor.element_size()
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    checks = [check_tiny(kind) for kind in MEMBERS]
    members = [measure_member(kind, repository) for kind, repository in MEMBERS.items()]
    report = {"checks": checks, "members": members}
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
