"""One version everywhere (scripts/version.py): in step now, and after a bump."""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement

REPO_ROOT = Path(__file__).resolve().parents[1]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "version_script", REPO_ROOT / "scripts/version.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["version_script"] = module
    spec.loader.exec_module(module)
    return module


version = _script()


def _copy_of_the_repository(dest: Path) -> Path:
    """Every file the script reads or writes, at its place (no sources, no lock)."""
    for member in version.members(REPO_ROOT):
        for path in (member.pyproject, member.init, member.init.with_name("__init__.py")):
            target = dest / path.relative_to(REPO_ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
    for name in ("pyproject.toml", "requirements.txt", "CHANGELOG.md"):
        shutil.copy(REPO_ROOT / name, dest / name)
    return dest


def _add_entry(root: Path, heading: str, line: str) -> None:
    path = root / "CHANGELOG.md"
    text = path.read_text()
    path.write_text(
        text.replace("## [Unreleased]\n", f"## [Unreleased]\n\n### {heading}\n- {line}\n", 1)
    )


def _bump(root: Path, level: str | None = None) -> str:
    version.bump(root, level, dry_run=False, date="2027-01-02", lock=False)
    assert version.problems(root) == []
    return version.current_version(version.versions_found(root))


def test_every_place_is_in_step() -> None:
    assert version.problems(REPO_ROOT) == []


def test_siblings_are_required_at_exactly_this_version() -> None:
    current = version.current_version(version.versions_found(REPO_ROOT))
    for member in version.members(REPO_ROOT):
        project = member.data["project"]
        requirements = list(project.get("dependencies", []))
        for extra in project.get("optional-dependencies", {}).values():
            requirements += extra
        for text in requirements:
            requirement = Requirement(text)
            if requirement.name.startswith("comfy-llm"):
                assert str(requirement.specifier) == f"=={current}", (member.name, text)


def test_requirements_txt_never_names_a_package_of_ours() -> None:
    lines = (REPO_ROOT / "requirements.txt").read_text().splitlines()
    names = [Requirement(line).name for line in lines if line and not line.startswith("#")]
    assert names and not [name for name in names if name.startswith("comfy-llm")]
    assert "torch" not in names  # ComfyUI's own build stays


def test_first_bump_releases_the_version_the_files_hold(tmp_path: Path) -> None:
    root = _copy_of_the_repository(tmp_path)
    before = version.current_version(version.versions_found(root))
    assert _bump(root) == before
    changelog = (root / "CHANGELOG.md").read_text()
    assert f"## [{before}] - 2027-01-02" in changelog
    assert version.unreleased_text(changelog) == ""
    assert f"[{before}]: https://github.com/comfy-llm/comfy-llm/releases/tag/v{before}" in changelog
    assert version.problems(root, tag=f"v{before}") == []
    assert version.problems(root, tag="v9.9.9") != []


def test_the_changelog_chooses_the_level(tmp_path: Path) -> None:
    root = _copy_of_the_repository(tmp_path)
    first = _bump(root)
    major, minor, patch = (int(part) for part in first.split("."))
    assert major == 0  # the rule for 0.y.z below
    with pytest.raises(version.OutOfStep, match="nothing to release"):
        version.bump(root, None, dry_run=False, date="2027-01-03", lock=False)
    _add_entry(root, "Fixed", "a fix")
    assert _bump(root) == f"0.{minor}.{patch + 1}"
    _add_entry(root, "Added", "a feature")
    assert _bump(root) == f"0.{minor + 1}.0"
    _add_entry(root, "Removed", "a breaking removal")  # major, but 0.y.z: minor
    assert _bump(root) == f"0.{minor + 2}.0"
    _add_entry(root, "Fixed", "one more")
    assert _bump(root, "major") == "1.0.0"  # asked for explicitly
    changelog = (root / "CHANGELOG.md").read_text()
    assert "[1.0.0]: https://github.com/comfy-llm/comfy-llm/compare/v" in changelog
    assert changelog.index("## [1.0.0]") < changelog.index(f"## [0.{minor + 2}.0]")


def test_a_bump_moves_every_place(tmp_path: Path) -> None:
    root = _copy_of_the_repository(tmp_path)
    _bump(root)
    _add_entry(root, "Added", "a feature")
    new = _bump(root)
    found = version.versions_found(root)
    assert set(found.values()) == {new} and len(found) == 2 * len(version.members(root)) + 1
    node = tomllib.loads((root / "packages/comfy-node/pyproject.toml").read_text())["project"]
    assert f"comfy-llm-core=={new}" in node["dependencies"]
    assert node["optional-dependencies"]["modal"] == [f"comfy-llm-modal-remote=={new}"]
    assert node["name"] == "comfy-llm"
    assert (root / "requirements.txt").read_text() == (REPO_ROOT / "requirements.txt").read_text()


@pytest.mark.parametrize(
    ("path", "old", "new"),
    [
        ("packages/core/src/comfy_llm_core/__init__.py", '__version__ = "', '__version__ = "9'),
        ("packages/comfy-node/pyproject.toml", '"comfy-llm-core==', '"comfy-llm-core>='),
        ("requirements.txt", "pypdf>=5", "pypdf>=4"),
        ("pyproject.toml", 'version = "', 'version = "9'),
    ],
)
def test_check_names_each_place_out_of_step(tmp_path: Path, path: str, old: str, new: str) -> None:
    root = _copy_of_the_repository(tmp_path)
    target = root / path
    target.write_text(target.read_text().replace(old, new, 1))
    problems = version.problems(root)
    assert [line for line in problems if line.startswith(path)], problems
