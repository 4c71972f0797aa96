"""comfy-llm: multimodal language models inside ComfyUI workflows.

Importing this package is cheap: ComfyUI, torch and the engines load only
when the node runs. ComfyUI finds the node through :func:`comfy_entrypoint`.

The rest of ``__all__`` is the seam benchmarks and the test world drive the
product through (never its private modules), loaded on first use:

* ``ModalLLMNode``, ``CaptionImagesNode``: the two nodes (need ComfyUI, or
  the test world's stand-in, importable); ``ComfyGlue``: one node run's
  progress bar, live text and Cancel (what a benchmark times).
* ``LLMRequest``, ``run_request``, ``resolve_and_stage``: the pipeline both
  faces share; ``storage_root``, ``model_folders``: where it keeps snapshots
  and which checkpoint folders it reads.

The CLI is not in the seam: the registry archive leaves its package out, and
the node's import walk must never reach it (tests/test_registry_pack.py).
Callers run it through its console-script entry point, ``comfy-llm``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from comfy_llm._entrypoint import comfy_entrypoint
from comfy_llm._versions import __version__
from comfy_llm.errors import NodeError

if TYPE_CHECKING:
    from comfy_llm._comfyui._caption_node import CaptionImagesNode
    from comfy_llm._comfyui._glue import ComfyGlue
    from comfy_llm._comfyui._modal_llm import ModalLLMNode
    from comfy_llm._pipeline import resolve_and_stage, run_request
    from comfy_llm._request import LLMRequest
    from comfy_llm._storage import model_folders, storage_root

__all__ = [
    "WEB_DIRECTORY",
    "CaptionImagesNode",
    "ComfyGlue",
    "LLMRequest",
    "ModalLLMNode",
    "NodeError",
    "__version__",
    "comfy_entrypoint",
    "model_folders",
    "resolve_and_stage",
    "run_request",
    "storage_root",
]

WEB_DIRECTORY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_comfyui", "web")
"""The frontend extension's folder (absolute): a custom_nodes entry re-exports it
as its own ``WEB_DIRECTORY``, and ComfyUI serves the ``.js`` files in it."""


def _seam(name: str) -> object:
    """The seam name's object, imported on first use.

    Each import is static, so the registry's scan sees what the package can
    load (it flags a module named at run time).
    """
    if name == "CaptionImagesNode":
        from comfy_llm._comfyui._caption_node import CaptionImagesNode

        return CaptionImagesNode
    if name == "ComfyGlue":
        from comfy_llm._comfyui._glue import ComfyGlue

        return ComfyGlue
    if name == "ModalLLMNode":
        from comfy_llm._comfyui._modal_llm import ModalLLMNode

        return ModalLLMNode
    if name == "LLMRequest":
        from comfy_llm._request import LLMRequest

        return LLMRequest
    if name in ("resolve_and_stage", "run_request"):
        from comfy_llm import _pipeline

        return getattr(_pipeline, name)
    if name in ("model_folders", "storage_root"):
        from comfy_llm import _storage

        return getattr(_storage, name)
    raise AttributeError(f"module 'comfy_llm' has no attribute {name!r}")


def __getattr__(name: str) -> object:
    """Load a seam name on first use (PEP 562); anything else is an AttributeError.

    Importing the package (ComfyUI's scan, the CLI's start) loads none of them.
    """
    value = _seam(name)
    globals()[name] = value
    return value
