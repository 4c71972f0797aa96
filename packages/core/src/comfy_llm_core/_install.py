"""The one place that says what to install, for the install this code runs from.

Every error, tooltip and help line that tells a user to install something asks
:func:`install_command`, so the advice is the same everywhere and is a command
that works from *this* install, before the first release to PyPI and after it:

* A clone or the Comfy registry's archive in ``custom_nodes/`` loads every
  package from its own ``packages/*/src`` (the root ``__init__.py``) and
  installs only third-party requirements. What an extra lacks there is its
  third-party requirement (``modal``, ``vllm``) or ``requirements.txt``
  itself (the platform's engine), never a ``comfy-llm*`` name: those names
  are not on an index a registry user can trust until RELEASING.md's first
  release, and an unclaimed name invites dependency confusion.
* An install of the wheels (``uv pip install comfy-llm[...]``, README) gets
  the extra at exactly the installed version, from the index configured for
  this Python (PyPI, or the one ``UV_DEFAULT_INDEX``/``PIP_INDEX_URL`` names).

Either way the command targets the Python running this code (ComfyUI's), with
``python -m pip`` where that Python has pip and ``uv pip --python`` where it
has not (a uv-made venv). ``EXTRA_REQUIREMENTS`` must equal the packages'
pyproject requirements (``tests/test_install_advice.py`` checks it).
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shlex
import sys
from pathlib import Path

__all__ = ["EXTRA_REQUIREMENTS", "install_command", "platform_extra"]

EXTRA_REQUIREMENTS: dict[str, tuple[str, ...]] = {
    "apple": (),  # requirements.txt has MLX-VLM for macOS arm64
    "cuda": (),  # requirements.txt has Transformers elsewhere; torch comes with ComfyUI
    "vllm": ("vllm>=0.32,<0.33",),
    # 8-bit / NF4 at load for Transformers (backend-cuda's extra of the same name)
    "bitsandbytes": ("bitsandbytes>=0.50,<0.51", "accelerate>=1.1"),
    "modal": ("modal>=1.6,<2",),
    "llamacpp": ("llama-cpp-python==0.3.36",),  # compiles llama.cpp (backend-llamacpp README)
}
"""What a clone in ``custom_nodes/`` needs per extra beyond its requirements.txt."""

_WHEEL_REQUIREMENT: dict[str, str] = {}
"""Extras that are not the node's own: the package that carries them (none now)."""

_CLONE_ROOT = Path(__file__).resolve().parents[4]  # <clone>/packages/core/src/comfy_llm_core


def _quoted(text: str) -> str:
    if os.name != "nt":
        return shlex.quote(text)
    return f'"{text}"' if any(c in text for c in ' \t&|<>^"') else text  # cmd.exe, PowerShell


def _installer(python: str | None) -> str:
    if python is not None:  # another interpreter: whether it has pip is not known here
        return f"uv pip install --python {_quoted(python)}"
    if not _has_pip():
        return f"uv pip install --python {_quoted(sys.executable)}"
    return f"{_quoted(sys.executable)} -m pip install"


def _has_pip() -> bool:
    """Whether this Python has pip, read from installed metadata.

    Not ``importlib.util.find_spec("pip")``: setuptools' distutils hack answers
    that lookup by clearing ``distutils`` from ``sys.modules``, which broke
    vLLM's engine start in the same process.
    """
    try:
        importlib.metadata.version("pip")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _clone_root() -> Path | None:
    """The clone (or registry archive) these sources load from, if they do."""
    root = _CLONE_ROOT
    if (root / "requirements.txt").is_file() and (root / "packages" / "core").is_dir():
        return root
    return None


def install_command(extra: str, *, python: str | None = None, wheels: bool = False) -> str:
    """The command that installs the ``comfy-llm[extra]`` pieces into a Python.

    Args:
        extra: ``apple``, ``cuda``, ``vllm``, ``bitsandbytes``, ``modal`` or ``llamacpp``.
        python: Another interpreter to install into (default: this one).
        wheels: Install the comfy-llm packages themselves even from a clone
            (what an interpreter that must import ``comfy_llm`` needs).

    Raises:
        KeyError: ``extra`` is not one of those.
    """
    requirements = EXTRA_REQUIREMENTS[extra]
    clone = None if wheels else _clone_root()
    if clone is not None:
        if requirements:
            return f"{_installer(python)} {' '.join(_quoted(r) for r in requirements)}"
        return f"{_installer(python)} -r {_quoted(str(clone / 'requirements.txt'))}"
    from comfy_llm_core import __version__

    wanted = _WHEEL_REQUIREMENT.get(extra, f"comfy-llm[{extra}]")
    return f"{_installer(python)} {_quoted(f'{wanted}=={__version__}')}"


def platform_extra() -> str:
    """The extra with this machine's local engine: ``apple`` on Apple Silicon, else ``cuda``."""
    return "apple" if sys.platform == "darwin" and platform.machine() == "arm64" else "cuda"
