"""Errors raised by snapshot staging.

Every error derives from :class:`StagingError`. Where a builtin category fits,
the error also derives from it (``ValueError`` for a bad request, ``OSError``
for disk and network trouble, ``TimeoutError`` for the lease wait), so callers
that only know the builtins still catch them. Each message names the value,
the limit it broke and the fix; the same facts are attributes for programs.

Errors survive pickling (the Modal dispatcher ships them across processes).
"""

from __future__ import annotations

from typing import Any

from comfy_llm_core import ComfyLLMError, DiskFullError, ErrorAction, quote_untrusted

__all__ = [
    "StagingError",
    "InvalidRepositoryError",
    "InvalidRevisionError",
    "InsufficientDiskSpaceError",
    "SnapshotContentError",
    "UnsafeSnapshotPathError",
    "SnapshotVerificationError",
    "IncompleteSnapshotError",
    "StagingLeaseTimeoutError",
    "StagingLeaseLostError",
    "LocalFolderChangedError",
]

_GIB = 1024**3


def _gib(size: int) -> str:
    """A size in the unit that shows it: never "0.00 GiB" for a few kilobytes."""
    if size >= _GIB // 10:
        return f"{size / _GIB:.2f} GiB"
    if size >= 1024**2:
        return f"{size / 1024**2:.1f} MiB"
    return f"{size:,} bytes"


def _gib_exact(size: int) -> str:
    """:func:`_gib` with the exact byte count when the unit rounds it."""
    shown = _gib(size)
    return shown if shown.endswith(" bytes") else f"{shown} ({size} bytes)"


class StagingError(ComfyLLMError):
    """Base class of every error raised by ``comfy_llm_staging``.

    The action is core's FATAL: unclassified staging trouble, so this worker
    stops trying.
    """


class InvalidRepositoryError(StagingError, ValueError):
    """The repository id is not of the form ``owner/name``.

    Attributes:
        repository: The value that was given.
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, message: str, *, repository: object) -> None:
        super().__init__(message)
        self.repository = repository


class InvalidRevisionError(StagingError, ValueError):
    """The revision is not a pinned 40-hex commit.

    Attributes:
        repository: The repository it was given for.
        revision: The value that was given.
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, message: str, *, repository: str, revision: object) -> None:
        super().__init__(message)
        self.repository = repository
        self.revision = revision


class InsufficientDiskSpaceError(StagingError, DiskFullError):
    """The storage volume lacks room (bytes or inodes) for the snapshot.

    Raised before a download that cannot fit, and when the disk fills up
    (ENOSPC, EDQUOT) during one; never as a bare ``[Errno 28]``. A
    :class:`~comfy_llm_core.DiskFullError`: not an input to fix (action
    ``RETRY``; the CLI exits 74).

    Attributes:
        path: The directory the snapshot is written to.
        needed_bytes: Bytes still to download plus the safety margin.
        available_bytes: Free bytes on that volume (when the error was raised).
        snapshot_bytes: The whole snapshot's size (0 when unknown).
        reclaimable_bytes: Bytes of this snapshot's partial download kept on
            that disk (deleting ``path`` frees them).
        inodes_exhausted: True when the volume ran out of inodes, not bytes.
        during_download: True when the disk filled up mid-way.
        margin_bytes: The safety margin included in ``needed_bytes``.
    """

    def __init__(
        self,
        path: str,
        needed_bytes: int,
        available_bytes: int,
        *,
        snapshot_bytes: int = 0,
        reclaimable_bytes: int = 0,
        inodes_exhausted: bool = False,
        during_download: bool = False,
        margin_bytes: int = 0,
    ) -> None:
        self.needed_bytes = needed_bytes
        self.snapshot_bytes = snapshot_bytes
        self.reclaimable_bytes = reclaimable_bytes
        self.during_download = during_download
        self.margin_bytes = margin_bytes
        files = max(0, needed_bytes - margin_bytes)
        free = f"{_gib_exact(available_bytes)} free there now"
        where = (
            f"The disk holding {path}"
            if during_download or inodes_exhausted
            else (f"Not enough free disk space under {path}:")
        )
        if inodes_exhausted:
            head = (
                f"The disk holding {path} ran out of inodes (free file entries) while staging "
                f"the model; free bytes ({_gib(available_bytes)}) do not help while no inode "
                "is free."
            )
        else:
            total = f" of {_gib(snapshot_bytes)} in all" if snapshot_bytes else ""
            need = (
                f"the model's files still need {_gib_exact(files)}{total}"
                if files
                else "the model's files are all on disk"
            )
            margin = (
                f", and {_gib(margin_bytes)} more is kept free as a safety margin"
                if (margin_bytes and files)
                else ""
            )
            if during_download and available_bytes >= needed_bytes:
                state = (
                    f"writing failed for lack of space although {free}: a disk quota, or "
                    "another program writing there, takes it"
                )
            else:
                state = free
            verb = "filled up while staging the model" if during_download else ""
            head = (
                f"{where} {verb}: {need}{margin}; {state}."
                if verb
                else (f"{where} {need}{margin}; {state}.")
            )
        kept = (
            f" The {_gib(reclaimable_bytes)} already fetched are kept there to resume; delete "
            "that folder to reclaim them."
            if reclaimable_bytes and files
            else ""
        )
        DiskFullError.__init__(
            self,
            path,
            available_bytes,
            inodes_exhausted=inodes_exhausted,
            message=(
                f"{head}{kept} Free some space on that disk, or point "
                "COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT at a volume with more room, then stage again."
            ),
        )


class SnapshotContentError(StagingError, ValueError):
    """The revision lacks what a loader needs (e.g. config.json), or metadata is incomplete.

    Attributes:
        repository: The repository being staged.
        revision: The commit being staged.
        problem: What is missing.
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, repository: str, revision: str, problem: str) -> None:
        self.repository = repository
        self.revision = revision
        self.problem = problem
        super().__init__(
            f"Revision {revision} of {repository} cannot be staged: {problem}. Choose a "
            "repository that ships config.json and safetensors weights."
        )


class UnsafeSnapshotPathError(SnapshotContentError):
    """The Hub metadata names a file that would leave the snapshot folder; nothing is staged.

    Attributes:
        path: The name as the Hub sent it (any characters; quoted in the message).
        reason: Why it is refused.
    """

    def __init__(self, repository: str, revision: str, path: object, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            repository,
            revision,
            f"it lists the file {quote_untrusted(path)}, which {reason}; a repository's "
            "files must be plain relative paths inside it, so the whole repository is "
            "refused and nothing was downloaded or deleted",
        )


class SnapshotVerificationError(StagingError):
    """A downloaded file does not match the Hub metadata; it has been deleted.

    Attributes:
        file: The file's path inside the snapshot.
        check: ``"size"``, ``"sha256"`` or ``"git-sha1"``.
        expected: The value from the Hub metadata.
        actual: The value of the downloaded bytes.
    """

    # The bad file was deleted: staging again downloads it anew.
    action = ErrorAction.RETRY

    def __init__(self, file: str, check: str, expected: object, actual: object) -> None:
        self.file = file
        self.check = check
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"Downloaded file {file} failed verification: {check} is {actual}, the Hub "
            f"metadata says {expected}. The file was deleted and the snapshot was not "
            "marked complete; stage again to re-download it (a repeat points at a "
            "corrupting proxy or mirror: check HF_ENDPOINT)."
        )


class IncompleteSnapshotError(StagingError):
    """A path is not a completed snapshot; loaders refuse it.

    Attributes:
        path: The directory that was offered.
        reason: What is missing or wrong.
    """

    # Staging again (the pipeline does it first) completes the snapshot.
    action = ErrorAction.RETRY

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            f"{path} is not a completed model snapshot: {reason}. Stage the model "
            "(comfy-llm stage MODEL) and load the path it returns."
        )


class StagingLeaseTimeoutError(StagingError, TimeoutError):
    """Another stager held the snapshot's lease for longer than the wait limit.

    Attributes:
        lease_path: The lease file.
        waited_seconds: How long this stager waited.
        limit_seconds: The wait limit.
        holder: The lease holder's record (pid, host, heartbeat), when readable.
    """

    action = ErrorAction.RETRY

    def __init__(
        self,
        message: str,
        *,
        lease_path: str,
        waited_seconds: float,
        limit_seconds: float,
        holder: dict[str, Any] | None,
    ) -> None:
        super().__init__(message)
        self.lease_path = lease_path
        self.waited_seconds = waited_seconds
        self.limit_seconds = limit_seconds
        self.holder = holder


class StagingLeaseLostError(StagingError):
    """Another stager took this stager's lease over (it looked stale); nothing was promoted.

    Attributes:
        lease_path: The lease file.
    """

    # The other stager's result is reused by the next attempt.
    action = ErrorAction.RETRY

    def __init__(self, message: str, *, lease_path: str) -> None:
        super().__init__(message)
        self.lease_path = lease_path


class LocalFolderChangedError(StagingError):
    """A local folder no longer holds what its profile pinned (it is used in place).

    Attributes:
        path: The folder.
        expected: The content pin the profile recorded.
        found: The content pin now (None when the folder fails the gate now).
        problem: Why it fails the gate now, if it does.
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, path: str, expected: str, found: str | None, problem: str | None) -> None:
        self.path = path
        self.expected = expected
        self.found = found
        self.problem = problem
        now = f"it now hashes to {found[:12]}…" if found else f"now: {problem}"
        super().__init__(
            f"Local model folder {path!r} changed since it was resolved (content pin "
            f"{expected[:12]}…, {now}). Re-resolve it: queue the workflow again, or run "
            f"comfy-llm resolve {path!r}; never edit a folder while a model from it runs."
        )
