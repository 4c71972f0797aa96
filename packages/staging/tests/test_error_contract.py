"""Each public error's category and fields are part of its contract (CLI, Modal wire).

This table pins the category every public class ends up with, wherever it is
declared, and the fields the revision errors share through their base.
"""

from __future__ import annotations

import pytest
from comfy_llm_core import ErrorAction
from comfy_llm_staging import errors
from comfy_llm_staging.errors import (
    SnapshotAccessError,
    SnapshotContentError,
    SnapshotDownloadError,
    SnapshotOfflineError,
    SnapshotRevisionNotFoundError,
    SnapshotTimeoutError,
    StagingError,
    UnsafeSnapshotPathError,
)

FIX, RETRY, FATAL = ErrorAction.FIX_INPUT, ErrorAction.RETRY, ErrorAction.FATAL
SHA = "0123456789abcdef0123456789abcdef01234567"

ACTIONS = {
    "StagingError": FATAL,
    "InvalidRepositoryError": FIX,
    "InvalidRevisionError": FIX,
    "InsufficientDiskSpaceError": RETRY,
    "SnapshotAccessError": FIX,
    "SnapshotRevisionNotFoundError": FIX,
    "SnapshotDownloadError": RETRY,
    "SnapshotContentError": FIX,
    "UnsafeSnapshotPathError": FIX,
    "SnapshotTimeoutError": RETRY,
    "SnapshotVerificationError": RETRY,
    "IncompleteSnapshotError": RETRY,
    "StagingLeaseTimeoutError": RETRY,
    "StagingLeaseLostError": RETRY,
    "LocalFolderChangedError": FIX,
    "SnapshotOfflineError": FIX,
}


def test_every_public_error_is_in_the_table() -> None:
    assert set(errors.__all__) == set(ACTIONS)


@pytest.mark.parametrize(("name", "action"), sorted(ACTIONS.items()))
def test_each_public_error_keeps_its_category(name: str, action: ErrorAction) -> None:
    assert getattr(errors, name).action is action


@pytest.mark.parametrize(
    ("error", "fields"),
    [
        (SnapshotAccessError("o/m", SHA, gated=True), {"gated": True}),
        (SnapshotRevisionNotFoundError("o/m", SHA), {}),
        (SnapshotDownloadError("o/m", SHA, "reset"), {"detail": "reset"}),
        (SnapshotContentError("o/m", SHA, "no config"), {"problem": "no config"}),
        (SnapshotOfflineError("o/m", SHA), {}),
        (
            UnsafeSnapshotPathError("o/m", SHA, "../x", "climbs out"),
            {"path": "../x", "reason": "climbs out", "problem": str},
        ),
        (
            SnapshotTimeoutError("o/m", SHA, "https://h/x", 2.5, "V"),
            {"url": "https://h/x", "seconds": 2.5, "variable": "V", "detail": str},
        ),
    ],
)
def test_revision_errors_carry_repository_revision_and_their_own_fields(
    error: StagingError, fields: dict[str, object]
) -> None:
    found = vars(error)
    assert {k: found[k] for k in ("repository", "revision")} == {
        "repository": "o/m",
        "revision": SHA,
    }
    assert set(found) == {"repository", "revision", *fields}
    for name, value in fields.items():
        assert isinstance(found[name], value) if value is str else found[name] == value
    assert "o/m" in str(error) and SHA in str(error)
