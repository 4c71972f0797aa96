"""The bounded GGUF reader, re-exported from profiles, where it lives.

GGUF safety is a weight-format rule checked where a file enters (resolution
of a local file, staging after a download), below this package; the backend
checks each file again, by the same code, right before llama.cpp loads it.
"""

from __future__ import annotations

from comfy_llm_profiles._gguf_format import (
    GGML_TYPES,
    GGUF_LIMITS,
    GgufFile,
    GgufFormatError,
    GgufLimits,
    GgufTensor,
    read_gguf,
)

__all__ = [
    "GGML_TYPES",
    "GGUF_LIMITS",
    "GgufFile",
    "GgufFormatError",
    "GgufLimits",
    "GgufTensor",
    "read_gguf",
]
