"""One policy for reusing what a model reference resolved to, for every cache of it.

The node's in-process profile resolutions and the Modal dispatcher's staged
models both remember which commit a reference named; both ask the same
question before asking the Hub again, so one reference never means two
commits in one process for longer than :data:`defaults.BRANCH_REUSE_SECONDS`.
"""

from __future__ import annotations

import time

from comfy_llm_core import defaults

__all__ = ["reuse_answer"]


def reuse_answer(resolved_at: float, *, immutable: bool, now: float | None = None) -> bool:
    """Whether an answer resolved at ``resolved_at`` (``time.monotonic()``) may be reused.

    Args:
        resolved_at: When the reference was resolved, on the monotonic clock.
        immutable: The reference names a commit or a curated profile (never moves).
        now: The monotonic time to judge at (default: now).
    """
    if immutable:
        return True
    current = time.monotonic() if now is None else now
    return current - resolved_at < defaults.BRANCH_REUSE_SECONDS
