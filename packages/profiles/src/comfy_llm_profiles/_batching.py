"""How many images an engine is handed at once: one rule for the local batch and the Modal worker.

It lives here, below both comfy-node and modal-remote, because it reads only
what a profile says about its engine (:attr:`EngineSpec.continuous_batching`,
the width in its backend options).
"""

from __future__ import annotations

from comfy_llm_profiles._engines import engine_spec
from comfy_llm_profiles._profile import ModelProfile

__all__ = ["engine_batch_size"]


def engine_batch_size(profile: ModelProfile, batch_size: int) -> int:
    """``batch_size``; for a continuous-batching engine at least twice its width.

    vLLM schedules every request it is handed at once: a batch smaller than
    twice its ``max_num_seqs`` leaves the engine half empty at every batch's
    tail while the last sequences finish (vLLM review r2, F5). A profile
    without the width keeps ``batch_size``.
    """
    spec = engine_spec(profile.backend)
    if not spec.continuous_batching:
        return batch_size
    width = dict(profile.backend_options).get(spec.width_option)
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        return batch_size
    return max(batch_size, 2 * width)
