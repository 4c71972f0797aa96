"""The example workflows' sample media, offered in ComfyUI's input folder.

Load Video and the file loader list only ComfyUI's ``input/`` folder, so a
template naming a clip that is not there opens with "Media input missing".
A clone or registry install carries the samples in ``example_workflows/media``
(a few KB, names starting ``comfy-llm-example-``); at start-up each one missing
from ``input/`` is copied there. Nothing is ever overwritten, and a wheel
install (no ``example_workflows`` folder) does nothing.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from comfy_llm._storage import comfy_input_dir

__all__ = ["SAMPLE_PREFIX", "install_example_media", "media_folder"]

SAMPLE_PREFIX = "comfy-llm-example-"
_LOG = logging.getLogger("comfy_llm")


def media_folder() -> Path | None:
    """``<checkout>/example_workflows/media`` when this package runs from a checkout."""
    # <checkout>/packages/comfy-node/src/comfy_llm/_comfyui/_example_media.py
    checkout = Path(__file__).resolve().parents[5]
    folder = checkout / "example_workflows" / "media"
    return folder if folder.is_dir() and (checkout / "packages").is_dir() else None


def install_example_media(source: Path | None = None, target: Path | None = None) -> list[str]:
    """Copy the samples missing from ComfyUI's input folder; return the names copied.

    Never raises: an unwritable input folder only costs the template its media.
    """
    source = source if source is not None else media_folder()
    target = target if target is not None else comfy_input_dir()
    if source is None or target is None:
        return []
    copied = []
    for sample in sorted(source.glob(f"{SAMPLE_PREFIX}*")):
        destination = target / sample.name
        if sample.is_symlink() or destination.exists() or destination.is_symlink():
            continue
        try:
            target.mkdir(parents=True, exist_ok=True)
            if sample.is_dir():  # a sample dataset folder (the LoRA caption template)
                partial = target / f".{sample.name}.partial"  # whole or not at all
                shutil.rmtree(partial, ignore_errors=True)
                shutil.copytree(sample, partial, symlinks=False)
                partial.rename(destination)
            elif sample.is_file():
                shutil.copyfile(sample, destination)
            else:
                continue
        except OSError as error:
            _LOG.warning("comfy-llm: could not copy example media %s: %s", sample.name, error)
            continue
        copied.append(sample.name)
    return copied
