"""The Comfy registry's archive of this repository, built by comfy-cli's rules.

``comfy node pack`` (and ``comfy node publish``, which uploads the same
``node.zip``) is ``comfy_cli.command.custom_nodes.command.pack`` calling
``comfy_cli.file_utils.zip_files`` (comfy-cli 1.23.0). Its rules, reproduced
here so tests, the registry scan and the real-ComfyUI tier all see the archive
the registry would install:

- the candidates are ``git ls-files`` (``list_git_tracked_files``), each kept
  only when it still exists on disk (``zip_files``: "File not found. Not
  including in zip");
- ``.comfyignore`` lines are stripped; blank lines and lines starting with
  ``#`` are dropped; the rest is one ``PathSpec.from_lines("gitwildmatch", ...)``
  (``_load_comfyignore_spec``), matched against each repository-relative
  POSIX path with ``match_file`` (the last matching pattern wins, ``!``
  re-includes);
- a path equal to, or under, a ``[tool.comfy] includes`` entry is never
  ignored (``_is_force_included``), and those folders are walked and added too;
- archive names are the relative paths, compressed with ``ZIP_DEFLATED``.
"""

from __future__ import annotations

import subprocess
import tomllib
import warnings
import zipfile
from pathlib import Path

from pathspec import PathSpec

__all__ = ["build_archive", "comfyignore_spec", "packed_files"]


def comfyignore_spec(repo_root: Path) -> PathSpec | None:
    """The ``.comfyignore`` patterns as comfy-cli compiles them (None without any)."""
    path = repo_root / ".comfyignore"
    if not path.is_file():
        return None
    lines = path.read_text(encoding="utf-8").splitlines()
    patterns = [
        line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")
    ]
    if not patterns:
        return None
    with warnings.catch_warnings():  # pathspec 1.x deprecates the name comfy-cli uses
        warnings.simplefilter("ignore", DeprecationWarning)
        return PathSpec.from_lines("gitwildmatch", patterns)


def _includes(repo_root: Path) -> list[str]:
    pyproject = tomllib.loads((repo_root / "pyproject.toml").read_text(encoding="utf-8"))
    includes = pyproject.get("tool", {}).get("comfy", {}).get("includes", [])
    return [str(item).strip("/") for item in includes if str(item).strip("/")]


def _git_files(repo_root: Path, *, untracked: bool) -> list[str]:
    command = ["git", "-C", str(repo_root), "ls-files", "-z"]
    if untracked:  # a working tree's new files too (what a clone would hold once committed)
        command += ["--cached", "--others", "--exclude-standard"]
    listed = subprocess.run(command, capture_output=True, check=True).stdout.decode("utf-8")
    return [name for name in listed.split("\0") if name]


def packed_files(repo_root: Path, *, untracked: bool = False) -> list[str]:
    """The sorted relative paths ``comfy node pack`` puts in ``node.zip``.

    Args:
        repo_root: The repository (a git work tree).
        untracked: Also consider untracked, not-ignored files, as if committed
            (comfy-cli itself packs tracked files only; the tier uses this so a
            working tree's new module is tested before its commit).
    """
    spec = comfyignore_spec(repo_root)
    prefixes = _includes(repo_root)

    def ignored(rel: str) -> bool:
        if any(rel == prefix or rel.startswith(prefix + "/") for prefix in prefixes):
            return False
        return bool(spec and spec.match_file(rel))

    kept = {
        rel
        for rel in _git_files(repo_root, untracked=untracked)
        if (repo_root / rel).is_file() and rel != "node.zip" and not ignored(rel)
    }
    for prefix in prefixes:
        folder = repo_root / prefix
        if folder.is_file():
            kept.add(prefix)
        elif folder.is_dir():
            for path in folder.rglob("*"):
                rel = path.relative_to(repo_root).as_posix()
                if path.is_file():  # force-included: never ignored
                    kept.add(rel)
    return sorted(kept)


def build_archive(repo_root: Path, target: Path) -> list[str]:
    """Write ``target`` as ``comfy node pack`` writes ``node.zip``; return its names."""
    names = packed_files(repo_root)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in names:
            archive.write(repo_root / name, name)
    with zipfile.ZipFile(target) as archive:
        return sorted(archive.namelist())
