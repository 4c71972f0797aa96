"""The engine's GGUF rules, re-exported from profiles, where it lives.

GGUF safety is a weight-format rule checked where a file enters (resolution
of a local file, staging after a download), below this package; the backend
checks each file again, by the same code, right before llama.cpp loads it.
"""

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
