"""Which GGUF files in a folder are the model and its vision projector.

A llama.cpp user keeps ``model.gguf`` beside ``mmproj-*.gguf`` (llama.cpp
``docs/multimodal.md``); a snapshot staged for this engine holds the same two
files. Both are checked (profiles' GGUF rules) before anything is loaded.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from comfy_llm_profiles import GgufModel, GgufProjector, check_model_file, check_projector_file

from .errors import GgufFilesError

__all__ = ["CheckedFiles", "check_files", "find_gguf_files"]


@dataclasses.dataclass(frozen=True, slots=True)
class CheckedFiles:
    """A checked model and its checked projector (None for a text-only model).

    Attributes:
        model: The model file.
        projector: The projector file, or None.
    """

    model: GgufModel
    projector: GgufProjector | None


def _is_projector(path: Path) -> bool:
    return path.name.lower().startswith("mmproj")


def find_gguf_files(directory: Path) -> tuple[Path, Path | None]:
    """Pick the model and the projector among a folder's ``*.gguf`` files.

    Args:
        directory: The folder.

    Returns:
        ``(model, projector or None)``.

    Raises:
        GgufFilesError: No model, or more than one model or projector.
    """
    files = sorted(p for p in Path(directory).glob("*.gguf") if p.is_file())
    models = [p for p in files if not _is_projector(p)]
    projectors = [p for p in files if _is_projector(p)]
    if len(models) != 1:
        found = ", ".join(p.name for p in models) or "none"
        raise GgufFilesError(str(directory), f"expected one model .gguf, found {found}")
    if len(projectors) > 1:
        found = ", ".join(p.name for p in projectors)
        raise GgufFilesError(str(directory), f"expected at most one mmproj .gguf, found {found}")
    return models[0], projectors[0] if projectors else None


def check_files(model: Path, projector: Path | None) -> CheckedFiles:
    """Check a model file and its projector (paired: widths must match).

    Raises:
        UnsafeGgufError: Either file is refused; the message names it.
    """
    checked = check_model_file(model)
    paired = check_projector_file(projector, checked) if projector is not None else None
    return CheckedFiles(checked, paired)
