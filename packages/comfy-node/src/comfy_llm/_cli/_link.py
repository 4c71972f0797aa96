"""``comfy-llm comfyui-link``: put the installed node into a ComfyUI folder.

ComfyUI loads nodes only from folders under ``custom_nodes/``; a ``pip``/``uv``
install of ``comfy-llm`` alone is invisible to it. This writes a tiny shim
package there whose ``__init__.py`` re-exports :func:`comfy_llm.comfy_entrypoint`
from the interpreter's installed distribution::

    ComfyUI/
      main.py
      custom_nodes/
        comfy_llm_link/
          __init__.py      # from comfy_llm import comfy_entrypoint

The shim works only in an interpreter that can import ``comfy_llm``, so the
link is refused unless ComfyUI's own Python (``--python``, else the ComfyUI
folder's ``.venv``/``venv``, else this interpreter) imports it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from comfy_llm_core import write_atomically

from comfy_llm.errors import ComfyUIDirError, ComfyUIInterpreterError

__all__ = [
    "SHIM_FOLDER",
    "SHIM_SOURCE",
    "check_interpreter",
    "comfyui_python",
    "link_into_comfyui",
]

SHIM_FOLDER = "comfy_llm_link"
SHIM_SOURCE = '''"""comfy-llm: written by `comfy-llm comfyui-link`; safe to delete.

The node itself lives in the comfy-llm distribution installed into this
interpreter; this folder only makes ComfyUI load it.
"""

from comfy_llm import WEB_DIRECTORY, comfy_entrypoint

__all__ = ["WEB_DIRECTORY", "comfy_entrypoint"]
'''
_MARKER = "written by `comfy-llm comfyui-link`"


_VENV_PYTHONS = (
    (".venv", "bin", "python"),
    ("venv", "bin", "python"),
    (".venv", "Scripts", "python.exe"),
    ("venv", "Scripts", "python.exe"),
)


def comfyui_python(root: Path, explicit: str | Path | None = None) -> Path:
    """The interpreter ComfyUI in ``root`` runs with (best knowledge).

    ``explicit`` wins; then a virtual environment inside the ComfyUI folder;
    then the interpreter running this command.
    """
    if explicit:
        return Path(explicit).expanduser()
    for parts in _VENV_PYTHONS:
        candidate = root.joinpath(*parts)
        if candidate.is_file():
            return candidate
    return Path(sys.executable)


def check_interpreter(python: Path) -> None:
    """Refuse when ``python`` cannot import ``comfy_llm`` (a shim there would fail).

    Raises:
        ComfyUIInterpreterError: It cannot run or cannot import the package.
    """
    try:
        done = subprocess.run(
            [str(python), "-c", "import comfy_llm"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ComfyUIInterpreterError(python, f"it could not be run: {error}") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        raise ComfyUIInterpreterError(python, lines[-1] if lines else f"exit {done.returncode}")


def link_into_comfyui(
    comfyui_dir: str | Path, *, force: bool = False, python: str | Path | None = None
) -> Path:
    """Write the shim package into ``comfyui_dir/custom_nodes``.

    Re-running is safe: an existing shim written by this command is replaced;
    a foreign folder of the same name is left alone unless ``force``.

    Args:
        comfyui_dir: The ComfyUI folder (the one holding ``main.py``).
        force: Replace a folder of the same name that this command did not write.
        python: ComfyUI's interpreter (default: see :func:`comfyui_python`).

    Returns:
        The shim's ``__init__.py``.

    Raises:
        ComfyUIDirError: The folder is not a ComfyUI install, or a foreign
            ``comfy_llm_link`` folder is in the way.
        ComfyUIInterpreterError: ComfyUI's interpreter cannot import comfy_llm.
    """
    root = Path(comfyui_dir).expanduser()
    if not root.is_dir():
        raise ComfyUIDirError(root, "is not a folder")
    if not (root / "main.py").is_file() or not (root / "comfy").is_dir():
        raise ComfyUIDirError(root, "does not look like ComfyUI (no main.py and comfy/ folder)")
    check_interpreter(comfyui_python(root, python))
    custom_nodes = root / "custom_nodes"
    custom_nodes.mkdir(exist_ok=True)
    shim_dir = custom_nodes / SHIM_FOLDER
    init = shim_dir / "__init__.py"
    if shim_dir.exists() and not force:
        existing = init.read_text(encoding="utf-8") if init.is_file() else ""
        if _MARKER not in existing:
            raise ComfyUIDirError(
                shim_dir, "exists and was not written by comfy-llm (re-run with --force to replace)"
            )
    shim_dir.mkdir(exist_ok=True)
    write_atomically(init, SHIM_SOURCE)
    return init
