"""stage_snapshot: make one pinned repository revision complete on local disk.

The order of one staging::

    validate repository + 40-hex revision          (no network)
    completed canonical or legacy snapshot?  ──yes──► return, downloaded=False,
                                                       no Hub request at all
    complete, verifying Hugging Face cache snapshot of that commit?
                                             ──yes──► used in place (read-only,
                                                       nothing copied), no request
    HF_HUB_OFFLINE set?  ──yes──► profiles' OfflineResolutionError
    acquire the lease (wait for another stager; re-check the marker each time)
    .partial/ already marked (a stager killed before its rename)? ──► promote it
    model info at the commit → THE file list (names proven safe, sizes, digests)
    remove from .partial/ everything not on that list (links, strays)
    free-disk check (bytes and inodes) for what is still missing
    hf_hub_download of exactly those files into <revision>.partial/ (resumes)
    verify every file; a bad one is deleted and the staging fails
    remove anything else again, so the folder holds exactly the marker's list
    write the marker (atomic), rename .partial → <revision>, release the lease

A full disk (ENOSPC, EDQUOT) anywhere on the way becomes one
InsufficientDiskSpaceError naming the folder, what the snapshot needs and
what is reclaimable; a stale lease a killed stager left next to a complete
snapshot is removed when that snapshot is reused.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import shutil
import time
import uuid
from collections.abc import Collection, Iterator
from pathlib import Path

from comfy_llm_core import ProgressCallback, ProgressEvent, ProgressStage, ignore_progress
from comfy_llm_profiles import OfflineResolutionError, hub_offline

from . import _hub, _in_place, _layout, _lease, _marker, _settings, _verify
from ._progress import DownloadProgress
from ._snapshot import StagedSnapshot, in_place_snapshot
from .errors import InsufficientDiskSpaceError, StagingLeaseLostError

_DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)})

_VERIFY_EVENT_INTERVAL_SECONDS = 0.25


def stage_snapshot(
    repository: str,
    revision: str,
    *,
    storage_root: Path,
    profile_id: str | None = None,
    token: str | None = None,
    endpoint: str | None = None,
    progress: ProgressCallback = ignore_progress,
    lease_timeout_seconds: float | None = None,
    files: Collection[str] = (),
) -> StagedSnapshot:
    """Download, verify and mark complete one repository revision, once.

    A snapshot already complete (canonical, or a legacy directory keyed by
    ``profile_id``) is returned at once without any Hub request. Otherwise the
    stager takes the snapshot's lease (waiting while another live stager holds
    it), downloads only allow-listed files, verifies each against the Hub
    metadata and writes the completion marker last.

    Args:
        repository: ``owner/name``.
        revision: A 40-hex commit (resolve branches and tags first).
        storage_root: The storage root (see :func:`default_storage_root`).
        profile_id: The profile staging it; also the key of a legacy layout.
        token: A Hub token; None reads HF_TOKEN, then HUGGING_FACE_HUB_TOKEN.
        endpoint: The Hub endpoint; None reads HF_ENDPOINT now.
        progress: Receives DOWNLOAD events (bytes, files, waiting, verifying);
            may raise to cancel (partial files are kept for the next call).
        lease_timeout_seconds: How long to wait for another stager; None reads
            COMFY_MODAL_LLM_STAGE_LEASE_TIMEOUT_SECONDS (default 3600).
        files: Stage only these files (exact repository paths, each an LFS file
            verified by its sha256; ``*.gguf`` allowed, no config.json needed):
            one quantization of a GGUF repository. The selection has a folder
            of its own (``snapshot_path``); empty stages the whole snapshot.

    Returns:
        The staged snapshot.

    Raises:
        InvalidRepositoryError: ``repository`` is not ``owner/name``.
        InvalidRevisionError: ``revision`` is not a 40-hex commit.
        InvalidSettingError: A bad lease timeout.
        InvalidTokenError: A token that cannot be a header value (not echoed).
        StagingLeaseTimeoutError: Another stager held the lease too long.
        HubError: A Hub request failed, from profiles, untranslated: refused
            (HubAccessError), no such repository or commit (ModelNotFoundError),
            unusable metadata or a file name outside the snapshot folder
            (HubDataError: nothing is downloaded or deleted), a stall past
            COMFY_MODAL_LLM_HUB_TIMEOUT_SECONDS (HubTimeoutError) or a network
            or Hub failure (HubUnavailableError); a later call resumes; and
            HF_HUB_OFFLINE with nothing on disk (OfflineResolutionError).
        SnapshotContentError: No config.json, or metadata without sizes.
        InsufficientDiskSpaceError: Not enough free space or inodes, before or
            during the download (ENOSPC/EDQUOT).
        SnapshotVerificationError: A file does not match the Hub metadata.
        StagingLeaseLostError: Another stager took the lease over meanwhile.
    """
    started = time.monotonic()
    _layout.check_repository(repository)
    _layout.check_revision(repository, revision)
    storage_root = Path(storage_root)
    timeout = _settings.lease_timeout_seconds(lease_timeout_seconds)
    token = _settings.hub_token(token)

    found = _marker.find_completed_snapshot(
        storage_root, repository, revision, legacy_profile_id=profile_id, files=files
    )
    canonical = _layout.snapshot_path(storage_root, repository, revision, files=files)
    if found is not None:
        _lease.clear_stale_lease(canonical)
        return _reused(
            found,
            repository=repository,
            revision=revision,
            profile_id=profile_id,
            started=started,
            progress=progress,
        )
    # The HF cache's in-place use proves a whole snapshot (config.json and all); a
    # selection is always staged (see the README's decisions).
    cached = None if files else _in_place.find_hf_cache_snapshot(repository, revision, storage_root)
    if cached is not None:
        return in_place_snapshot(
            cached[0],
            cached[1],
            repository=repository,
            revision=revision,
            profile_id=profile_id,
            started=started,
            progress=progress,
            message="Using the Hugging Face cache's copy in place",
        )
    if hub_offline():
        raise OfflineResolutionError(
            f"{repository}@{revision} is not staged here nor complete in the Hugging Face "
            "cache, and HF_HUB_OFFLINE=1 forbids downloading it: unset HF_HUB_OFFLINE once to "
            "stage it, or pick a model already on disk.",
            repository=repository,
            revision=revision,
            kind="offline",
        )

    with _disk_full_as_error(canonical.parent, None):
        lease = _lease.acquire_lease(
            canonical,
            timeout_seconds=timeout,
            is_complete=lambda: (
                _marker.read_valid_marker(canonical, repository, revision) is not None
            ),
            progress=progress,
        )
    if lease is None:  # another stager completed it while this one waited
        return _reused(
            canonical,
            repository=repository,
            revision=revision,
            profile_id=profile_id,
            started=started,
            progress=progress,
        )
    try:
        return _download(
            lease,
            canonical,
            repository=repository,
            revision=revision,
            profile_id=profile_id,
            token=token,
            endpoint=_settings.hub_endpoint(endpoint),
            progress=progress,
            started=started,
            files=files,
        )
    finally:
        lease.release()


def _reused(
    path: Path,
    *,
    repository: str,
    revision: str,
    profile_id: str | None,
    started: float,
    progress: ProgressCallback,
) -> StagedSnapshot:
    """A completed snapshot returned as it is, by the same path an in-place use takes."""
    marker = _marker.read_valid_marker(path, repository, revision)
    return in_place_snapshot(
        path,
        tuple(sorted(marker.files)) if marker is not None else (),
        repository=repository,
        revision=revision,
        profile_id=profile_id,
        started=started,
        progress=progress,
        message="Model files already staged",
    )


@contextlib.contextmanager
def _disk_full_as_error(folder: Path, plan: _Plan | None) -> Iterator[None]:
    """Turn ENOSPC/EDQUOT raised inside into one InsufficientDiskSpaceError about ``folder``."""
    try:
        yield
    except OSError as error:
        if isinstance(error, InsufficientDiskSpaceError) or error.errno not in _DISK_FULL_ERRNOS:
            raise
        try:
            available = shutil.disk_usage(folder if folder.exists() else folder.parent).free
        except OSError:
            available = 0
        inodes = _verify.free_inodes(folder if folder.exists() else folder.parent)
        needed = plan.still_missing() if plan is not None else 0
        raise InsufficientDiskSpaceError(
            str(folder),
            needed + _settings.DISK_MARGIN_BYTES,
            available,
            snapshot_bytes=plan.total if plan is not None else 0,
            reclaimable_bytes=plan.present() if plan is not None else 0,
            inodes_exhausted=inodes == 0,
            during_download=True,
            margin_bytes=_settings.DISK_MARGIN_BYTES,
        ) from None


@dataclasses.dataclass
class _Plan:
    """The file list of one staging and what of it is on disk."""

    checker: _verify.Checker
    files: list[_hub.RemoteFile]

    @property
    def total(self) -> int:
        return sum(remote.size for remote in self.files)

    def still_missing(self) -> int:
        try:
            return self.checker.bytes_missing(self.files)
        except OSError:
            return self.total

    def present(self) -> int:
        try:
            return self.checker.bytes_present(self.files)
        except OSError:
            return 0


def _download(
    lease: _lease.Lease,
    canonical: Path,
    *,
    repository: str,
    revision: str,
    profile_id: str | None,
    token: str | None,
    endpoint: str,
    progress: ProgressCallback,
    started: float,
    files: Collection[str],
) -> StagedSnapshot:
    partial = _layout.partial_path(canonical)
    with _disk_full_as_error(partial, None):
        _prepare_partial(canonical, partial)
        marked = _marker.read_valid_marker(partial, repository, revision)
        if marked is not None:  # verified and marked, then killed before the rename
            _promote(partial, canonical)
            return _finished(
                canonical,
                marked.files,
                profile_id=profile_id,
                repository=repository,
                revision=revision,
                started=started,
                network_bytes=0,
            )
        _remove_stray_temporaries(partial)
    progress(
        ProgressEvent(
            stage=ProgressStage.DOWNLOAD,
            message="Listing model files on the Hub",
            indeterminate=True,
            elapsed_seconds=time.monotonic() - started,
        )
    )
    remote_files = _hub.list_allowed_files(
        repository, revision, endpoint=endpoint, token=token, files=files
    )
    checker = _verify.Checker(partial, repository, revision)
    plan = _Plan(checker, remote_files)
    wanted = [remote.path for remote in remote_files]
    with _disk_full_as_error(partial, plan):
        _layout.prune(partial, wanted, keep_dirs=(".cache",))
        missing = checker.bytes_missing(remote_files)
        _verify.check_free_space(
            partial,
            missing,
            missing_files=sum(1 for r in remote_files if checker.local_size(r) != r.size),
            snapshot_bytes=plan.total,
            reclaimable_bytes=plan.present(),
        )
        tracker = DownloadProgress(progress, planned_bytes=missing)
        _hub.download(
            repository,
            revision,
            remote_files,
            local_dir=partial,
            endpoint=endpoint,
            token=token,
            tqdm_class=tracker.make_bar_class(),
        )
        records = _verify_all(checker, remote_files, progress)
        if not lease.still_held():
            raise StagingLeaseLostError(
                f"Lost the staging lease {lease.path} to another stager (this one stopped "
                "heartbeating for too long). Stage again: the other stager's result is reused.",
                lease_path=str(lease.path),
            )
        shutil.rmtree(partial / ".cache", ignore_errors=True)
        _layout.prune(partial, wanted)
        _marker.write_marker(
            partial, repository=repository, revision=revision, files=records, profile_id=profile_id
        )
        _promote(partial, canonical)
    total = float(sum(int(record["size"]) for record in records.values()))
    progress(
        ProgressEvent(
            stage=ProgressStage.DOWNLOAD,
            message="Model files staged",
            value=total,
            maximum=total,
            unit="bytes",
            elapsed_seconds=time.monotonic() - started,
        )
    )
    return _finished(
        canonical,
        records,
        profile_id=profile_id,
        repository=repository,
        revision=revision,
        started=started,
        network_bytes=tracker.network_bytes,
    )


def _finished(
    canonical: Path,
    records: dict[str, dict[str, int | str]] | dict[str, dict[str, object]],
    *,
    profile_id: str | None,
    repository: str,
    revision: str,
    started: float,
    network_bytes: int,
) -> StagedSnapshot:
    return StagedSnapshot(
        profile_id=profile_id,
        repository=repository,
        revision=revision,
        path=canonical,
        downloaded=True,
        seconds=time.monotonic() - started,
        bytes_downloaded=max(0, network_bytes),
        files=tuple(sorted(records)),
    )


def _prepare_partial(canonical: Path, partial: Path) -> None:
    """Make ``partial`` a real folder of our own, reusing a damaged snapshot's files."""
    for path in (canonical, partial):
        if path.is_symlink():  # never ours: a link must not redirect writes or deletions
            path.unlink()
    if canonical.is_dir() and not partial.exists():
        # a damaged snapshot (no valid marker): reuse its files, they get re-verified
        os.replace(canonical, partial)
        (partial / _marker.MARKER_FILENAME).unlink(missing_ok=True)
    partial.mkdir(parents=True, exist_ok=True)


def _verify_all(
    checker: _verify.Checker, remote_files: list[_hub.RemoteFile], progress: ProgressCallback
) -> dict[str, dict[str, int | str]]:
    """Verify every file, reporting hashed bytes; raise on the first mismatch."""
    total = sum(remote.size for remote in remote_files)
    state = {"done": 0, "last": 0.0}

    def on_bytes(count: int) -> None:
        state["done"] += count
        now = time.monotonic()
        if now - state["last"] >= _VERIFY_EVENT_INTERVAL_SECONDS:
            state["last"] = now
            progress(
                ProgressEvent(
                    stage=ProgressStage.DOWNLOAD,
                    message="Verifying model files",
                    value=float(state["done"]),
                    maximum=float(total),
                    unit="bytes",
                )
            )

    return {remote.path: checker.verify(remote, on_bytes) for remote in remote_files}


def _remove_stray_temporaries(partial: Path) -> None:
    """Delete temporary files a killed stager left (huggingface_hub never reuses them)."""
    download_dir = partial / ".cache" / "huggingface" / "download"
    if any(p.is_symlink() for p in (download_dir, download_dir.parent, download_dir.parent.parent)):
        shutil.rmtree(partial / ".cache", ignore_errors=True)  # never ours; rmtree skips links
        with contextlib.suppress(OSError):
            (partial / ".cache").unlink(missing_ok=True)
        return
    if download_dir.is_dir():
        for stray in download_dir.rglob("*.incomplete"):
            stray.unlink(missing_ok=True)


def _promote(partial: Path, canonical: Path) -> None:
    """Rename the verified, marked directory into its canonical place."""
    if canonical.exists():  # an unmarked leftover (we hold the lease and it is not complete)
        discarded = canonical.with_name(f"{canonical.name}.discard-{uuid.uuid4().hex[:8]}")
        os.replace(canonical, discarded)
        shutil.rmtree(discarded, ignore_errors=True)
    os.replace(partial, canonical)
