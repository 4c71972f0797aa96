"""The result of staging: what a backend may load from."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from comfy_llm_core import ProgressCallback, ProgressEvent, ProgressStage

__all__ = ["StagedSnapshot", "in_place_snapshot"]


@dataclasses.dataclass(frozen=True)
class StagedSnapshot:
    """A completed snapshot on local disk: the only thing a backend may load from.

    Attributes:
        profile_id: The profile it was staged for, if the caller named one.
        repository: ``owner/name``.
        revision: The 40-hex commit.
        path: The snapshot directory (canonical, or a reused legacy directory).
        downloaded: True when this call changed the storage (fetched files
            and/or completed the snapshot); a Modal Volume needs a commit then.
        seconds: Wall time of this call.
        bytes_downloaded: Bytes received over the network by this call.
        files: The snapshot's files, as sorted POSIX paths relative to ``path``.
    """

    profile_id: str | None
    repository: str
    revision: str
    path: Path
    downloaded: bool
    seconds: float
    bytes_downloaded: int
    files: tuple[str, ...]


def in_place_snapshot(
    path: Path,
    files: tuple[str, ...],
    *,
    repository: str,
    revision: str,
    profile_id: str | None,
    started: float,
    progress: ProgressCallback,
    message: str,
) -> StagedSnapshot:
    """A snapshot used where it lies: nothing downloaded, one DOWNLOAD event."""
    progress(
        ProgressEvent(
            stage=ProgressStage.DOWNLOAD,
            message=message,
            value=float(len(files)),
            maximum=float(len(files)),
            unit="files",
            elapsed_seconds=time.monotonic() - started,
        )
    )
    return StagedSnapshot(
        profile_id=profile_id,
        repository=repository,
        revision=revision,
        path=path,
        downloaded=False,
        seconds=time.monotonic() - started,
        bytes_downloaded=0,
        files=files,
    )
