"""The stage lease's rules in one process, over the stand-in's Dict (no containers).

The container-level behaviour (two apps, a killed holder, a cancel) is in
``test_stage_lease.py``; these pin the rules each of those relies on.
"""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

import pytest
from comfy_llm_core import ProgressEvent
from comfy_llm_modal_remote import StageLeases
from comfy_llm_modal_remote.worker._stage_lease import snapshot_lease
from comfy_llm_testworld.modal_strict import StrictDict, set_round_trip

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


def test_a_claim_whose_answer_was_lost_is_the_stagers_own(tmp_path: Path) -> None:
    """The claim's ``put`` landed but its answer did not (finding 23, a Dict that fails).

    The client retries or gives up on a lost answer; either way the retried
    ``put(skip_if_exists=True)`` answers False and the lease names this stager.
    It must hold it at once, not wait a whole expiry on itself and then take
    over from itself.
    """
    leases = _leases(tmp_path, expiry=3.0, renew=0.1)
    leases.store.fail_next(1, "ConnectionError", applied=True)  # type: ignore[attr-defined]
    events: list[str] = []
    with snapshot_lease(
        leases, REPOSITORY, REVISION, progress=lambda event: events.append(event.message)
    ) as held:
        assert leases.store.get(KEY)["holder"] == held.holder  # type: ignore[index]
        assert (held.waited, held.took_over_from, events) == (False, None, [])
    assert leases.store.keys() == []


def test_dict_failures_spread_over_a_long_wait_do_not_fail_the_stage(tmp_path: Path) -> None:
    """Only consecutive failures count: a wait of hours meets a transient error now and then."""
    leases = _leases(tmp_path, expiry=600.0, renew=0.05)
    store: StrictDict = leases.store  # type: ignore[assignment]
    store.put(KEY, {"holder": "other", "deadline": time.time() + 600})
    store.put(f"{KEY}#beat#other", time.time() + 600)
    held: list[object] = []
    failed: list[BaseException] = []

    def stage() -> None:
        try:
            with snapshot_lease(leases, REPOSITORY, REVISION, progress=lambda event: None) as h:
                held.append(h)
        except BaseException as error:
            failed.append(error)

    waiter = threading.Thread(target=stage)
    waiter.start()
    for _ in range(8):  # more than the consecutive failures a waiter rides out
        before = store.rpc_count()
        store.fail_next(1)
        while list(store.folder.glob(".fail-*")) or store.rpc_count() < before + 6:
            assert waiter.is_alive(), failed  # one failure, then a whole poll that worked
            time.sleep(0.01)
    store.pop(KEY)  # the other installation releases
    waiter.join(60)
    assert failed == [] and len(held) == 1


def test_a_waiter_polls_the_dict_with_pauses_not_in_a_loop(tmp_path: Path) -> None:
    """Each Dict call is a round trip (dict.py:500, 566): a waiter makes a few per poll."""
    set_round_trip(tmp_path, 0.005)
    leases = _leases(tmp_path, expiry=600.0, renew=0.1)
    store: StrictDict = leases.store  # type: ignore[assignment]
    store.put(KEY, {"holder": "other", "deadline": time.time() + 600})
    polls: list[int] = []

    def waiting(event: ProgressEvent) -> None:
        polls.append(store.rpc_count())
        if len(polls) == 6:
            store.pop(KEY)  # released: the next poll claims

    start = store.rpc_count()
    with snapshot_lease(leases, REPOSITORY, REVISION, progress=waiting):
        pass
    per_poll = [b - a for a, b in itertools.pairwise([start, *polls])]
    assert max(per_poll[1:]) <= 3, per_poll  # claim, read the lease, read its beat
