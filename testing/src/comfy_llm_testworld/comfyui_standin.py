"""Put the ComfyUI stand-in on ``sys.path`` for a test, then take it off.

The stand-in (``testing/comfyui_standin``) holds the few ComfyUI modules the
node touches, spelled as ComfyUI 0.33 spells them. It is never installed into
the environment, so nothing outside the node's tests can import ``comfy``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["STANDIN_MODULES", "installed_standin", "standin_path"]

STANDIN_MODULES = ("comfy", "comfy_api", "comfy_execution", "folder_paths", "server")
_NODE_MODULES = ("comfy_llm._comfyui",)
"""Node modules that hold ComfyUI objects: a fresh stand-in needs them fresh too."""


def standin_path() -> Path:
    """The folder holding the stand-in modules."""
    return Path(__file__).resolve().parents[2] / "comfyui_standin"


def _purge() -> None:
    for name in list(sys.modules):
        if name.split(".")[0] in STANDIN_MODULES or name.startswith(_NODE_MODULES):
            del sys.modules[name]


@contextmanager
def installed_standin() -> Iterator[Path]:
    """Make the stand-in importable (fresh module state) for the duration."""
    path = str(standin_path())
    _purge()
    sys.path.insert(0, path)
    try:
        yield standin_path()
    finally:
        if path in sys.path:
            sys.path.remove(path)
        _purge()
