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


def test_each_batch_item_gets_its_own_reproducible_seed() -> None:
    from comfy_llm_core import item_seed

    seeds = [item_seed(7, f"image {n}") for n in range(1, 65)]
    assert len(set(seeds)) == 64  # no two captions share a noise stream
    assert seeds == [item_seed(7, f"image {n}") for n in range(1, 65)]  # a rerun reproduces
    assert item_seed(7, "cat.png") != item_seed(8, "cat.png")  # the request's seed matters
    assert all(s is not None and 0 <= s <= defaults.SEED_MAX for s in seeds)
    assert item_seed(None, "cat.png") is None  # unseeded stays unseeded
