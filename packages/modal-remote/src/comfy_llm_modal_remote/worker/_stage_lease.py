"""One download per snapshot across installations: a lease in a named ``modal.Dict``.

``max_containers=1`` on the stager serializes one app's stages, but two
installations (two apps) sharing one weight Volume run two stagers, and each
sees its own view of the Volume until commit and reload (modal/volume.py:496),
so a lease file on the Volume cannot keep them apart. A named Dict belongs to
the workspace: every app that names it reaches it. It is named after the
Volume (:attr:`ModalSettings.stage_lease_dict_name`), so whoever shares the
Volume shares the leases.

What the real client offers (modal 1.6.4, ``site-packages/modal/dict.py``):

* ``put(key, value, skip_if_exists=True)`` creates the key only when absent
  and returns whether it did, atomically on the server (dict.py:556-571):
  the claim, and the takeover.
* No per-key TTL (an entry expires only after 7 days without use,
  dict.py:265-266) and no compare-and-swap. So a lease's deadline lives in its
  value, and the holder renews into a key of its own: a stalled holder renewing
  late never overwrites the lease of whoever took it over.
* ``pop(key, default)`` removes unconditionally (dict.py:583-595): a holder
  releases the shared key only after reading that it still names it.

Keys for one snapshot ``<repository>@<revision>``::

    stage:<snapshot>                    {"holder", "deadline"}  who stages it
    stage:<snapshot>#beat#<holder>      deadline, renewed while it stages
    stage:<snapshot>#takeover#<holder>  {"by"}  the one waiter that took over

The holder claims, renews from a small thread every ``renew_seconds``,
stages, commits the Volume and releases (in ``finally``; a crash leaves it
to the deadline). A waiter polls, telling the user it waits, until it can
claim. A holder whose deadline (the later of its lease and its beat) has
passed is taken over by the one waiter whose ``skip_if_exists`` put of the
takeover key for that holder succeeds; the others wait on the new holder.
Whoever waited reloads the Volume before staging, so a snapshot the other
installation committed is found complete and nothing is downloaded twice.

Clocks: every container runs on its own host, and nothing in a Dict is
stamped by the server, so a holder's deadline is its own clock's. A waiter
never takes over on a deadline alone while the holder might be alive: it
takes over when it has *seen* the lease and its beat unchanged for a whole
expiry on its own monotonic clock (a live holder renews its beat every
``renew_seconds``), or when the deadline is so far past that no plausible
skew explains it (:data:`CLOCK_TOLERANCE_SECONDS` beyond the expiry; a crash
found long after). Hosts whose clocks disagree by minutes then still stage
once.

What it cannot promise: a holder alive but silent for a whole expiry (its
renewer starved) is taken over while it still downloads, and both download;
the Volume keeps whole files either way (the completion marker is last).
Takeover keys are left to the Dict's idle expiry: removing one would let a
slow waiter that still sees the old holder take over a second time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import threading
import time
import uuid
from collections.abc import Iterator

from comfy_llm_core import ProgressCallback, ProgressEvent, ProgressStage

from ..wire._modal_api import DictStore
from ..wire._plain import WireDict, WireValue
from ..wire._settings import ModalSettings

__all__ = ["CLOCK_TOLERANCE_SECONDS", "HeldLease", "LeaseStore", "StageLeases", "snapshot_lease"]

logger = logging.getLogger("comfy_llm_modal_remote")

_MAX_POLL_SECONDS = 2.0
CLOCK_TOLERANCE_SECONDS = 600.0
"""How far two hosts' wall clocks may disagree before a deadline alone is trusted."""
_MAX_DICT_FAILURES = 5
"""Failed Dict rounds in a row (after the client's own retries) a waiter rides out."""


LeaseStore = DictStore
"""The part of ``modal.Dict`` the lease uses (the stand-in's Dict has it too)."""


@dataclasses.dataclass(frozen=True, slots=True)
class StageLeases:
    """Where the leases live and how long one lasts without renewal.

    Attributes:
        store: The Dict named after the weight Volume.
        expiry_seconds: A holder not heard from for this long is taken over.
        renew_seconds: How often a holder renews.
    """

    store: LeaseStore
    expiry_seconds: float
    renew_seconds: float

    @classmethod
    def from_settings(cls, store: LeaseStore, settings: ModalSettings) -> StageLeases:
        """The leases in ``store`` with the deployment's times (checked in the settings)."""
        return cls(store, settings.stage_lease_seconds, settings.stage_lease_renew_seconds)


@dataclasses.dataclass(frozen=True, slots=True)
class HeldLease:
    """A claimed lease: ``waited`` says another stager held it first."""

    key: str
    holder: str
    waited: bool
    took_over_from: str | None


def _beat_key(key: str, holder: str) -> str:
    return f"{key}#beat#{holder}"


def _number(value: WireValue) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return 0.0


def _holder_of(value: WireValue) -> tuple[str, float] | None:
    """(holder, deadline) of a lease value; another installation wrote it, so check it.

    An unreadable value counts as a lease that has already expired.
    """
    if value is None:
        return None
    if isinstance(value, dict) and isinstance(value.get("holder"), str):
        return value["holder"], _number(value.get("deadline"))
    return "unreadable", 0.0


def _release(store: LeaseStore, key: str, holder: str) -> None:
    try:
        store.pop(_beat_key(key, holder), None)
        current = _holder_of(store.get(key))
        if current is not None and current[0] == holder:
            store.pop(key, None)
    except Exception as error:  # the deadline frees it instead
        logger.warning("Releasing the stage lease %s failed (it will expire): %s", key, error)


class _Renewer:
    """Renews the holder's beat every ``renew_seconds`` until stopped."""

    def __init__(self, leases: StageLeases, key: str, holder: str) -> None:
        self._leases, self._key, self._holder = leases, key, holder
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stage-lease-renew", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._leases.renew_seconds):
            try:
                self._leases.store.put(
                    _beat_key(self._key, self._holder), time.time() + self._leases.expiry_seconds
                )
            except Exception as error:  # one missed renewal is not yet an expiry
                logger.warning("Renewing the stage lease %s failed: %s", self._key, error)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10.0)


def _acquire(leases: StageLeases, key: str, model: str, progress: ProgressCallback) -> HeldLease:
    store, holder = leases.store, uuid.uuid4().hex
    started, waited = time.monotonic(), False
    poll = min(leases.renew_seconds, _MAX_POLL_SECONDS)
    failures = 0
    seen = _Seen()
    try:
        while True:
            try:
                held = _try_claim(leases, key, holder, model, progress, seen)
            except Exception as error:  # a Dict RPC failed after the client's retries
                failures += 1
                if failures > _MAX_DICT_FAILURES:
                    raise
                logger.warning("The stage lease %s could not be read (%s); retrying", key, error)
                time.sleep(poll)
                continue
            failures = 0  # only consecutive failures end a wait that may last hours
            if held is not None:
                return dataclasses.replace(held, waited=held.waited or waited)
            waited = True
            progress(
                ProgressEvent(
                    stage=ProgressStage.DOWNLOAD,
                    message=f"Waiting for another installation staging {model}",
                    indeterminate=True,
                    elapsed_seconds=round(time.monotonic() - started, 3),
                )
            )
            time.sleep(poll)  # a cancel (SIGUSR1) raises here
    except BaseException:
        _release(store, key, holder)  # a cancel may land just after a claim succeeded
        raise


class _Seen:
    """What a waiter last saw of the holder, and since when (its own monotonic clock)."""

    def __init__(self) -> None:
        self.what: tuple[str, float, float] | None = None
        self.since = 0.0

    def unchanged_for(self, what: tuple[str, float, float]) -> float:
        """Seconds ``what`` (holder, deadline, beat) has been seen unchanged."""
        now = time.monotonic()
        if what != self.what:
            self.what, self.since = what, now
        return now - self.since


def _try_claim(  # noqa: PLR0917
    leases: StageLeases,
    key: str,
    holder: str,
    model: str,
    progress: ProgressCallback,
    seen: _Seen | None = None,
) -> HeldLease | None:
    """One round: claim the free lease, or take over an expired holder's; None: it is held."""
    store, seen = leases.store, seen or _Seen()
    while True:
        mine: WireDict = {"holder": holder, "deadline": time.time() + leases.expiry_seconds}
        if store.put(key, mine, skip_if_exists=True):
            return HeldLease(key, holder, False, None)
        current = _holder_of(store.get(key))
        if current is None:
            continue  # released between the put and the get: claim again
        other, deadline = current
        if other == holder:  # our claim landed but its answer was lost (the put is retried)
            return HeldLease(key, holder, False, None)
        beat = _number(store.get(_beat_key(key, other)))
        silent = seen.unchanged_for((other, deadline, beat)) >= leases.expiry_seconds
        long_past = time.time() > max(deadline, beat) + CLOCK_TOLERANCE_SECONDS
        if (silent or long_past) and store.put(
            f"{key}#takeover#{other}", {"by": holder}, skip_if_exists=True
        ):
            if _holder_of(store.get(key)) == current:  # still the expired one
                store.put(key, mine)
                store.pop(_beat_key(key, other), None)  # its beats mean nothing now
                logger.warning("Took over the stage lease %s from %s (expired)", key, other)
                progress(
                    ProgressEvent(
                        stage=ProgressStage.DOWNLOAD,
                        message=f"Another installation stopped staging {model}: taking over",
                        indeterminate=True,
                    )
                )
                return HeldLease(key, holder, True, other)
            continue  # it was released meanwhile: claim as usual
        return None


@contextlib.contextmanager
def snapshot_lease(
    leases: StageLeases, repository: str, revision: str, *, progress: ProgressCallback
) -> Iterator[HeldLease]:
    """Hold the snapshot's lease for the block (waiting for another holder first).

    Raises:
        InputCancellation: A cancel while waiting (nothing is left held).
    """
    key = f"stage:{repository}@{revision}"
    held = _acquire(leases, key, f"{repository}@{revision[:12]}", progress)
    renewer = _Renewer(leases, key, held.holder)
    try:
        yield held
    finally:
        renewer.stop()
        _release(leases.store, key, held.holder)
