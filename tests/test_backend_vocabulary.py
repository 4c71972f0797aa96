"""Every engine's package speaks one vocabulary, and every engine record is installable.

The engine table (``comfy_llm_profiles.ENGINES``) is the only place an engine
is named; its package is loaded by name. So the table's promises are checked
here, for every record: the package exports the same names (``ENGINE_NAMES``,
``create_backend``, the four shared errors), its backends say ``ENGINE_NAME``
and ``loaded``, and the extras it names exist and install that package.
"""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

import pytest
from comfy_llm_core import install_command
from comfy_llm_profiles import ENGINES
from comfy_llm_testworld.engine_vocabulary import VOCABULARY, vocabulary_problems
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted({spec.module for spec in ENGINES.values()})


def _engines_of(module: str) -> tuple[str, ...]:
    return tuple(name for name, spec in ENGINES.items() if spec.module == module)


@pytest.mark.parametrize("module", PACKAGES)
def test_every_backend_package_speaks_the_vocabulary(module: str) -> None:
    assert vocabulary_problems(module, _engines_of(module)) == []


def test_every_backend_package_exports_the_same_names() -> None:
    exported = [set(importlib.import_module(m).__all__) for m in PACKAGES]
    assert set(VOCABULARY) <= set.intersection(*exported)


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_every_engine_extra_installs_its_package(name: str) -> None:
    spec = ENGINES[name]
    node = tomllib.loads((REPO_ROOT / "packages/comfy-node/pyproject.toml").read_text("utf-8"))
    extras = node["project"]["optional-dependencies"]
    assert set(spec.extras) <= set(extras), f"{name}: extras {spec.extras} not in comfy-llm's"
    distribution = canonicalize_name(spec.module.replace("_", "-"))
    pulled = {
        canonicalize_name(Requirement(line).name) for extra in spec.extras for line in extras[extra]
    }
    assert distribution in pulled, f"{name}: no extra of {spec.extras} installs {distribution}"
    assert spec.install_hint.startswith(install_command(spec.extras[-1]))


def test_every_backend_package_is_under_the_import_contracts() -> None:
    linter = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text("utf-8"))["tool"][
        "importlinter"
    ]
    layers = " ".join(linter["contracts"][0]["layers"])
    for module in PACKAGES:
        assert module in linter["root_packages"], module
        assert module in layers, module
