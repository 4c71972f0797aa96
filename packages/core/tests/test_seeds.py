"""Seeds folded into an engine's width."""

from __future__ import annotations

from comfy_llm_core import SEED_BITS_INT64, SEED_BITS_UINT64, defaults, fold_seed


def test_int64_width_keeps_every_seed_in_range_and_maps_the_top_bit_away() -> None:
    for seed in (0, 2**63 - 1, 2**63, defaults.SEED_MAX):
        assert 0 <= fold_seed(seed, SEED_BITS_INT64) <= 2**63 - 1
    assert fold_seed(2**63, SEED_BITS_INT64) == 0
    assert fold_seed(defaults.SEED_MAX, SEED_BITS_INT64) == 2**63 - 1
    assert fold_seed(12345 + 2**63, SEED_BITS_INT64) == fold_seed(12345, SEED_BITS_INT64)


def test_uint64_width_changes_no_seed_and_none_stays_none() -> None:
    for seed in (0, 2**63, defaults.SEED_MAX):
        assert fold_seed(seed, SEED_BITS_UINT64) == seed
    assert fold_seed(None, SEED_BITS_INT64) is None
