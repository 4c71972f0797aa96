"""The engine's GGUF rules, which live in profiles beside the reader (see ``_gguf_format``);
re-exported so the backend checks each file again right before llama.cpp loads it."""

from __future__ import annotations

from comfy_llm_profiles._gguf_rules import (
    FILE_TYPES,
    TEXT_ARCHITECTURES,
    VISION_PROJECTORS,
    GgufModel,
    GgufProjector,
    check_model_file,
    check_projector_file,
)

__all__ = [
    "FILE_TYPES",
    "TEXT_ARCHITECTURES",
    "VISION_PROJECTORS",
    "GgufModel",
    "GgufProjector",
    "check_model_file",
    "check_projector_file",
]
