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

import importlib
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

_LAZY = {
    "CaptionImagesNode": ("comfy_llm._comfyui._caption_node", "CaptionImagesNode"),
    "ComfyGlue": ("comfy_llm._comfyui._glue", "ComfyGlue"),
    "LLMRequest": ("comfy_llm._request", "LLMRequest"),
    "ModalLLMNode": ("comfy_llm._comfyui._modal_llm", "ModalLLMNode"),
    "model_folders": ("comfy_llm._storage", "model_folders"),
    "resolve_and_stage": ("comfy_llm._pipeline", "resolve_and_stage"),
    "run_request": ("comfy_llm._pipeline", "run_request"),
    "storage_root": ("comfy_llm._storage", "storage_root"),
}
"""The seam's names and where each lives: imported on first use, so importing the
package (ComfyUI's scan, the CLI's start) loads none of them."""


def __getattr__(name: str) -> object:
    """Load a seam name on first use (PEP 562); anything else is an AttributeError."""
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'comfy_llm' has no attribute {name!r}")
    value = getattr(importlib.import_module(where[0]), where[1])
    globals()[name] = value
    return value
