"""Errors raised by the comfy-llm node and CLI.

Errors from the lower packages (profiles, staging, inputs, residency) keep
their own classes; this module holds only what the node and CLI add.
"""

from __future__ import annotations

from pathlib import Path

from comfy_llm_core import ComfyLLMError, ErrorAction, install_command, platform_extra

__all__ = [
    "CaptionFolderError",
    "ComfyUIDirError",
    "ComfyUIInterpreterError",
    "NodeError",
    "TargetUnavailableError",
]


class NodeError(ComfyLLMError):
    """Base class of the errors the node and the CLI add (not of the lower packages' errors).

    Catch ``comfy_llm_core.ComfyLLMError`` for every comfy-llm error.
    """


class TargetUnavailableError(NodeError, RuntimeError):
    """The requested execution target cannot run in this process.

    Attributes:
        target: The execution target that was asked for.
        reason: Why it cannot run here.
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, target: str, reason: str) -> None:
        self.target = target
        self.reason = reason
        super().__init__(f"Execution target {target!r} is not available here: {reason}")


class ComfyUIDirError(NodeError, ValueError):
    """The folder given to ``comfy-llm comfyui-link`` is not a ComfyUI install.

    Attributes:
        path: The folder that was given.
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        super().__init__(
            f"{str(path)!r} {problem}. Pass the ComfyUI folder that holds main.py and "
            "custom_nodes/, e.g. `comfy-llm comfyui-link ~/ComfyUI`."
        )


class CaptionFolderError(NodeError, ValueError):
    """The caption batch's folder (or image input) cannot be used.

    Attributes:
        folder: The folder that was given ("" when neither a folder nor images were).
        problem: What is wrong with it.
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, folder: str, problem: str) -> None:
        self.folder = folder
        self.problem = problem
        if not folder:  # neither a folder nor images: nothing to name
            super().__init__(
                f"Nothing to caption: {problem}. Connect an IMAGE batch to images, or type a "
                "folder of images (png, jpg, webp, ...) into folder."
            )
            return
        super().__init__(
            f"Caption folder {folder!r} {problem}. Give a folder of images (png, jpg, webp, "
            "...) directly inside it, or connect an IMAGE batch."
        )


class ComfyUIInterpreterError(NodeError, RuntimeError):
    """ComfyUI's Python cannot import ``comfy_llm``, so a link shim would fail there.

    Attributes:
        python: The interpreter that was checked.
        detail: Its last line of error output.
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, python: Path, detail: str) -> None:
        self.python = python
        self.detail = detail
        super().__init__(
            f"ComfyUI's Python {str(python)!r} cannot import comfy_llm ({detail}); nothing was "
            "linked. Install the node into that interpreter first: "
            f"`{install_command(platform_extra(), python=str(python), wheels=True)}`, or pass "
            "the interpreter ComfyUI runs with as --python."
        )
