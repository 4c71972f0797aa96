"""pyproject.toml's [project] and [tool.comfy] as the Comfy registry reads them.

Rules from docs.comfy.org/registry/specifications (Comfy-Org/docs
registry/specifications.mdx) and from the parser ``comfy node publish`` runs,
comfy-cli 1.23.0 ``comfy_cli/registry/config_parser.py``
(``extract_node_configuration`` and the validators it calls).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from urllib.parse import urlparse

from packaging.requirements import Requirement
from packaging.version import Version
from PIL import Image

REPO_ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]
COMFY = PYPROJECT["tool"]["comfy"]
# config_parser.validate_version: each comma-separated part
_VERSION_PART = re.compile(r"^(?:(==|>=|<=|!=|~=|>|<|<>|=)\s*)?(\d+\.\d+\.\d+(?:-[a-zA-Z0-9]+)?)?$")
# config_parser.validate_and_extract_accelerator_classifiers
_ACCELERATORS = {
    "GPU :: NVIDIA CUDA",
    "GPU :: AMD ROCm",
    "GPU :: Intel Arc",
    "NPU :: Huawei Ascend",
    "GPU :: Apple Metal",
}
_OS_PREFIXES = ("Microsoft", "POSIX", "MacOS", "OS Independent")  # ..._os_classifiers


def test_name_is_a_valid_node_id() -> None:
    """Spec, name (required): under 100 characters; letters, digits, - _ .; no two
    special characters in a row; starts with a letter; no "ComfyUI"."""
    name = PROJECT["name"]
    assert 0 < len(name) < 100
    assert re.fullmatch(r"[A-Za-z][A-Za-z0-9._-]*", name), name
    assert not re.search(r"[._-]{2}", name), name
    assert "comfyui" not in name.lower()


def test_version_is_three_part_semver() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", PROJECT["version"]), PROJECT["version"]


def test_license_is_a_file_table_pointing_at_a_shipped_file() -> None:
    """Spec, license: ``{file = ...}`` or ``{text = ...}``; a plain string only warns."""
    license_entry = PROJECT["license"]
    assert isinstance(license_entry, dict) and set(license_entry) == {"file"}
    text = (REPO_ROOT / license_entry["file"]).read_text(encoding="utf-8")
    assert text.startswith("MIT License")


def test_description_repository_and_python() -> None:
    assert 20 <= len(PROJECT["description"]) <= 300
    repository = urlparse(PROJECT["urls"]["Repository"])
    assert repository.scheme == "https" and repository.netloc == "github.com"
    assert PROJECT["requires-python"] == ">=3.11"


def test_classifiers_are_ones_the_registry_extracts() -> None:
    os_values = [c.removeprefix("Operating System :: ") for c in PROJECT["classifiers"]]
    os_values = [c for c in os_values if not c.startswith("Environment ::")]
    assert os_values and all(v.startswith(_OS_PREFIXES) for v in os_values)
    accelerators = [
        c.removeprefix("Environment :: ")
        for c in PROJECT["classifiers"]
        if c.startswith("Environment ::")
    ]
    assert set(accelerators) <= _ACCELERATORS and accelerators


def test_dependencies_are_requirements_txt() -> None:
    """The registry records [project].dependencies; ComfyUI Manager installs
    requirements.txt. They are the same requirements."""
    lines = (REPO_ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    from_file = {
        str(Requirement(line.split("#", 1)[0].strip()))
        for line in lines
        if line.split("#", 1)[0].strip()
    }
    declared = {str(Requirement(item)) for item in PROJECT["dependencies"]}
    assert declared == from_file
    assert not [d for d in declared if d.startswith("comfyui-frontend-package")]


def test_tool_comfy_publisher_display_name_icon() -> None:
    assert re.fullmatch(r"[a-z][a-z0-9-]*", COMFY["PublisherId"]), COMFY["PublisherId"]
    assert 0 < len(COMFY["DisplayName"]) <= 100
    icon = urlparse(COMFY["Icon"])
    assert icon.scheme == "https" and icon.path.endswith((".svg", ".png", ".jpg", ".gif"))
    # The URL is the repository's raw file on main: the file exists here, within
    # the spec's 800 x 400 maximum.
    with Image.open(REPO_ROOT / Path(icon.path).name) as image:
        assert image.width <= 800 and image.height <= 400
    assert COMFY["includes"] == []  # .comfyignore decides (tests/test_registry_pack.py)


def test_requires_comfyui_is_the_oldest_version_ci_runs() -> None:
    """requires-comfyui parses by the registry's rule and names the ComfyUI the
    real-ComfyUI tier runs (scripts/test-comfyui.sh: ../shared/comfyui, 0.33.0)."""
    spec = COMFY["requires-comfyui"]
    parts = [part.strip() for part in spec.split(",")]
    assert all(_VERSION_PART.match(part) for part in parts), spec
    assert parts == [">=0.33.0"]
    assert Version(parts[0].removeprefix(">=")) == Version("0.33.0")
