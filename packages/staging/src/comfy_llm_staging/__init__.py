"""comfy-llm-staging: pinned Hugging Face snapshots on local disk, complete or not at all.

Staging turns a repository and a 40-hex commit into a verified directory a
backend may load from: allow-listed files only (safetensors, configs,
tokenizer, processor, chat template; never Python or pickle), downloaded once
across processes under a lease, each checked against the Hub's size and
sha256, and marked complete last. See ``_layout`` for the on-disk layout and
``_marker`` for the completion marker.

Example::

    from comfy_llm_staging import default_storage_root, stage_snapshot

    staged = stage_snapshot("owner/model", "0123...cdef", storage_root=default_storage_root())
    load_from(staged.path)
"""

from __future__ import annotations

from ._in_place import stage_local_folder
from ._layout import (
    ALLOW_PATTERNS,
    IGNORE_PATTERNS,
    default_storage_root,
    snapshot_path,
)
from ._lease import break_lease
from ._marker import (
    LEGACY_MARKER_FILENAME,
    MARKER_FILENAME,
    StagedSelection,
    find_completed_snapshot,
    list_staged_selections,
    list_staged_snapshots,
    require_completed_snapshot,
)
from ._settings import LEASE_TIMEOUT_ENV, STORAGE_ROOT_ENV
from ._snapshot import StagedSnapshot
from ._stage import stage_snapshot
from .errors import (
    IncompleteSnapshotError,
    InsufficientDiskSpaceError,
    InvalidRepositoryError,
    InvalidRevisionError,
    LocalFolderChangedError,
    SnapshotContentError,
    SnapshotVerificationError,
    StagingError,
    StagingLeaseLostError,
    StagingLeaseTimeoutError,
    UnsafeSnapshotPathError,
)

__version__ = "0.1.0"

__all__ = [
    # staging
    "StagedSnapshot",
    "stage_snapshot",
    "stage_local_folder",
    "break_lease",
    # layout and markers
    "snapshot_path",
    "find_completed_snapshot",
    "list_staged_snapshots",
    "list_staged_selections",
    "StagedSelection",
    "require_completed_snapshot",
    "default_storage_root",
    "ALLOW_PATTERNS",
    "IGNORE_PATTERNS",
    "MARKER_FILENAME",
    "LEGACY_MARKER_FILENAME",
    "STORAGE_ROOT_ENV",
    "LEASE_TIMEOUT_ENV",
    # errors
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
