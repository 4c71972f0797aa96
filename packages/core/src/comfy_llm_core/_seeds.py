"""Seeds folded into what each engine stores.

The node's ``seed`` keeps ComfyUI's range, 0 to ``defaults.SEED_MAX``
(2**64 - 1). Engines store fewer bits: vLLM's default GPU runner keeps
per-request seeds in an int64 array (v1/worker/gpu/sample/states.py:26,
53-57 in 0.32), where 2**63 and above overflow and kill the engine core.
Each backend folds a seed into its engine's width, ``seed mod 2**bits``, so
every seed ComfyUI can pick runs, and two seeds that differ only above that
width sample the same stream on that engine.
"""

from __future__ import annotations

import hashlib
from typing import Final

__all__ = ["SEED_BITS_INT64", "SEED_BITS_UINT64", "fold_seed", "item_seed"]

#: Non-negative int64 (vLLM's seed arrays): seeds s and s + 2**63 share a stream.
SEED_BITS_INT64: Final = 63
#: uint64 (``torch.manual_seed``, ``mlx.core.random.seed``): every seed is its own stream.
SEED_BITS_UINT64: Final = 64


def fold_seed(seed: int | None, bits: int) -> int | None:
    """``seed mod 2**bits``; None (unseeded) stays None.

    Args:
        seed: A seed in ComfyUI's range (already validated), or None.
        bits: The engine's seed width.

    Returns:
        The seed the engine stores.
    """
    if seed is None:
        return None
    return int(seed) & ((1 << bits) - 1)


def item_seed(seed: int | None, key: str) -> int | None:
    """One item's own seed in a batch, derived from the request's seed and the item's key.

    Each image of a caption batch gets its own noise stream (vLLM's sampler
    keys its noise on (seed, position), v1/worker/gpu/sample/gumbel.py, so a
    shared seed would give every caption the same stream), and a rerun with
    the same seed reproduces each image's caption whatever else is in the
    batch: the key is the image's name (its file name, or ``image N`` of an
    IMAGE batch), not its position among the images still to caption.

    Args:
        seed: The request's seed, or None (unseeded: every item stays unseeded).
        key: The item's stable name.

    Returns:
        A seed in ComfyUI's range (each engine folds it to its width).
    """
    if seed is None:
        return None
    digest = hashlib.sha256(f"{int(seed)}\0{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big")
