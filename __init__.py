"""ComfyUI entry for a clone of this repository in ``custom_nodes/``.

ComfyUI Manager and the Comfy registry clone the repository into
``ComfyUI/custom_nodes/<folder>`` and install ``requirements.txt``; the
workspace's own packages are not on the index, so their ``src`` folders go on
``sys.path`` here (unless a ``comfy-llm`` install is already importable).
"""

import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _add_workspace_sources() -> None:
    if importlib.util.find_spec("comfy_llm") is not None:
        return
    packages = os.path.join(_HERE, "packages")
    for name in sorted(os.listdir(packages)):
        src = os.path.join(packages, name, "src")
        if os.path.isdir(src) and src not in sys.path:
            sys.path.append(src)


_add_workspace_sources()

from comfy_llm import comfy_entrypoint  # noqa: E402

__all__ = ["comfy_entrypoint"]
