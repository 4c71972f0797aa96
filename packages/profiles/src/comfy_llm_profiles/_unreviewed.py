"""What to say about an architecture no reviewed family has.

An architecture outside the registries is one of three things, and the
refusal says which (issue 29): built into Transformers and **reviewed but
refused** (the review found a blocker: :data:`REFUSED`), built into
Transformers and **not reviewed yet**, or built into nothing — a custom class
that needs remote code, which is never enabled. Which architectures
Transformers builds in comes from its auto mappings at the pinned version,
copied into ``transformers_architectures.json`` (profiles never imports
Transformers; a test compares the file with the installed library).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Final

__all__ = ["REFUSED", "catalogue", "transformers_kind"]

#: Reviewed families that are refused, with the review's reason and what to pick instead
#: (packages/profiles/reviews/<family>.md).
REFUSED: Final = {
    "Phi4MultimodalForCausalLM": (
        "Phi-4-multimodal answers images through a vision LoRA adapter that loads with PEFT, "
        "which comfy-llm does not install, and vLLM 0.32 and MLX-VLM 0.7.10 do not run it "
        "(reviews/phi4-multimodal.md); pick Qwen/Qwen2.5-VL-3B-Instruct or google/gemma-3-4b-it."
    ),
    "Gemma3nForConditionalGeneration": (
        "Gemma 3n's vision tower is a timm MobileNetV5 and timm is not in comfy-llm's "
        "extras (reviews/gemma3.md); pick google/gemma-3-4b-it."
    ),
    "Florence2ForConditionalGeneration": (
        "Florence-2 takes a task token (<CAPTION>, <OCR>, ...) instead of a chat, and the "
        "node's task-prompt mode is not built yet (reviews/florence2.md); for short tag-style "
        "captions pick HuggingFaceTB/SmolVLM-256M-Instruct."
    ),
}

_KINDS: Final = (
    ("image_text_to_text", "image-text-to-text"),
    ("multimodal_lm", "multimodal language model"),
    ("causal_lm", "text-only causal language model"),
)


@cache
def catalogue() -> dict[str, object]:
    """``transformers_architectures.json``: the version and the mappings' class names."""
    text = (
        resources.files("comfy_llm_profiles")
        .joinpath("transformers_architectures.json")
        .read_text(encoding="utf-8")
    )
    data: dict[str, object] = json.loads(text)
    return data


def transformers_kind(architecture: str) -> str | None:
    """What the pinned Transformers builds ``architecture`` as, or None if it does not."""
    data = catalogue()
    for key, label in _KINDS:
        names = data[key]
        if isinstance(names, list) and architecture in names:
            return f"Transformers {data['transformers']}: {label}"
    return None
