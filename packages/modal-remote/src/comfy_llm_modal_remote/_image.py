"""The container image: exact pins from the lock, the workspace as local sources.

``image_lock.json`` (written from uv.lock by ``scripts/modal_image_lock.py``)
holds every package backend-cuda and its ``vllm`` extra resolve to on Linux
x86_64, the Python and uv versions that build them, and the workspace
packages that go in as local sources so the worker runs the node's own code.
Nothing MLX: the Apple backend is not a dependency of backend-cuda.
"""

from __future__ import annotations

import dataclasses
import json
from importlib import resources
from typing import Any

from ._settings import ModalSettings

__all__ = ["ImageSpec", "build_image", "image_spec"]

_LOCK_FILE = "image_lock.json"
_SOURCE_IGNORE = ("**/__pycache__/**", "**/*.pyc", "**/tests/**")


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


def _lock() -> dict[str, Any]:
    text = resources.files("comfy_llm_modal_remote").joinpath(_LOCK_FILE).read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def image_spec(settings: ModalSettings, extra_env: dict[str, str] | None = None) -> ImageSpec:
    """The image definition for one deployment's settings."""
    lock = _lock()
    env = {**settings.container_env(), "HF_HUB_DISABLE_TELEMETRY": "1", **(extra_env or {})}
    return ImageSpec(
        python_version=str(lock["python_version"]),
        uv_version=str(lock["uv_version"]),
        requirements=tuple(lock["requirements"]),
        local_packages=tuple(lock["local_packages"]),
        env=tuple(sorted(env.items())),
    )


def build_image(spec: ImageSpec) -> Any:
    """Turn the spec into a ``modal.Image`` (offline: nothing is built yet)."""
    import modal

    return (
        modal.Image.debian_slim(python_version=spec.python_version)
        .uv_pip_install(*spec.requirements, uv_version=spec.uv_version)
        .env(dict(spec.env))
        # The default ignore drops non-Python files; the lock file must travel too.
        .add_local_python_source(*spec.local_packages, ignore=_SOURCE_IGNORE)
    )
