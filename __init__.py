"""ComfyUI entry for a clone of this repository in ``custom_nodes/``.

ComfyUI Manager and the Comfy registry unpack the registry archive (or a git
clone) into ``ComfyUI/custom_nodes/<folder>`` and install ``requirements.txt``,
which names only third-party libraries. The node's own packages load from the
archive's ``packages/*/src``, put first on ``sys.path`` here: the registry
scans and serves exactly this code, the packages are the versions the node is
published as (one version for all, ``scripts/version.py``), and another
comfy-llm installed into ComfyUI's Python, at whatever version, cannot mix in.
A development install of this very clone (``uv sync``) is left as it is.
"""

import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGES = os.path.join(_HERE, "packages")


def _use_own_sources() -> None:
    spec = importlib.util.find_spec("comfy_llm")
    origin = os.path.abspath(spec.origin) if spec is not None and spec.origin else ""
    if origin.startswith(_PACKAGES + os.sep):
        return  # these very sources already
    sources = [os.path.join(_PACKAGES, name, "src") for name in sorted(os.listdir(_PACKAGES))]
    sources = [src for src in sources if os.path.isdir(src)]
    sys.path[:] = sources + [entry for entry in sys.path if entry not in sources]


_use_own_sources()

from comfy_llm import WEB_DIRECTORY, comfy_entrypoint  # noqa: E402

__all__ = ["WEB_DIRECTORY", "comfy_entrypoint"]
