"""Profile manifests: one JSON file per profile id, written once, atomically.

Layout: ``<storage_root>/profiles/<profile_id>.json``. The stager, the
resident manager and the Modal worker find a profile by its id alone, and a
half-written file must never be read, so writes go to a temporary file in
the same folder and are moved into place with ``os.replace``. A manifest is
never overwritten by a profile with a different identity: the id is a
content digest, so a mismatch means tampering or corruption, and the user
is told to delete the file rather than having it silently replaced.
"""

from __future__ import annotations

import json
from pathlib import Path

from comfy_llm_core import make_folder, write_atomically

from comfy_llm_profiles._profile import PROFILE_ID_PREFIX, ModelProfile, compute_profile_id
from comfy_llm_profiles.errors import ManifestConflictError, ManifestError, ProfileError

__all__ = ["MANIFEST_DIR", "load_manifest", "manifest_path", "write_manifest"]

MANIFEST_DIR = "profiles"
"""Folder under the storage root that holds the manifests."""
_MAX_MANIFEST_BYTES = 1024**2


def manifest_path(storage_root: Path, profile_id: str) -> Path:
    """Return ``<storage_root>/profiles/<profile_id>.json``.

    Raises:
        ValueError: ``profile_id`` is not an ``hf-<64 hex>`` id (it becomes a file name).
    """
    digest = profile_id.removeprefix(PROFILE_ID_PREFIX)
    if (
        not profile_id.startswith(PROFILE_ID_PREFIX)
        or len(digest) != 64
        or any(c not in "0123456789abcdef" for c in digest)
    ):
        raise ValueError(
            f"Profile id {profile_id!r} is not of the form 'hf-' + 64 lowercase hex digits; "
            "use the profile_id of a resolved profile."
        )
    return Path(storage_root) / MANIFEST_DIR / f"{profile_id}.json"


def _serialize(profile: ModelProfile) -> str:
    return json.dumps(profile.to_dict(), indent=2, sort_keys=True) + "\n"


def load_manifest(path: Path) -> ModelProfile:
    """Read and validate a manifest.

    Args:
        path: The manifest file.

    Returns:
        The profile it holds.

    Raises:
        ManifestError: The file is missing, unreadable, oversized, not JSON,
            not a valid schema-v2 profile, or named after another id.
    """
    path = Path(path)
    try:
        if path.stat().st_size > _MAX_MANIFEST_BYTES:
            raise _unusable(path, f"is larger than {_MAX_MANIFEST_BYTES} bytes")
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _unusable(path, "does not exist") from None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise _unusable(path, f"cannot be read as JSON ({error})") from None
    try:
        profile = ModelProfile.from_dict(data)
    except ProfileError as error:
        raise _unusable(path, f"is not a valid profile ({error})") from None
    if path.stem != profile.profile_id:
        raise _unusable(path, f"holds profile {profile.profile_id}, not {path.stem}")
    return profile


def _unusable(path: Path, problem: str) -> ManifestError:
    return ManifestError(
        f"Profile manifest {str(path)!r} {problem}. Delete it and resolve the model again.",
        path=path,
    )


def _conflict(path: Path, profile_id: str, problem: str) -> ManifestConflictError:
    return ManifestConflictError(
        f"Profile manifest {str(path)!r} already exists for {profile_id} but {problem}; it is "
        "never overwritten. Delete it and resolve the model again.",
        path=path,
        profile_id=profile_id,
    )


def _existing_identity_matches(path: Path, profile: ModelProfile) -> None:
    """Accept an existing manifest of the same identity; refuse anything else."""
    try:
        existing = load_manifest(path)
    except ManifestError as error:
        raise _conflict(path, profile.profile_id, f"is unusable: {error}") from None
    if (
        existing.identity != profile.identity
        or compute_profile_id(existing.to_dict()) != profile.profile_id
    ):
        raise _conflict(path, profile.profile_id, "holds a different profile")


def write_manifest(storage_root: Path, profile: ModelProfile) -> tuple[Path, bool]:
    """Write ``profile``'s manifest unless an identical-identity one exists.

    A manifest of the same id and identity is reused as is (it may carry a
    different ``requested_revision`` or ``display_name``, which are not
    identity: the first resolution's values stay).

    Args:
        storage_root: The storage root.
        profile: The profile to record.

    Returns:
        ``(path, created)``: created is False when an existing manifest was reused.

    Raises:
        ManifestConflictError: A manifest with this id exists but is unreadable,
            invalid or holds a different identity.
        OSError: The folder cannot be created or written.
    """
    path = manifest_path(storage_root, profile.profile_id)
    if path.exists():
        _existing_identity_matches(path, profile)
        return path, False
    make_folder(path.parent, "the model manifest")
    if not write_atomically(
        path, _serialize(profile), keep_existing=True, what="the model manifest"
    ):
        _existing_identity_matches(path, profile)  # another process won the race: same rules
        return path, False
    return path, True
