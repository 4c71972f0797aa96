"""Ship backend-cuda's sources inside modal-remote's wheel and sdist.

The Modal image runs backend-cuda on the GPU worker, so a deploy must be able to
mount its sources; but installing backend-cuda here would pull torch and
Transformers into ComfyUI's Python (on a Mac, only to ship source files; review
r2 finding 3). So its modules travel as package data,
``comfy_llm_modal_remote/_sources/comfy_llm_backend_cuda``, which the image
mounts when backend-cuda is not installed (``_image._package_dirs``). Bytecode,
caches and tests stay out. An editable install (the workspace) has backend-cuda
installed and needs no copy.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SHIPPED = "comfy_llm_modal_remote/_sources/comfy_llm_backend_cuda"
_SKIPPED_DIRS = {"__pycache__", "tests", "test", "vllm_tests"}


class ShippedSourcesHook(BuildHookInterface):  # type: ignore[type-arg]
    """Force-include backend-cuda's source files (from the workspace, or an unpacked sdist)."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Add each source file; an sdist build keeps them for the wheel built from it."""
        if version == "editable":
            return
        root = Path(self.root)
        workspace = root.parent / "backend-cuda" / "src" / "comfy_llm_backend_cuda"
        if not workspace.is_dir():
            if (root / "src" / SHIPPED).is_dir():
                return  # an unpacked sdist: the files are already under src/
            raise RuntimeError(f"backend-cuda's sources are missing: {workspace}")
        prefix = SHIPPED if self.target_name == "wheel" else f"src/{SHIPPED}"
        for folder, folders, files in os.walk(workspace):
            folders[:] = [f for f in folders if f not in _SKIPPED_DIRS and not f.startswith(".")]
            for name in files:
                if name.endswith((".pyc", ".pyo")) or name.startswith("."):
                    continue
                path = Path(folder, name)
                relative = path.relative_to(workspace).as_posix()
                build_data["force_include"][str(path)] = f"{prefix}/{relative}"
