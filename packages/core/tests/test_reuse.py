"""One reuse policy for what a model reference resolved to (issue 28 step 5)."""

from __future__ import annotations

from comfy_llm_core import defaults, reuse_answer


def test_a_branch_answer_is_reused_until_the_reuse_window_ends() -> None:
    window = defaults.BRANCH_REUSE_SECONDS
    assert window == 300.0  # the node's and the Modal dispatcher's former twin constants
    assert reuse_answer(100.0, immutable=False, now=100.0 + window - 0.001)
    assert not reuse_answer(100.0, immutable=False, now=100.0 + window)


def test_a_commit_or_curated_answer_is_reused_for_the_process() -> None:
    assert reuse_answer(0.0, immutable=True, now=1e9)
