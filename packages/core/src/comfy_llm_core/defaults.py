"""Defaults shared by the node, the CLI and the resident model manager, defined once.

The node's input defaults, the CLI's option defaults and what the manager
uses when a programmatic call omits a value all read these names, so the
three never disagree. Values follow the seed system where it has one.

Per-target tables are keyed by the execution target's string value
(``local_apple``, ``local_cpu``, ``local_cuda``, ``modal``): core sits below
the package that defines :class:`ExecutionTarget`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = [
    "BRANCH_REUSE_SECONDS",
    "CAPTION_BATCH_SIZE",
    "DEFAULT_GPU",
    "MAX_CAPTION_BATCH_SIZE",
    "MAX_MODAL_WORKERS",
    "MAX_NEW_TOKENS",
    "MAX_RESERVE_GB",
    "MAX_RESIDENT_MODELS",
    "MAX_VIDEO_FRAMES",
    "MEMORY_RECOVERY_TIMEOUT_SECONDS",
    "RESERVE_GB",
    "SEED_MAX",
    "TEMPERATURE",
    "TOP_P",
    "VIDEO_FRAMES",
]

MAX_NEW_TOKENS = 512
"""Generated tokens per request, reasoning included."""

TEMPERATURE = 0.2
"""Sampling temperature (0 = greedy): the seed node's default."""

TOP_P = 0.95
"""Nucleus sampling mass."""

VIDEO_FRAMES = 12
"""Frames sampled uniformly from a VIDEO input: the seed node's default."""
MAX_VIDEO_FRAMES = 32
"""The most frames the node's widget offers (the seed's range); a profile's own
input limit can refuse fewer."""
MAX_RESERVE_GB = 256.0
"""The largest reserve the node's reserve widgets offer (the seed's range)."""

CAPTION_BATCH_SIZE = 8
"""Images the caption node hands the engine at once: a chunk's captions are
written when the chunk ends, so Cancel loses at most one chunk's work."""

MAX_CAPTION_BATCH_SIZE = 256
"""The largest caption batch the node and the CLI accept."""

DEFAULT_GPU = "L40S"
"""The Modal GPU type a request runs on when none is named (the node's ``modal_gpu``
widget, the CLI's ``--gpu``, the Modal app's functions): the seed system's choice,
48 GB for a model plus the image nodes beside it."""

BRANCH_REUSE_SECONDS = 300.0
"""How long a branch or tag reference (``owner/model``, ``@main``) stays pinned to the
commit it resolved to before the Hub is asked again (:func:`comfy_llm_core.reuse_answer`).
Commit and curated references never change, so their answer is kept for the process."""

MAX_MODAL_WORKERS = 64
"""The most Modal GPU containers one captioning job fans out to (node widget,
``--workers``, the fan-out itself)."""

SEED_MAX = 2**64 - 1
"""The largest sampling seed (ComfyUI's own seed widgets stop here too): the
node's seed widget, ``--seed`` and ``GenerationSettings`` all use it; torch
and MLX take any seed up to it. Larger values are refused before any model work."""

RESERVE_GB: Mapping[str, float] = MappingProxyType(
    {
        # Unified/host memory: the seed's local_reserve_free_memory_gb default.
        "local_apple": 4.0,
        "local_cpu": 4.0,
        # A desktop GPU shared with ComfyUI's image models: the node's VRAM default.
        "local_cuda": 4.0,
        # A dedicated Modal GPU: the seed's COMFY_MODAL_LLM_RESERVE_FREE_GB default,
        # headroom for the image/video nodes that run on the same worker after the LLM.
        "modal": 24.0,
    }
)
"""GiB kept free after a cold load, per target, when the caller gives none."""

MAX_RESIDENT_MODELS: Mapping[str, int] = MappingProxyType(
    {"local_apple": 1, "local_cpu": 1, "local_cuda": 2, "modal": 2}
)
"""Models kept loaded at once (LRU), per target."""

MEMORY_RECOVERY_TIMEOUT_SECONDS = 15.0
"""Longest wait for an evicted model's memory to show up before refusing."""
