"""The container image: exact pins from the lock, the workspace as local sources.

``image_lock.json`` (written from uv.lock by ``scripts/modal_image_lock.py``)
holds every package backend-cuda and its ``vllm`` extra resolve to on Linux
x86_64, the Python and uv versions that build them, and the workspace
packages that go in as local sources so the worker runs the node's own code.
Nothing MLX: the Apple backend is not a dependency of backend-cuda.

Which local files travel is decided here, once, by :func:`source_ignored`:
Modal's mount calls it for every file below each package
(``_MountDir.get_files_to_upload``, modal/mount.py:218) and
:func:`local_source_files` applies the same rule, so the deployment
fingerprint hashes exactly what the mounts upload. It must be a callable (or
a list): Modal turns only a list into a pattern matcher (mount.py:738) and
calls anything else, so a tuple fails every deploy with ``TypeError``.

The toolchain for vLLM's JIT paths: debian_slim apt-installs gcc and
build-essential (modal/_image.py:2823), enough for Triton and Inductor;
FlashInfer's JIT also needs ``nvcc`` and ``CUDA_HOME``, which the pinned
``nvidia-cuda-nvcc`` wheel provides under ``nvidia/cu13`` in site-packages.
The image points ``CUDA_HOME``/``PATH`` there, and one build step
(:func:`~._cuda_toolchain.toolchain_script`) completes that layout for
FlashInfer's link line and compiles and links a probe kernel with it, so a
layout FlashInfer cannot link against fails the build, not a request.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
from importlib import resources
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, TypedDict

from ..errors import ModalUnavailableError
from ._cuda_toolchain import toolchain_script
from ._settings import ModalSettings

if TYPE_CHECKING:
    import modal

__all__ = [
    "CUDA_HOME",
    "REMOTE_SOURCE_ROOT",
    "ImageSpec",
    "build_image",
    "check_local_sources",
    "image_spec",
    "local_source_files",
    "shipped_sources",
    "source_ignored",
]

_LOCK_FILE = "image_lock.json"
REMOTE_SOURCE_ROOT = "/root"
"""Where ``add_local_python_source`` puts each package (on the container's PYTHONPATH)."""
_IGNORED_DIRS = frozenset(
    {"__pycache__", "tests", "test", "bench", "vllm_tests", "node_modules", "_sources"}
)
SHIPPED_SOURCES = "_sources"
"""Where this wheel carries backend-cuda's sources (``hatch_build.py``): the image
mounts them when backend-cuda is not installed here (an [apple]+[modal] Mac)."""
_IGNORED_SUFFIXES = frozenset({".pyc", ".pyo", ".so.tmp", ".tmp", ".orig", ".rej"})
_SITE_PACKAGES = "/usr/local/lib/python{python}/site-packages"
CUDA_HOME = _SITE_PACKAGES + "/nvidia/cu13"
"""The pip CUDA 13 toolkit's root in the image (``nvidia-cuda-nvcc`` puts ``bin/nvcc`` there)."""
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def source_ignored(relative: PurePath) -> bool:
    """True for a file below a package that must not travel to the containers.

    Bytecode and caches, anything dot-prefixed (``.venv*``, ``.mypy_cache``,
    editor files), test and bench folders, temporary files. Everything else
    goes: the modules and the data files they read (``curated_profiles.json``,
    ``image_lock.json``, ``py.typed``, pinned profiles).
    """
    parts = PurePath(relative).parts
    if any(part.startswith(".") or part in _IGNORED_DIRS for part in parts):
        return True
    name = parts[-1] if parts else ""
    return any(name.endswith(suffix) for suffix in _IGNORED_SUFFIXES) or name.endswith("~")


@dataclasses.dataclass(frozen=True, slots=True)
class ImageSpec:
    """Everything the image is built from.

    Attributes:
        python_version: CPython of the image (``debian_slim(python_version=...)``).
        uv_version: The uv binary that installs the requirements.
        requirements: ``name==version`` pins, one per package.
        local_packages: Import names added with ``add_local_python_source``.
        env: Variables baked into the image (the deployment's names and paths).
    """

    python_version: str
    uv_version: str
    requirements: tuple[str, ...]
    local_packages: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    cuda_toolchain: bool = True


class ImageLock(TypedDict):
    """``image_lock.json``: what ``scripts/modal_image_lock.py`` pinned for the image."""

    python_version: str
    uv_version: str
    platform: str
    requirements: list[str]
    local_packages: list[str]
    stager_requirements: list[str]
    stager_local_packages: list[str]


def _lock() -> ImageLock:
    text = resources.files("comfy_llm_modal_remote").joinpath(_LOCK_FILE).read_text("utf-8")
    data: ImageLock = json.loads(text)  # our own package data, written by the lock script
    return data


def image_spec(
    settings: ModalSettings, extra_env: dict[str, str] | None = None, *, stager: bool = False
) -> ImageSpec:
    """The image definition for one deployment's settings.

    ``stager``: the ModelStager's slim image. The stager only resolves and
    downloads, so it carries modal-remote's own closure (``stager_requirements``:
    no backend-cuda, so no torch, CUDA, vLLM or toolchain step) and the
    workspace packages that closure names; the app's import path needs nothing
    more (``worker/_app.py`` imports the engine modules, which load torch only
    inside the functions that run a model).
    """
    lock = _lock()
    python = str(lock["python_version"])
    env = {**settings.container_env(), "HF_HUB_DISABLE_TELEMETRY": "1"}
    if not stager:
        cuda_home = CUDA_HOME.format(python=python)
        env.update({"CUDA_HOME": cuda_home, "PATH": f"{cuda_home}/bin:{_SYSTEM_PATH}"})
    env.update(extra_env or {})
    return ImageSpec(
        python_version=python,
        uv_version=str(lock["uv_version"]),
        requirements=tuple(lock["stager_requirements" if stager else "requirements"]),
        local_packages=tuple(lock["stager_local_packages" if stager else "local_packages"]),
        env=tuple(sorted(env.items())),
        cuda_toolchain=not stager,
    )


def shipped_sources(name: str) -> Path | None:
    """This wheel's copy of a package's sources, if it ships one (not in the workspace)."""
    folder = Path(str(resources.files("comfy_llm_modal_remote"))) / SHIPPED_SOURCES / name
    return folder if folder.is_dir() else None


def _installed(name: str) -> bool:
    spec = importlib.util.find_spec(name)
    return spec is not None and bool(spec.submodule_search_locations)


def _package_dirs(name: str) -> list[Path]:
    """Where ``name``'s sources are here.

    Installed, as Modal finds it (``find_spec``, package_utils.py:37), else the
    copy this wheel ships (:func:`shipped_sources`).
    """
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        shipped = shipped_sources(name)
        if shipped is not None:
            return [shipped]
        raise ModalUnavailableError(
            "sources",
            f"the workspace package {name} is not installed in this Python, so the Modal "
            "image cannot carry it",
        )
    return [Path(location) for location in spec.submodule_search_locations]


def check_local_sources(names: tuple[str, ...] | list[str]) -> None:
    """Before deploying: every package the image mounts is importable here.

    Raises:
        ModalUnavailableError: One line naming the first missing package and the install.
    """
    for name in names:
        _package_dirs(name)


def local_source_files(names: tuple[str, ...] | list[str]) -> list[tuple[Path, str]]:
    """``(local file, remote path)`` of every file the image's source mounts upload.

    The same walk and rule as Modal's ``_MountDir`` with :func:`source_ignored`
    (every file below each package folder, relative paths tested), sorted by
    remote path.
    """
    files: list[tuple[Path, str]] = []
    for name in names:
        for base in _package_dirs(name):
            remote = PurePath(REMOTE_SOURCE_ROOT, *name.split("."))
            for folder, _, filenames in os.walk(base):
                for filename in filenames:
                    local = Path(folder, filename)
                    relative = local.relative_to(base)
                    if not source_ignored(relative):
                        files.append((local.resolve(), (remote / relative).as_posix()))
    return sorted(files, key=lambda item: item[1])


def build_image(spec: ImageSpec) -> modal.Image:
    """Turn the spec into a ``modal.Image`` (offline: nothing is built yet)."""
    import modal

    env = dict(spec.env)
    image = modal.Image.debian_slim(python_version=spec.python_version).uv_pip_install(
        *spec.requirements, uv_version=spec.uv_version
    )
    if spec.cuda_toolchain:
        # FlashInfer links with -L$CUDA_HOME/lib64 -lcudart -lcuda: make that work, prove it.
        # Before .env: the environment carries the code fingerprint, and this layer
        # (a few seconds of nvcc) should be rebuilt only when the pins change.
        image = image.run_commands(toolchain_script(env["CUDA_HOME"]))
    image = image.env(env)
    installed = [name for name in spec.local_packages if _installed(name)]
    # A callable, never a tuple (see the module docstring); data files travel too.
    image = image.add_local_python_source(*installed, ignore=source_ignored)
    if not modal.is_local():
        # In a container the app module is imported to run a function, and its images
        # are already built: nothing is uploaded from here. The stager's slim image
        # has no backend-cuda, whose sources the GPU image's definition names.
        return image
    for name in spec.local_packages:
        if name not in installed:  # backend-cuda on a Mac: the sources this wheel ships
            image = image.add_local_dir(
                _package_dirs(name)[0],
                remote_path=f"{REMOTE_SOURCE_ROOT}/{name}",
                ignore=source_ignored,
            )
    return image
