"""A random-weight Qwen3.5 checkpoint of a published size, built where it will run.

The GPU check measures memory and captions/s at real size (vLLM review r2,
"GPU check plan", stage 2), and the lent machine has no network: nothing can
be downloaded and 64 MiB is all that travels. So the checkpoint is made
there: the dimensions of ``shapes.qwen35_shape`` (real hidden sizes, layer
layout, vision tower and vocabulary), seeded random weights in bfloat16
created on the device they will run on, and the tiny Qwen3.5's tokenizer,
chat template and generation config (its special-token ids are written into
the config, so images and the end token line up). The processor files are
the tiny ones with the real patch size and a 1 MP cap, so a 1024² image
gives the 1,024 tokens a real checkpoint gives it.

Random weights never stop early and say nothing; they cost what trained
weights cost, which is what the check measures. ``overrides`` shrinks the
shape for the CPU test of the same path.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from comfy_llm_testworld.checkpoints import build_checkpoint_files
from comfy_llm_testworld.shapes import qwen35_shape

__all__ = ["REAL_SIZE_PIXEL_CAP", "real_size_config", "write_real_size_checkpoint"]

#: The processor's largest image: 1024 x 1024, 1,024 tokens (the backend's cap for vLLM).
REAL_SIZE_PIXEL_CAP = 1024 * 1024
#: Learned vision positions of Qwen3.5's tower (a 48 x 48 grid).
_VISION_POSITIONS = 48 * 48
#: Special-token ids and small settings the tiny config carries and the real size keeps.
_KEPT_TOP = ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")
_KEPT_TEXT = ("bos_token_id", "eos_token_id", "pad_token_id", "hidden_act", "rms_norm_eps")


def _mrope_section(head_dim: int, partial_rotary_factor: float) -> list[int]:
    """Rotary frequencies split over (time, height, width): 32 -> [11, 11, 10] as Qwen3.5's."""
    frequencies = int(head_dim * partial_rotary_factor) // 2
    base, extra = divmod(frequencies, 3)
    return [base + (1 if axis < extra else 0) for axis in range(3)]


def real_size_config(
    size: str = "2b", *, overrides: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """config.json of a random-weight checkpoint: the published shape, the tiny tokens.

    Args:
        size: ``"2b"`` (the published shapes' other entry is FP8, which random
            bfloat16 weights cannot stand for).
        overrides: ``{"text_config": {...}, "vision_config": {...}}`` replacing
            dimensions (the CPU test's small version of the same path).
    """
    if size != "2b":
        raise ValueError(f"only the 2b shape is built with random weights, not {size!r}")
    tiny = json.loads(build_checkpoint_files("qwen3_5")["config.json"])
    shape = qwen35_shape(size)
    text = {**tiny["text_config"], **shape["text_config"]}
    text.update({key: tiny["text_config"][key] for key in _KEPT_TEXT})
    vision = {**tiny["vision_config"], **shape["vision_config"]}
    vision.update(model_type="qwen3_5_vision", num_position_embeddings=_VISION_POSITIONS)
    for section, values in (overrides or {}).items():
        {"text_config": text, "vision_config": vision}[section].update(values)
    factor = float(text["partial_rotary_factor"])
    text["rope_parameters"] = {
        **tiny["text_config"]["rope_parameters"],
        "mrope_section": _mrope_section(int(text["head_dim"]), factor),
    }
    text["dtype"] = "bfloat16"
    vision["out_hidden_size"] = text["hidden_size"]
    config = {key: tiny[key] for key in ("architectures", "model_type", *_KEPT_TOP)}
    config.update(
        text_config=text, vision_config=vision, tie_word_embeddings=False, dtype="bfloat16"
    )
    return config


def _processor_files(files: Mapping[str, bytes], patch: int) -> dict[str, bytes]:
    """The tiny processor files with the real patch size and the 1 MP cap."""
    out = {}
    for name in ("preprocessor_config.json", "video_preprocessor_config.json"):
        content = json.loads(files[name])
        content["patch_size"] = patch
        if name == "preprocessor_config.json":
            content["size"] = {"shortest_edge": 64 * 64, "longest_edge": REAL_SIZE_PIXEL_CAP}
        out[name] = json.dumps(content, indent=2).encode()
    return out


def write_real_size_checkpoint(
    dest: Path,
    size: str = "2b",
    *,
    device: str = "cpu",
    seed: int = 0,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> Path:
    """Write a random-weight checkpoint of ``size`` into ``dest`` (made on ``device``).

    Returns:
        ``dest``, a folder the node takes as a local model (safetensors, no code).
    """
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    config = real_size_config(size, overrides=overrides)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.json").write_text(json.dumps(config, indent=2))
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForImageTextToText.from_config(
            AutoConfig.from_pretrained(dest), dtype=torch.bfloat16
        )
    model.save_pretrained(dest)  # safetensors; config.json as Transformers writes it
    del model
    tiny = build_checkpoint_files("qwen3_5")
    kept = {
        name: data
        for name, data in tiny.items()
        if name not in ("config.json", "model.safetensors")
        and not name.endswith("preprocessor_config.json")
    }
    kept.update(_processor_files(tiny, int(config["vision_config"]["patch_size"])))
    for name, data in kept.items():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_bytes(data)
    return dest
