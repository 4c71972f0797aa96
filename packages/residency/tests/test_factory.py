"""The one backend factory: the profile's engine record names the package it imports."""

from __future__ import annotations

import dataclasses
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import install_command
from comfy_llm_profiles import ENGINES, engine_spec
from comfy_llm_profiles.errors import ProfileValidationError
from comfy_llm_residency import EngineNotInstalledError, create_backend


def _record(
    monkeypatch: pytest.MonkeyPatch, name: str, module: str, extra: str = "llamacpp"
) -> None:
    spec = dataclasses.replace(engine_spec("transformers"), name=name, module=module)
    monkeypatch.setitem(ENGINES, name, dataclasses.replace(spec, extras=(extra,), label=name))


def _profile(fake: Any, backend: str) -> Any:
    return dataclasses.replace(fake.make_profile(), backend=backend, profile_id="")


def test_the_record_names_the_package_that_loads(
    fake: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "engine_pkg_for_factory"
    package.mkdir()
    (package / "__init__.py").write_text(
        textwrap.dedent(
            """
            def create_backend(profile, snapshot_path, progress):
                return ("loaded", profile.backend, snapshot_path)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    _record(monkeypatch, "named_engine", "engine_pkg_for_factory")
    loaded = create_backend(_profile(fake, "named_engine"), tmp_path, lambda event: None)
    assert loaded == ("loaded", "named_engine", tmp_path)  # type: ignore[comparison-overlap]


def test_a_missing_package_names_the_extra_of_its_record(
    fake: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _record(monkeypatch, "absent", "comfy_llm_backend_absent", extra="llamacpp")
    with pytest.raises(ImportError) as caught:
        create_backend(_profile(fake, "absent"), Path("."), lambda event: None)
    assert install_command("llamacpp") in str(caught.value)  # the record's extra, one wording
    assert isinstance(caught.value, EngineNotInstalledError)
    assert (caught.value.engine, caught.value.module) == ("absent", "comfy_llm_backend_absent")
    assert caught.value.name == "comfy_llm_backend_absent"


def test_a_package_missing_something_else_says_so_unchanged(
    fake: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "engine_pkg_broken"
    package.mkdir()
    (package / "__init__.py").write_text("import a_dependency_nobody_has\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "engine_pkg_broken", raising=False)
    _record(monkeypatch, "broken", "engine_pkg_broken")
    with pytest.raises(ModuleNotFoundError) as caught:
        create_backend(_profile(fake, "broken"), tmp_path, lambda event: None)
    assert not isinstance(caught.value, EngineNotInstalledError)
    assert caught.value.name == "a_dependency_nobody_has"


def test_a_profile_of_an_engine_nobody_knows_is_refused(fake: Any) -> None:
    profile = fake.make_profile()
    object.__setattr__(profile, "backend", "gone")  # a profile from a newer version
    with pytest.raises(ProfileValidationError, match="'gone'"):
        create_backend(profile, Path("."), lambda event: None)
