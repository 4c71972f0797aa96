"""The stage lease's rules in one process, over the stand-in's Dict (no containers).

The container-level behaviour (two apps, a killed holder, a cancel) is in
``test_stage_lease.py``; these pin the rules each of those relies on.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from comfy_llm_core import ProgressEvent
from comfy_llm_modal_remote import StageLeases
from comfy_llm_modal_remote.worker._stage_lease import snapshot_lease
from comfy_llm_testworld.modal_strict import StrictDict

REPOSITORY, REVISION = "owner/model", "a" * 40
KEY = f"stage:{REPOSITORY}@{REVISION}"


def _leases(tmp_path: Path, expiry: float, renew: float) -> StageLeases:
    store = StrictDict.from_name("leases", root=tmp_path, create_if_missing=True)
    return StageLeases(store, expiry, renew)


def test_an_expired_holder_is_taken_over_by_exactly_one_waiter(tmp_path: Path) -> None:
    leases = _leases(tmp_path, expiry=30.0, renew=0.05)
    leases.store.put(KEY, {"holder": "dead", "deadline": time.time() - 3600})  # long past
    start = threading.Barrier(6)
    lock = threading.Lock()
    inside: list[int] = []
    most_inside = [0]
    takeovers: list[str | None] = []

    def stage() -> None:
        start.wait()
        with snapshot_lease(leases, REPOSITORY, REVISION, progress=lambda event: None) as held:
            with lock:
                inside.append(1)
                most_inside[0] = max(most_inside[0], len(inside))
                takeovers.append(held.took_over_from)
            time.sleep(0.02)  # widens the window two holders would share
            with lock:
                inside.pop()

    threads = [threading.Thread(target=stage) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(takeovers) == 6 and most_inside[0] == 1
    assert takeovers.count("dead") == 1 and takeovers.count(None) == 5
    left = leases.store.keys()
    assert [key.split("#")[1] for key in left] == ["takeover"], left


def test_a_renewing_holder_outlives_its_first_deadline(tmp_path: Path) -> None:
    leases = _leases(tmp_path, expiry=2.0, renew=0.1)
    release = threading.Event()
    waited: list[float] = []

    def hold() -> None:
        with snapshot_lease(leases, REPOSITORY, REVISION, progress=lambda event: None):
            release.wait(120)

    def waiting(event: ProgressEvent) -> None:
        assert "Waiting for another installation staging owner/model@aaaaaaaaaaaa" in event.message
        waited.append(event.elapsed_seconds or 0.0)
        if waited[-1] > 1.5 * leases.expiry_seconds:
            release.set()  # well past the holder's first deadline: let it go

    holder = threading.Thread(target=hold)
    holder.start()
    while leases.store.get(KEY) is None:
        time.sleep(0.01)
    with snapshot_lease(leases, REPOSITORY, REVISION, progress=waiting) as held:
        assert release.is_set(), "the waiter entered while the holder still held the lease"
        assert held.waited and held.took_over_from is None
    holder.join(60)
    assert leases.store.keys() == []


def test_a_waiter_interrupted_leaves_nothing_and_an_unreadable_lease_is_expired(
    tmp_path: Path,
) -> None:
    leases = _leases(tmp_path, expiry=30.0, renew=0.05)
    leases.store.put(KEY, {"holder": "alive", "deadline": time.time() + 600})

    def cancel(event: ProgressEvent) -> None:
        raise KeyboardInterrupt  # as InputCancellation lands at any bytecode

    with (
        pytest.raises(KeyboardInterrupt),
        snapshot_lease(leases, REPOSITORY, REVISION, progress=cancel),
    ):
        pass
    assert leases.store.keys() == [KEY] and leases.store.get(KEY)["holder"] == "alive"
    leases.store.put(KEY, "garbage written by something else")
    with snapshot_lease(leases, REPOSITORY, REVISION, progress=lambda event: None) as held:
        assert held.took_over_from == "unreadable"


def test_a_holder_that_fails_releases_at_once(tmp_path: Path) -> None:
    leases = _leases(tmp_path, expiry=600.0, renew=0.05)
    with (
        pytest.raises(RuntimeError),
        snapshot_lease(leases, REPOSITORY, REVISION, progress=lambda event: None),
    ):
        raise RuntimeError("the download failed")
    assert leases.store.keys() == []  # no expiry to wait out: the next stager claims at once
    with snapshot_lease(leases, REPOSITORY, REVISION, progress=lambda event: None) as held:
        assert not held.waited


def test_a_live_holder_whose_clock_is_behind_is_not_taken_over(tmp_path: Path) -> None:
    """Its deadline reads as past on the waiter's clock; its beat still moves (finding 23)."""
    leases = _leases(tmp_path, expiry=1.0, renew=0.1)
    beat = f"{KEY}#beat#slow-clock"
    leases.store.put(KEY, {"holder": "slow-clock", "deadline": time.time() - 300})
    alive, claimed = threading.Event(), threading.Event()

    def renew_like_a_host_five_minutes_behind() -> None:
        while not alive.wait(0.1):
            leases.store.put(beat, time.time() - 300 + leases.expiry_seconds)

    renewer = threading.Thread(target=renew_like_a_host_five_minutes_behind)
    renewer.start()
    waited: list[float] = []

    def waiting(event: ProgressEvent) -> None:
        waited.append(event.elapsed_seconds or 0.0)
        if waited[-1] > 3 * leases.expiry_seconds:  # three expiries of renewals seen
            alive.set()  # the holder stops renewing (and dies): now it may be taken over

    try:
        with snapshot_lease(leases, REPOSITORY, REVISION, progress=waiting) as held:
            claimed.set()
            assert alive.is_set(), "took over a holder that was still renewing"
            assert held.took_over_from == "slow-clock"
    finally:
        alive.set()
        renewer.join(10)
    assert claimed.is_set()
