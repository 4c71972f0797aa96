"""A cross-process, cross-host lease so one stager downloads a snapshot at a time.

Two files sit next to the snapshot directory:

- ``<revision>.lock``: a :class:`filelock.FileLock`, held only for the moment
  it takes to inspect or replace the lease file (so stagers on one host never
  race on it).
- ``<revision>.lease.json``: ``{"pid", "host", "token", "acquired_at",
  "heartbeat"}``, created exclusively by the stager that downloads and
  refreshed by a heartbeat thread every few seconds. It works where flock does
  not reach (several hosts sharing a network volume).

A lease is stale, and taken over, when its heartbeat is older than
``LEASE_STALE_AFTER_SECONDS`` or when its holder ran on this host and its pid
no longer exists (a stager killed with SIGKILL). A waiter re-checks the
completion marker every time it holds the filelock, so a stager that waited
for another downloads nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import platform
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import filelock
from comfy_llm_core import ProgressCallback, ProgressEvent, ProgressStage

from . import _layout, _settings
from .errors import StagingLeaseTimeoutError

logger = logging.getLogger(__name__)

_POLL_START_SECONDS = 0.2
_POLL_MAX_SECONDS = 2.0


@dataclasses.dataclass(frozen=True)
class LeaseRecord:
    """What a lease file says about its holder."""

    pid: int | None
    host: str | None
    token: str | None
    heartbeat: float

    def describe(self) -> dict[str, Any]:
        """Return the record as a dict for error messages."""
        return {"pid": self.pid, "host": self.host, "heartbeat": self.heartbeat}


def _read_record(path: Path) -> LeaseRecord | None:
    """Return the lease file's record, or None when there is no lease file."""
    try:
        stat = path.stat()
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError:
        return LeaseRecord(pid=None, host=None, token=None, heartbeat=time.time())
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        # being written right now, or garbage: judge it by its age alone
        return LeaseRecord(pid=None, host=None, token=None, heartbeat=stat.st_mtime)
    pid, host, token, heartbeat = (data.get(k) for k in ("pid", "host", "token", "heartbeat"))
    return LeaseRecord(
        pid=pid if isinstance(pid, int) else None,
        host=host if isinstance(host, str) else None,
        token=token if isinstance(token, str) else None,
        heartbeat=float(heartbeat) if isinstance(heartbeat, int | float) else stat.st_mtime,
    )


def pid_alive(pid: int) -> bool:
    """Return whether a process of this host with ``pid`` is running (True when unknowable)."""
    if sys.platform == "win32":
        return True  # os.kill would terminate it; rely on the heartbeat instead
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True
    state = stat.rpartition(")")[2].split()[:1]
    return state != ["Z"]  # a killed but unreaped child is a zombie: dead for our purposes


def stale_reason(record: LeaseRecord, now: float | None = None) -> str | None:
    """Return why a lease is abandoned, or None while its holder counts as alive."""
    age = (time.time() if now is None else now) - record.heartbeat
    if age > _settings.LEASE_STALE_AFTER_SECONDS:
        return f"its heartbeat is {age:.0f} s old"
    if (
        record.pid is not None
        and record.host == platform.node()
        and record.pid != os.getpid()
        and not pid_alive(record.pid)
    ):
        return f"its holder, pid {record.pid}, has exited"
    return None


class Lease:
    """A held lease; refreshes its heartbeat until released."""

    def __init__(self, path: Path, token: str, acquired_at: float) -> None:
        self.path = path
        self.token = token
        self.acquired_at = acquired_at
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._heartbeat_loop, name=f"staging-lease-{path.name}", daemon=True
        )
        self._thread.start()

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(_settings.LEASE_HEARTBEAT_SECONDS):
            try:
                if not self.still_held():
                    return
                _write_atomically(self.path, _payload(self.token, self.acquired_at))
            except OSError as error:  # a missed beat is not fatal; staleness takes 90 s
                logger.warning("Could not refresh staging lease %s: %s", self.path, error)

    def still_held(self) -> bool:
        """Return whether the lease file still carries this lease's token."""
        record = _read_record(self.path)
        return record is not None and record.token == self.token

    def release(self) -> None:
        """Stop the heartbeat and remove the lease file if it is still ours."""
        self._stop.set()
        self._thread.join(timeout=5)
        with contextlib.suppress(OSError):
            if self.still_held():
                self.path.unlink()


def _write_atomically(path: Path, payload: dict[str, Any]) -> None:
    temporary = path.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        temporary.write_text(json.dumps(payload), encoding="utf-8")
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def _payload(token: str, acquired_at: float) -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "host": platform.node(),
        "token": token,
        "acquired_at": acquired_at,
        "heartbeat": time.time(),
    }


def _create_exclusively(path: Path, token: str) -> Lease | None:
    """Create the lease file if absent; return the lease, or None if someone else won."""
    acquired_at = time.time()
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return None
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(_payload(token, acquired_at)))
    return Lease(path, token, acquired_at)


@contextlib.contextmanager
def _guard(lock_file: Path, timeout: float) -> Any:
    """Hold the snapshot's filelock (a soft lock where flock is unsupported)."""
    lock: filelock.BaseFileLock = filelock.FileLock(str(lock_file))
    try:
        lock.acquire(timeout=timeout, poll_interval=0.05)
    except NotImplementedError:
        lock = filelock.SoftFileLock(str(lock_file))
        lock.acquire(timeout=timeout, poll_interval=0.05)
    try:
        yield
    finally:
        lock.release()


def clear_stale_lease(snapshot: Path) -> bool:
    """Remove a stale lease file next to a complete snapshot; return whether one was removed.

    A stager killed between promoting its snapshot and releasing its lease
    leaves the lease file behind; the next stager finds the snapshot complete
    and never takes the lease, so it cleans up here. Best effort: a lease
    whose holder may still be alive, or a busy filelock, is left alone.
    """
    lease_file, lock_file = _layout.lease_path(snapshot), _layout.lock_path(snapshot)
    record = _read_record(lease_file)
    if record is None or stale_reason(record) is None:
        return False
    try:
        with _guard(lock_file, timeout=1.0):
            record = _read_record(lease_file)
            if record is None or stale_reason(record) is None:
                return False
            lease_file.unlink()
    except (OSError, filelock.Timeout):
        return False
    return True


def break_lease(snapshot: Path) -> bool:
    """Remove the lease file next to ``snapshot`` whatever it says; return whether one was there.

    For a caller that serializes stagers itself and holds that lock now (the
    Modal stager under its lease across installations): to it, any lease file
    is a leftover of a stager that no longer holds the lock, e.g. one a killed
    container's background commit published to a Volume, which from another
    host would look alive until its heartbeat is 90 s old.
    """
    try:
        _layout.lease_path(snapshot).unlink()
    except FileNotFoundError:
        return False
    return True


def acquire_lease(
    snapshot: Path,
    *,
    timeout_seconds: float,
    is_complete: Callable[[], bool],
    progress: ProgressCallback,
) -> Lease | None:
    """Wait until this stager may download ``snapshot``, or it is complete.

    Args:
        snapshot: The canonical snapshot directory.
        timeout_seconds: How long to wait for another live stager.
        is_complete: Checked under the filelock before every attempt.
        progress: Receives indeterminate "waiting" events while another
            stager holds the lease.

    Returns:
        The lease to download under, or None when the snapshot became complete
        (another stager finished it): download nothing then.

    Raises:
        StagingLeaseTimeoutError: Another stager held a live lease for longer
            than ``timeout_seconds``.
    """
    snapshot.parent.mkdir(parents=True, exist_ok=True)
    lease_file, lock_file = _layout.lease_path(snapshot), _layout.lock_path(snapshot)
    token = uuid.uuid4().hex
    started = time.monotonic()
    poll = _POLL_START_SECONDS
    holder: LeaseRecord | None = None
    while True:
        waited = time.monotonic() - started
        try:
            with _guard(lock_file, timeout=max(0.0, min(timeout_seconds - waited, 1.0))):
                if is_complete():
                    return None
                holder = _read_record(lease_file)
                if holder is not None:
                    reason = stale_reason(holder)
                    if reason is not None:
                        logger.warning("Taking over staging lease %s: %s", lease_file, reason)
                        with contextlib.suppress(FileNotFoundError):
                            lease_file.unlink()
                        holder = None
                if holder is None:
                    lease = _create_exclusively(lease_file, token)
                    if lease is not None:
                        return lease
        except filelock.Timeout:
            pass  # another stager is inspecting the lease; go round again
        waited = time.monotonic() - started
        if waited >= timeout_seconds:
            record = holder.describe() if holder is not None else None
            who = (
                f"pid {record.get('pid')} on host {record.get('host')}"
                if record
                else "an unknown stager"
            )
            raise StagingLeaseTimeoutError(
                f"Waited {waited:.0f} s for {who} to finish staging this snapshot (limit "
                f"{timeout_seconds:g} s, lease {lease_file}). Raise "
                "COMFY_MODAL_LLM_STAGE_LEASE_TIMEOUT_SECONDS for very large models, or, if that "
                "stager is gone, delete the lease file.",
                lease_path=str(lease_file),
                waited_seconds=waited,
                limit_seconds=timeout_seconds,
                holder=record,
            )
        who = (
            f" (pid {holder.pid} on {holder.host})"
            if holder is not None and holder.pid is not None
            else ""
        )
        progress(
            ProgressEvent(
                stage=ProgressStage.DOWNLOAD,
                message=f"Waiting for another stager{who} to finish this model",
                indeterminate=True,
                elapsed_seconds=waited,
            )
        )
        time.sleep(min(poll, max(0.0, timeout_seconds - waited)))
        poll = min(poll * 1.5, _POLL_MAX_SECONDS)
