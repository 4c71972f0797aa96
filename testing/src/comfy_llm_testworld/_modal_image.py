"""A stand-in container holds only what its image installs: imports outside it fail.

A Modal container imports from its image alone: the pinned packages the image's
``uv_pip_install`` layer installed, the workspace sources it mounts, and the
client Modal itself mounts with its dependencies (image builder versions after
2024.10, modal/_functions.py:1035-1036). A stand-in container is a process of
this test environment, which has everything installed; without this rule a
stager that imported torch would pass here and fail on the stager's slim image.

:func:`refuse_outside_image` installs a ``sys.meta_path`` finder, before any
product import, that refuses a top-level module when every distribution that
provides it is outside the image, and a workspace package the image does not
mount. Standard-library modules and modules no distribution claims pass.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import re
import sys
from collections.abc import Iterable, Sequence
from importlib import metadata
from types import ModuleType

from packaging.requirements import Requirement

__all__ = ["ImageImportError", "image_distributions", "refuse_outside_image"]

_WORKSPACE_PREFIX = "comfy_llm"


class ImageImportError(ModuleNotFoundError):
    """A module the container's image does not install."""


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(roots: Iterable[str]) -> set[str]:
    """``roots`` and every distribution they require here (markers evaluated, extras not)."""
    seen: set[str] = set()
    pending = [_canonical(root) for root in roots]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(_canonical(requirement.name))
    return seen


def image_distributions(requirements: Sequence[str]) -> set[str]:
    """The distributions a container of the image has: its pins, plus Modal's client closure."""
    pinned = {_canonical(pin.split("==", 1)[0]) for pin in requirements}
    return pinned | _closure(["modal"])


class _Refuse(importlib.abc.MetaPathFinder):
    def __init__(self, allowed: set[str], local_packages: set[str]) -> None:
        self._allowed = allowed
        self._local = local_packages
        self._providers = {
            top: {_canonical(name) for name in names}
            for top, names in metadata.packages_distributions().items()
        }

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        del target
        if path is None and (reason := self.refused(fullname)):
            raise ImageImportError(reason, name=fullname)
        return None  # a submodule: its top-level package was already let through

    def refused(self, name: str) -> str | None:
        """Why the top-level module ``name`` is absent from the image (None: it is there)."""
        if name.startswith(_WORKSPACE_PREFIX) and name not in self._local:
            return f"{name} is not mounted in this container's image"
        providers = self._providers.get(name)
        if providers and not providers & self._allowed and name not in self._local:
            return f"{name} ({', '.join(sorted(providers))}) is not installed in this image"
        return None


def refuse_outside_image(requirements: Sequence[str], local_packages: Sequence[str]) -> None:
    """From now on, this process imports only what the image installs and mounts.

    ``importlib.util.find_spec`` answers None for a refused module, as it does
    for one that is not installed (the product asks it which sources to mount).
    """
    refuse = _Refuse(image_distributions(requirements), set(local_packages))
    sys.meta_path.insert(0, refuse)
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> importlib.machinery.ModuleSpec | None:
        if refuse.refused(name.partition(".")[0]):
            return None
        return real_find_spec(name, package)

    importlib.util.find_spec = find_spec
