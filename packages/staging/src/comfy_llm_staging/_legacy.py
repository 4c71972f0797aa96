"""Seed-era snapshots keyed by profile: found by revision, reused in place.

The seed system stored weights as ``<root>/llm_models/<profile id>/<revision>/``.
Its profile ids are digests of a different identity, so they cannot be
recomputed here; what can be checked is the content. A directory
``<root>/llm_models/<anything>/<revision>/`` is reused when it holds
config.json and a completion marker (the seed's or ours) naming the same
repository and revision (``_marker.find_completed_snapshot`` checks the
marker), so users moving over never download weights twice. It is consulted
only when the canonical snapshot directory does not exist.
"""

from __future__ import annotations

from pathlib import Path

from . import _layout


def revision_candidates(storage_root: Path, repository: str, revision: str) -> list[Path]:
    """Return every ``llm_models/<folder>/<revision>/`` holding config.json, in name order.

    No network, one directory listing. Hidden folders, symbolic links and the
    repository's own canonical folder are skipped.

    Args:
        storage_root: The storage root.
        repository: ``owner/name`` (already validated).
        revision: The 40-hex commit (already validated).

    Returns:
        The candidate directories; their markers are not checked here.
    """
    models = Path(storage_root) / _layout.MODELS_DIRNAME
    canonical_parent = _layout.repository_dirname(repository)
    try:
        parents = sorted(models.iterdir())
    except OSError:
        return []
    found = []
    for parent in parents:
        candidate = parent / revision
        if parent.name == canonical_parent or parent.name.startswith("."):
            continue
        if parent.is_symlink() or candidate.is_symlink() or not candidate.is_dir():
            continue
        if (candidate / "config.json").is_file():
            found.append(candidate)
    return found
