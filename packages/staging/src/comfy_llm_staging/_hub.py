"""The Hub calls staging makes.

1. :func:`list_allowed_files`: the model info at the pinned commit, with file
   metadata, through profiles' bounded and checked fetch (timeouts, byte
   limit, field checks; one unsafe file name refuses the repository). It
   gives every file's size, git blob id and, for LFS files, sha256: the
   reference the download is verified against, and the *only* file list:
   the tree listing is never asked for.
2. :func:`download`: ``hf_hub_download`` of exactly those files into the
   in-progress directory, several at once, with an explicit endpoint, the
   Hub timeout and the progress adapter. huggingface_hub skips files already
   present with matching metadata, so a second call resumes an interrupted
   staging.

A failed request raises profiles' :class:`~comfy_llm_profiles.HubError`
(``comfy_llm_profiles.hub_error`` turns huggingface_hub's failures into one),
whose message ends in how to resume; staging adds no second translation.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from comfy_llm_profiles import (
    HubFile,
    fetch_model_info,
    hub_error,
    hub_request,
    hub_timeout_seconds,
    install_hub_timeouts,
)
from huggingface_hub import hf_hub_download
from huggingface_hub.utils import filter_repo_objects

from ._layout import ALLOW_PATTERNS, IGNORE_PATTERNS, SELECTION_PATTERNS, is_hidden
from .errors import SnapshotContentError

_MAX_PARALLEL_FILES = 8
RESUME = "run the stage again to resume (files already fetched are kept)"
"""How a staging that failed on the way is tried again: the fix every Hub error names."""


@dataclasses.dataclass(frozen=True)
class RemoteFile:
    """One allowed file of a revision, as the Hub describes it.

    Attributes:
        path: Path inside the repository (POSIX).
        size: Size in bytes of the real content (the LFS object for LFS files).
        sha256: The LFS sha256 (hex), or None for a file stored in git.
        blob_id: The git blob id (sha1 hex) of a file stored in git, if known.
    """

    path: str
    size: int
    sha256: str | None
    blob_id: str | None


def list_allowed_files(
    repository: str,
    revision: str,
    *,
    endpoint: str,
    token: str | None,
    files: Collection[str] = (),
) -> list[RemoteFile]:
    """Return the allowed files of a revision with their verification data.

    Every sibling's name is checked (``comfy_llm_core.hub_path_problem``)
    before any is used, whether allowed or not: one unsafe name refuses the
    whole repository. Hidden files (a component starting with ``.``) are
    never staged.

    Args:
        repository: ``owner/name``.
        revision: A 40-hex commit.
        endpoint: The Hub endpoint.
        token: A Hub token, or None for huggingface_hub's default (HF_TOKEN).
        files: A selection: exactly these files (each an allowed LFS file,
            verified by its sha256), no config.json needed; empty for all.

    Returns:
        The files matching the allow-list and not the ignore-list (or the
        selection), sorted by path.

    Raises:
        HubAccessError: Gated, or a token missing or refused (HTTP 401/403).
        ModelNotFoundError: No such repository, or no such commit (see ``kind``).
        HubDataError: Malformed metadata (oversized, too deep, bad fields), or a
            file name that would leave the snapshot folder (kind ``unsafe_path``).
        HubTimeoutError: The Hub did not answer within the Hub timeout.
        HubUnavailableError: Network or Hub failure.
        SnapshotContentError: No config.json among the allowed files, metadata
            without sizes, or an answer for another commit.
    """
    info = fetch_model_info(repository, revision, endpoint=endpoint, token=token, again=RESUME)
    if info.sha != revision:
        raise SnapshotContentError(
            repository, revision, f"the Hub answered with commit {info.sha} instead"
        )
    allowed = list(
        filter_repo_objects(
            [file for file in info.files if not is_hidden(file.path)],
            allow_patterns=[*ALLOW_PATTERNS, *(SELECTION_PATTERNS if files else ())],
            ignore_patterns=list(IGNORE_PATTERNS),
            key=lambda file: file.path,
        )
    )
    if files:
        allowed = _selected(repository, revision, allowed, files)
    found = []
    for file in allowed:
        if file.size is None:
            raise SnapshotContentError(
                repository, revision, f"the Hub metadata gives no size for {file.path}"
            )
        found.append(
            RemoteFile(
                path=file.path,
                size=file.size,
                sha256=file.sha256,
                blob_id=file.blob_id if file.sha256 is None else None,
            )
        )
    if not files and not any(remote.path == "config.json" for remote in found):
        raise SnapshotContentError(repository, revision, "it has no config.json")
    return sorted(found, key=lambda remote: remote.path)


def _selected(
    repository: str, revision: str, allowed: list[HubFile], names: Collection[str]
) -> list[HubFile]:
    """The allowed files named in ``names``: each present, and an LFS file with a sha256."""
    by_path = {file.path: file for file in allowed}
    for name in sorted(names):
        file = by_path.get(name)
        if file is None:
            raise SnapshotContentError(
                repository, revision, f"{name} is not among its allowed files at this commit"
            )
        if file.sha256 is None:
            raise SnapshotContentError(
                repository, revision, f"{name} has no LFS sha256, so it could not be verified"
            )
    return [by_path[name] for name in sorted(set(names))]


def download(
    repository: str,
    revision: str,
    files: list[RemoteFile],
    *,
    local_dir: Path,
    endpoint: str,
    token: str | None,
    tqdm_class: type[Any],
) -> None:
    """Download exactly ``files`` of a revision into ``local_dir``, several at once.

    Args:
        repository: ``owner/name``.
        revision: A 40-hex commit.
        files: The files to fetch (from :func:`list_allowed_files`).
        local_dir: The in-progress directory.
        endpoint: The Hub endpoint.
        token: A Hub token, or None for huggingface_hub's default.
        tqdm_class: The progress adapter class (see ``_progress``).

    Raises:
        HubAccessError: Gated, or a token missing or refused.
        ModelNotFoundError: No such repository or commit (see ``kind``).
        HubTimeoutError: The Hub stalled past the Hub timeout.
        HubUnavailableError: Network or Hub failure (partial files are kept).
        OSError: A disk error (the caller turns ENOSPC into a disk-full error).
    """
    install_hub_timeouts()
    timeout = hub_timeout_seconds()
    bars = _SnapshotBars(tqdm_class, len(files))

    def fetch(remote: RemoteFile) -> None:
        hf_hub_download(
            repository,
            remote.path,
            revision=revision,
            local_dir=str(local_dir),
            endpoint=endpoint,
            token=token,
            etag_timeout=timeout,
            tqdm_class=bars.file_bar_class(),
        )
        bars.file_done()

    try:
        _run_all(fetch, files)
    except Exception as error:
        request = hub_request(
            repository,
            revision,
            endpoint=endpoint,
            what="files",
            token=token,
            again=RESUME,
            missing="unavailable",  # a file the model info named: the Hub's fault
        )
        translated = hub_error(error, request)
        if translated is None or translated is error:
            raise
        raise translated from error


def _run_all(fetch: Callable[[RemoteFile], None], files: list[RemoteFile]) -> None:
    """Run ``fetch`` over ``files`` in a thread pool; raise the first failure."""
    if not files:
        return
    workers = min(_MAX_PARALLEL_FILES, len(files))
    with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="stage") as pool:
        futures = [pool.submit(fetch, remote) for remote in files]
        done, pending = concurrent.futures.wait(
            futures, return_when=concurrent.futures.FIRST_EXCEPTION
        )
        for future in pending:
            future.cancel()
        for future in futures:
            if future.done() and not future.cancelled() and future.exception() is not None:
                raise future.exception()  # type: ignore[misc]
        del done


class _SnapshotBars:
    """The bars ``snapshot_download`` would make, fed by per-file bars of ``hf_hub_download``.

    Three bars of the adapter class: bytes received ("Downloading bytes"),
    bytes written ("Reconstructing"), files finished ("Fetching N files").
    Each file's own bar adds its total and progress to the first two.
    """

    def __init__(self, tqdm_class: type[Any], count: int) -> None:
        self.transfer = tqdm_class(desc="Downloading bytes", total=0, initial=0, unit="B")
        self.disk = tqdm_class(desc="Reconstructing", total=0, initial=0, unit="B")
        self.files = tqdm_class(desc=f"Fetching {count} files", total=count, unit="it")

    def file_done(self) -> None:
        self.files.update(1)

    def file_bar_class(self) -> type[Any]:
        bars = self

        class _FileBar:
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                del args
                total = kwargs.get("total")
                if total:
                    bars.disk.total = (bars.disk.total or 0) + total
                    bars.transfer.total = (bars.transfer.total or 0) + total
                    bars.disk.refresh()
                initial = kwargs.get("initial") or 0
                if initial:
                    bars.disk.update(initial)

            def __enter__(self) -> Any:
                return self

            def __exit__(self, *exc_info: object) -> None:
                return None

            def update(self, n: float | None = 1) -> None:
                bars.disk.update(n)

            def update_transfer(self, n: float | None = 1) -> None:
                bars.transfer.update(n)

            def __getattr__(self, name: str) -> Any:
                if name.startswith("_"):
                    raise AttributeError(name)
                return lambda *args, **kwargs: None

        return _FileBar
