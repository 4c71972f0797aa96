"""What the real modal client would upload and deploy, asked of its own objects offline.

The image's source mounts are enumerated with Modal's ``get_files_to_upload``
(the call the deploy makes), not by reading ``repr``: the file set is asserted,
and the deployment fingerprint is checked to hash exactly that set.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import sys
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from comfy_llm_core import install_command
from comfy_llm_modal_remote.wire._image import REMOTE_SOURCE_ROOT

ROOT = Path(__file__).resolve().parents[3]


def _unwrap(obj: Any) -> Any:
    from modal._utils.async_utils import synchronizer

    return synchronizer._translate_in(obj)


def _image_mounts(image: Any) -> list[Any]:
    """Every mount layer of an image definition (``add_local_*`` keeps them deferred)."""
    mounts: list[Any] = []
    pending = [_unwrap(image)]
    while pending:
        layer = pending.pop()
        nonlocals = inspect.getclosurevars(layer._load).nonlocals
        if nonlocals.get("mount") is not None:
            mounts.append(nonlocals["mount"])
        pending.extend((nonlocals.get("base_images") or {}).values())
        if nonlocals.get("base_image") is not None:
            pending.append(nonlocals["base_image"])
    return mounts


def _function_mounts(function: Any) -> list[Any]:
    """The mounts Modal attaches to one function besides the image (``all_mounts``)."""
    return list(inspect.getclosurevars(_unwrap(function)._load).nonlocals["all_mounts"])


def _uploads(mounts: list[Any]) -> list[tuple[Path, str]]:
    files: list[tuple[Path, str]] = []
    for mount in mounts:
        if not mount.is_local():
            continue  # Modal's own client mount, looked up by name at deploy
        for entry in mount.entries:
            files.extend(
                (Path(local), str(remote)) for local, remote in entry.get_files_to_upload()
            )
    return files


@pytest.fixture(scope="module")
def app_module() -> Any:
    from comfy_llm_modal_remote.worker import _app

    return _app


@pytest.fixture(scope="module")
def uploads(app_module: Any) -> list[tuple[Path, str]]:
    mounts = _image_mounts(app_module.image)
    for function in (
        app_module.model_stager,
        app_module.RemoteEngine._get_class_service_function(),
    ):
        mounts.extend(_function_mounts(function))
    return _uploads(mounts)


def test_every_mount_enumerates_and_carries_exactly_the_workspace_sources(
    app_module: Any, uploads: list[tuple[Path, str]]
) -> None:
    from comfy_llm_modal_remote.wire._image import _lock

    remotes = [remote for _, remote in uploads]
    assert len(remotes) == len(set(remotes)), "a file is mounted twice"
    packages = _lock()["local_packages"]
    expected: set[str] = set()
    for name in packages:
        base = ROOT / "packages" / name.removeprefix("comfy_llm_").replace("_", "-") / "src" / name
        for path in base.rglob("*"):
            skipped = {"__pycache__", "bench"} & set(path.relative_to(base).parts)
            if path.is_file() and not skipped and path.suffix != ".pyc":  # bench: not in images
                expected.add(f"{REMOTE_SOURCE_ROOT}/{name}/{path.relative_to(base).as_posix()}")
    assert set(remotes) == expected
    # The data files the containers read travel with the modules.
    assert f"{REMOTE_SOURCE_ROOT}/comfy_llm_profiles/curated_profiles.json" in remotes
    assert f"{REMOTE_SOURCE_ROOT}/comfy_llm_modal_remote/image_lock.json" in remotes
    assert f"{REMOTE_SOURCE_ROOT}/comfy_llm_backend_cuda/vllm/_backend.py" in remotes
    for remote in remotes:
        parts = remote.split("/")
        assert not {"tests", "bench", "vllm_tests", "__pycache__"} & set(parts), remote
        assert not any(part.startswith(".") for part in parts), remote
    assert not [
        r
        for r in remotes
        if r.startswith(
            (f"{REMOTE_SOURCE_ROOT}/comfy_llm/", f"{REMOTE_SOURCE_ROOT}/comfy_llm_backend_mlx")
        )
    ]


def test_ignore_rule_drops_caches_tests_and_dot_folders_modal_calls_it(tmp_path: Path) -> None:
    """The rule goes through Modal's own mount walk (mount.py:189-218), not only ours."""
    from comfy_llm_modal_remote.wire._image import local_source_files, source_ignored
    from modal.mount import _MountDir

    package = tmp_path / "site" / "comfy_llm_probe"
    for relative in (
        "__init__.py",
        "data/pinned/a.json",
        "__pycache__/x.cpython-311.pyc",
        "tests/test_x.py",
        "bench/run.py",
        ".venv-vllm/lib.py",
        ".mypy_cache/x.json",
        "mod.pyc",
    ):
        (package / relative).parent.mkdir(parents=True, exist_ok=True)
        (package / relative).write_text("x")
    entry = _MountDir(
        package,
        remote_path=PurePosixPath(REMOTE_SOURCE_ROOT, "comfy_llm_probe"),
        ignore=source_ignored,
        recursive=True,
    )
    modal_files = sorted(str(remote) for _, remote in entry.get_files_to_upload())
    assert modal_files == [
        f"{REMOTE_SOURCE_ROOT}/comfy_llm_probe/__init__.py",
        f"{REMOTE_SOURCE_ROOT}/comfy_llm_probe/data/pinned/a.json",
    ]
    sys.path.insert(0, str(package.parent))
    try:
        ours = [remote for _, remote in local_source_files(["comfy_llm_probe"])]
    finally:
        sys.path.remove(str(package.parent))
    assert ours == modal_files


def test_fingerprint_hashes_exactly_the_uploaded_files(uploads: list[tuple[Path, str]]) -> None:
    from comfy_llm_modal_remote import ModalSettings
    from comfy_llm_modal_remote.wire._fingerprint import code_fingerprint
    from comfy_llm_modal_remote.wire._image import _lock

    digest = hashlib.sha256(json.dumps(_lock(), sort_keys=True).encode())
    digest.update(json.dumps(ModalSettings.from_env().container_env(), sort_keys=True).encode())
    for local, remote in sorted(uploads, key=lambda item: item[1]):
        digest.update(remote.encode() + b"\0")
        digest.update(hashlib.sha256(local.read_bytes()).digest())
    assert code_fingerprint() == digest.hexdigest()


def test_a_changed_data_file_redeploys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from comfy_llm_modal_remote.wire import _image
    from comfy_llm_modal_remote.wire._fingerprint import code_fingerprint

    package = tmp_path / "comfy_llm_probe2"
    package.mkdir()
    (package / "__init__.py").write_text("")
    registry = package / "curated_profiles.json"
    registry.write_text('{"a": 1}')
    monkeypatch.syspath_prepend(str(tmp_path))
    lock = {**_image._lock(), "local_packages": ["comfy_llm_probe2"]}
    monkeypatch.setattr(_image, "_lock", lambda: lock)
    before = code_fingerprint()
    registry.write_text('{"a": 2}')
    assert code_fingerprint() != before


def test_a_package_the_image_mounts_missing_here_is_one_clear_error() -> None:
    from comfy_llm_modal_remote import ModalUnavailableError
    from comfy_llm_modal_remote.wire._image import check_local_sources

    check_local_sources(["comfy_llm_backend_cuda", "comfy_llm_staging"])
    with pytest.raises(ModalUnavailableError) as raised:
        check_local_sources(["comfy_llm_staging", "comfy_llm_not_installed"])
    assert raised.value.missing == "sources"
    message = str(raised.value)
    assert "comfy_llm_not_installed" in message and install_command("modal") in message


def _workspace_requirements() -> dict[str, list[str]]:
    """``name`` and ``name[extra]`` of every workspace package -> its requirement strings."""
    found: dict[str, list[str]] = {}
    for pyproject in sorted(ROOT.glob("packages/*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text())["project"]
        found[project["name"]] = list(project.get("dependencies", []))
        for extra, extra_requirements in project.get("optional-dependencies", {}).items():
            found[f"{project['name']}[{extra}]"] = list(extra_requirements)
    return found


@pytest.mark.parametrize(
    "platform",
    [
        {"sys_platform": "darwin", "platform_machine": "arm64", "platform_system": "Darwin"},
        {"sys_platform": "linux", "platform_machine": "x86_64", "platform_system": "Linux"},
    ],
    ids=["macos-arm64", "linux-x86_64"],
)
def test_the_modal_extra_installs_every_package_the_image_mounts(platform: dict[str, str]) -> None:
    """``comfy-llm[modal]`` alone (an [apple] user adding it) can deploy: on each platform
    the declared dependencies reach every workspace package ``image_lock.json`` mounts,
    except backend-cuda, whose sources modal-remote's wheel ships (test_mac_install.py)."""
    from comfy_llm_modal_remote.wire._image import _lock
    from packaging.requirements import Requirement

    requirements = _workspace_requirements()
    reached: set[str] = set()
    pending = ["comfy-llm[modal]"]
    while pending:
        name = pending.pop()
        for text in requirements.get(name, []):
            requirement = Requirement(text)
            environment = {"python_version": "3.11", "extra": "", **platform}
            if requirement.marker is not None and not requirement.marker.evaluate(environment):
                continue
            if requirement.name in reached or requirement.name not in requirements:
                continue
            reached.add(requirement.name)
            pending.append(requirement.name)
            pending.extend(f"{requirement.name}[{extra}]" for extra in requirement.extras)
    imports = {name.replace("-", "_") for name in reached}
    shipped = {"comfy_llm_backend_cuda"}  # as package data of modal-remote's wheel (hatch_build)
    missing = set(_lock()["local_packages"]) - imports
    assert missing <= shipped, missing
