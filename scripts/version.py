"""One version for every comfy-llm package, the registry node and the changelog.

Usage (from the repository root):
    uv run --frozen python scripts/version.py bump [--level major|minor|patch] [--dry-run]
    uv run --frozen python scripts/version.py check [--tag vX.Y.Z]
    uv run --frozen python scripts/version.py sync

The workspace is released in lockstep: the eleven packages published to PyPI,
the dev-only test world and the Comfy registry node (the root pyproject's
``[project]``) carry one version, and each package names its siblings with
``==`` that version, so an install from an index gets exactly the combination
CI ran. ``bump`` writes the version a change needs into every place that holds
it, so nothing is edited by hand:

* ``[project].version`` of every member and of the registry node;
* the ``comfy-llm*`` requirements between members (``==`` the version);
* ``__version__`` in every package's ``__init__.py``;
* ``requirements.txt`` and the registry's ``[project].dependencies``: the
  third-party closure of the node and its platform engine (``REGISTRY_ENGINES``),
  torch left to ComfyUI, never a name of ours (the registry install loads its
  own ``packages/*/src``; ``__init__.py``);
* ``CHANGELOG.md``: ``[Unreleased]`` becomes ``[X.Y.Z] - date`` with a fresh
  ``[Unreleased]`` above it and the compare links below;
* ``uv.lock`` (``uv lock``), which records the members' versions.

The level comes from the ``[Unreleased]`` section (Keep a Changelog's
headings): ``Removed`` or a line marked ``BREAKING`` is a major change (a
minor one while the major version is 0, as SemVer allows for 0.y.z),
``Added``/``Changed``/``Deprecated`` minor, ``Fixed``/``Security`` patch;
``--level`` overrides it. Before the first release (the changelog has no entry
for the current version yet) ``bump`` releases the current version as it is.
``check`` fails (exit 1, one line per place) when anything is out of step;
``tests/test_versions.py`` runs it, and the release workflow runs it with the
pushed tag. ``sync`` rewrites the derived files without changing the version
(after a dependency edit). Exit status: 0 done, 1 out of step or refused,
2 bad usage.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
REPOSITORY = "https://github.com/comfy-llm/comfy-llm"
NODE = "comfy-llm"
APPLE = "sys_platform == 'darwin' and platform_machine == 'arm64'"
NOT_APPLE = "sys_platform != 'darwin' or platform_machine != 'arm64'"
REGISTRY_ENGINES = {"apple": APPLE, "cuda": NOT_APPLE}
"""The node's extras a registry install gets on each platform (its default engine)."""
LEFT_TO_COMFYUI = {"torch", "torchvision"}
"""Never in requirements.txt: ComfyUI ships its own builds (CUDA, ROCm, ...), paired."""
REQUIREMENTS_HEADER = """\
# Installed by ComfyUI Manager / the Comfy registry into ComfyUI's interpreter
# when this repository is cloned into custom_nodes/. The workspace packages
# themselves load from packages/*/src (see __init__.py); these are their
# third-party dependencies. torch and torchvision come with ComfyUI. Written by
# `scripts/version.py sync` from the packages' pyproject.toml: edit those.
"""
LEVELS = ("major", "minor", "patch")
_HEADING = re.compile(r"^## \[(?P<name>[^\]]+)\](?: - (?P<date>\d{4}-\d{2}-\d{2}))?\s*$", re.M)
_VERSION_LINE = re.compile(r'^(version = ")([^"]+)(")$', re.M)
_DUNDER = re.compile(r'^(__version__ = ")([^"]+)(")$', re.M)
_LINK = re.compile(r"^\[[^\]]+\]: ", re.M)
_NAME_LINE = re.compile(r"^name\s*=")
_OUR_REQUIREMENT = re.compile(r'"(comfy-llm[a-z0-9-]*(?:\[[^\]]*\])?)[^";]*(;[^"]*)?"')


class OutOfStep(Exception):
    """The repository cannot be bumped as it stands (the message says why)."""


@dataclass(frozen=True)
class Member:
    """One workspace package: its name, folder, pyproject and the file with ``__version__``.

    That file is the package's ``__init__.py``, or for comfy-node ``_versions.py``
    (which ``__init__.py`` re-exports), so the pipeline reads it without
    importing the package's ComfyUI face.
    """

    name: str
    folder: Path
    data: dict
    init: Path

    @property
    def pyproject(self) -> Path:
        """The member's pyproject.toml."""
        return self.folder / "pyproject.toml"


def members(root: Path = ROOT) -> list[Member]:
    """Every workspace member (packages/* and testing), by name."""
    found = []
    for pyproject in sorted(
        [*root.glob("packages/*/pyproject.toml"), root / "testing/pyproject.toml"]
    ):
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        package = (
            pyproject.parent / data["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"][0]
        )
        init = package / "__init__.py"
        if not _DUNDER.search(init.read_text(encoding="utf-8")):
            init = package / "_versions.py"  # comfy-node: the pipeline reads it there
        found.append(Member(data["project"]["name"], pyproject.parent, data, init))
    return found


def _ours(name: str) -> bool:
    return canonicalize_name(name).startswith("comfy-llm")


# -- requirements.txt: the registry install's third-party closure ---------------------


def _merge_markers(markers: list[str | None]) -> str | None:
    distinct = list(dict.fromkeys(markers))
    if None in distinct or set(distinct) == {APPLE, NOT_APPLE}:
        return None
    if len(distinct) == 1:
        return distinct[0]
    return " or ".join(f"({m})" for m in distinct)


def registry_requirements(root: Path = ROOT) -> list[str]:
    """The node's third-party requirements for a registry install, in a stable order."""
    by_name = {canonicalize_name(m.name): m for m in members(root)}
    found: dict[str, tuple[str, list[str | None]]] = {}

    def walk(package: str, marker: str | None, seen: frozenset[str]) -> None:
        for text in by_name[package].data["project"].get("dependencies", []):
            requirement = Requirement(text)
            name = canonicalize_name(requirement.name)
            own = str(requirement.marker) if requirement.marker else None
            combined = (
                own if marker is None else marker if own is None else f"({marker}) and ({own})"
            )
            if _ours(name):
                if name not in seen:
                    walk(name, combined, seen | {name})
                continue
            if name in LEFT_TO_COMFYUI:
                continue
            spec = " ".join(text.split(";", 1)[0].split())  # as written, without the marker
            if name in found and found[name][0] != spec:
                raise OutOfStep(f"{name}: {found[name][0]!r} and {spec!r} in one closure")
            found.setdefault(name, (spec, []))[1].append(combined)

    walk(NODE, None, frozenset({NODE}))
    extras = by_name[NODE].data["project"]["optional-dependencies"]
    for extra, platform in REGISTRY_ENGINES.items():
        for text in extras[extra]:
            requirement = Requirement(text)
            walk(canonicalize_name(requirement.name), platform, frozenset({NODE}))
    lines = []
    for spec, markers in found.values():
        marker = _merge_markers(markers)
        lines.append(f"{spec}; {Marker(marker)}" if marker else spec)
    return lines


# -- reading and writing the version ---------------------------------------------------


def _root_pyproject(root: Path) -> Path:
    return root / "pyproject.toml"


def versions_found(root: Path = ROOT) -> dict[str, str]:
    """Every place a version is written, and what it says."""
    found = {}
    for member in members(root):
        found[f"{member.pyproject.relative_to(root)} [project].version"] = member.data["project"][
            "version"
        ]
        match = _DUNDER.search(member.init.read_text(encoding="utf-8"))
        found[f"{member.init.relative_to(root)} __version__"] = (
            match.group(2) if match else "(none)"
        )
    registry = tomllib.loads(_root_pyproject(root).read_text(encoding="utf-8"))
    found["pyproject.toml [project].version (registry)"] = registry["project"]["version"]
    return found


def current_version(found: dict[str, str]) -> str:
    """The version most places say (all of them, when in step)."""
    values = list(found.values())
    return max(dict.fromkeys(values), key=values.count)


def _set_pins(text: str, version: str) -> str:
    def pin(match: re.Match[str]) -> str:
        marker = f"; {match.group(2)[1:].strip()}" if match.group(2) else ""
        return f'"{match.group(1)}=={version}{marker}"'

    head, sep, tail = text.partition("\n[tool.")  # requirements live in [project] only
    lines = head.splitlines(keepends=True)
    kept = [line if _NAME_LINE.match(line) else _OUR_REQUIREMENT.sub(pin, line) for line in lines]
    return "".join(kept) + sep + tail


def _set_project_version(text: str, version: str) -> str:
    start = text.index("[project]\n")
    end = text.find("\n[", start + 1)
    end = len(text) if end < 0 else end
    section, count = _VERSION_LINE.subn(rf"\g<1>{version}\g<3>", text[start:end], count=1)
    if count != 1:
        raise OutOfStep("no version line in [project]")
    return text[:start] + section + text[end:]


def _set_registry_dependencies(text: str, lines: list[str]) -> str:
    start = text.index("\ndependencies = [\n") + 1
    end = text.index("\n]\n", start) + 3
    body = "".join(f'    "{line.replace(chr(34), chr(39))}",\n' for line in lines)
    return text[:start] + "dependencies = [\n" + body + "]\n" + text[end:]


def _requirements_text(lines: list[str]) -> str:
    return REQUIREMENTS_HEADER + "".join(f"{line}\n" for line in lines)


def planned_files(root: Path, version: str) -> dict[Path, str]:
    """Every file ``bump``/``sync`` writes for ``version`` (but the changelog), as new text."""
    files: dict[Path, str] = {}
    for member in members(root):
        text = member.pyproject.read_text(encoding="utf-8")
        files[member.pyproject] = _set_pins(_set_project_version(text, version), version)
        init = member.init.read_text(encoding="utf-8")
        if not _DUNDER.search(init):
            raise OutOfStep(f"{member.init.relative_to(root)} has no __version__ line")
        files[member.init] = _DUNDER.sub(rf"\g<1>{version}\g<3>", init, count=1)
    lines = registry_requirements(root)
    registry = _root_pyproject(root).read_text(encoding="utf-8")
    registry = _set_registry_dependencies(_set_project_version(registry, version), lines)
    files[_root_pyproject(root)] = registry
    files[root / "requirements.txt"] = _requirements_text(lines)
    return files


# -- the changelog ---------------------------------------------------------------------


def _sections(changelog: str) -> list[re.Match[str]]:
    return list(_HEADING.finditer(changelog))


def unreleased_text(changelog: str) -> str:
    """The body of ``## [Unreleased]`` (empty when it has no entries)."""
    heads = _sections(changelog)
    for index, head in enumerate(heads):
        if head.group("name") == "Unreleased":
            links = _LINK.search(changelog, head.end())
            end = heads[index + 1].start() if index + 1 < len(heads) else len(changelog)
            end = min(end, links.start()) if links else end
            return changelog[head.end() : end].strip()
    raise OutOfStep("CHANGELOG.md has no '## [Unreleased]' section")


def released(changelog: str) -> list[str]:
    """The versions with an entry, newest first."""
    return [h.group("name") for h in _sections(changelog) if h.group("name") != "Unreleased"]


def level_needed(changelog: str) -> str:
    """The SemVer level the ``[Unreleased]`` entries call for."""
    body = unreleased_text(changelog)
    headings = set(re.findall(r"^### (\w+)", body, re.M))
    if not re.search(r"^\s*- ", body, re.M):
        raise OutOfStep("CHANGELOG.md's [Unreleased] has no entries: nothing to release")
    if "Removed" in headings or "BREAKING" in body:
        return "major"
    if headings & {"Added", "Changed", "Deprecated"}:
        return "minor"
    return "patch"


def next_version(current: str, level: str, *, inferred: bool) -> str:
    """``current`` raised by ``level``; an inferred major change is minor while at 0.y.z."""
    major, minor, patch = Version(current).release[:3]
    if level == "major" and not (inferred and major == 0):
        return f"{major + 1}.0.0"
    if level in ("major", "minor"):
        return f"{major}.{minor + 1}.0"
    return f"{major}.{minor}.{patch + 1}"


def stamp_changelog(changelog: str, version: str, date: str) -> str:
    """``[Unreleased]`` becomes ``[version] - date``; a fresh one goes above; links follow."""
    previous = released(changelog)
    changelog = changelog.replace(
        "## [Unreleased]", f"## [Unreleased]\n\n## [{version}] - {date}", 1
    )
    changelog = re.sub(r"^\[Unreleased\]: .*\n?", "", changelog, flags=re.M).rstrip("\n") + "\n"
    links = [f"[Unreleased]: {REPOSITORY}/compare/v{version}...HEAD"]
    if previous:
        links.append(f"[{version}]: {REPOSITORY}/compare/v{previous[0]}...v{version}")
    else:
        links.append(f"[{version}]: {REPOSITORY}/releases/tag/v{version}")
    first_link = _LINK.search(changelog)
    if first_link:
        return (
            changelog[: first_link.start()]
            + "\n".join(links)
            + "\n"
            + changelog[first_link.start() :]
        )
    return changelog + "\n" + "\n".join(links) + "\n"


# -- the commands ------------------------------------------------------------------------


def problems(root: Path = ROOT, tag: str | None = None) -> list[str]:
    """Everything out of step, one line each (empty when all agree)."""
    found = versions_found(root)
    version = current_version(found)
    lines = [
        f"{place} says {value}, the rest {version}"
        for place, value in found.items()
        if value != version
    ]
    try:
        planned = planned_files(root, version)
    except OutOfStep as error:
        return [*lines, str(error)]
    for path, text in planned.items():
        if path.read_text(encoding="utf-8") != text:
            what = (
                "its comfy-llm* requirements or version"
                if path.name == "pyproject.toml"
                else "its text"
            )
            lines.append(f"{path.relative_to(root)}: {what} differ from `scripts/version.py sync`")
    changelog = (root / "CHANGELOG.md").read_text(encoding="utf-8")
    try:
        unreleased_text(changelog)
    except OutOfStep as error:
        lines.append(str(error))
    if tag is not None:
        if tag != f"v{version}":
            lines.append(f"tag {tag} is not v{version}, the version in the files")
        if version not in released(changelog):
            lines.append(f"CHANGELOG.md has no '## [{version}] - date' entry for tag {tag}")
    return lines


def bump(root: Path, level: str | None, *, dry_run: bool, date: str, lock: bool = True) -> str:
    """Raise every version as the changelog says; return what was done, in a line."""
    issues = problems(root)
    if issues:
        raise OutOfStep("out of step before the bump (run `sync`?): " + "; ".join(issues))
    changelog_path = root / "CHANGELOG.md"
    changelog = changelog_path.read_text(encoding="utf-8")
    current = current_version(versions_found(root))
    needed = level_needed(changelog)
    if current not in released(changelog):
        version = current  # the first release: the files already say what it is
    else:
        version = next_version(current, level or needed, inferred=level is None)
    if dry_run:
        return f"would release {version} (from {current}; the changelog asks for {needed})"
    for path, text in planned_files(root, version).items():
        path.write_text(text, encoding="utf-8")
    changelog_path.write_text(stamp_changelog(changelog, version, date), encoding="utf-8")
    if lock:
        subprocess.run(["uv", "lock"], cwd=root, check=True)
    return f"released {version} in the files (from {current}); commit, then tag v{version}"


def main(argv: list[str] | None = None) -> int:
    """Run one command; return the exit status."""
    parser = argparse.ArgumentParser(prog="scripts/version.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    bump_parser = sub.add_parser("bump", help="raise every version by what the changelog needs")
    bump_parser.add_argument("--level", choices=LEVELS, help="override the changelog's level")
    bump_parser.add_argument(
        "--dry-run", action="store_true", help="say the version, write nothing"
    )
    bump_parser.add_argument("--date", default=dt.date.today().isoformat(), help="release date")
    check = sub.add_parser("check", help="fail when any place is out of step")
    check.add_argument("--tag", help="also require this tag to be v<version>, with its entry")
    sub.add_parser("sync", help="rewrite requirements.txt, pins and __version__ for this version")
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            issues = problems(ROOT, args.tag)
            for line in issues:
                print(f"version: {line}", file=sys.stderr)
            return 1 if issues else 0
        if args.command == "sync":
            current = current_version(versions_found(ROOT))
            for path, text in planned_files(ROOT, current).items():
                path.write_text(text, encoding="utf-8")
            print(f"synced every place to {current}")
            return 0
        print(bump(ROOT, args.level, dry_run=args.dry_run, date=args.date))
    except OutOfStep as error:
        print(f"version: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
