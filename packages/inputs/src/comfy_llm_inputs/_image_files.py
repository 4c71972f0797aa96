"""Image files (the CLI's ``--image``) to RGB images, with bounded decode memory.

Each path must be a regular file (checked before it is opened; a FIFO never
blocks). The header alone gives the size: above ``limits.max_image_pixels``
the image is refused with the numbers, before any pixel is decoded, and
Pillow's own "decompression bomb" guard is replaced by that message. JPEGs
are decoded straight at a reduced scale (``draft``); other formats are
decoded once and reduced at once to ``limits.max_image_side``, so a
12000x12000 PNG costs its decoded size once, never float copies of it.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Sequence
from typing import BinaryIO

from comfy_llm_core import ImageLimits
from PIL import Image, UnidentifiedImageError

from ._limits import ProgressCallback, report
from ._paths import open_regular_file
from .errors import ImageInputError

__all__ = ["image_from_file", "images_from_files", "to_rgb"]

_BOMB_PIXELS = re.compile(r"\((\d+) pixels\)")
_WHITE = (255, 255, 255)


def _too_large(name: str, index: int, pixels: int, limit: int, size: str) -> ImageInputError:
    return ImageInputError(
        f"Image {name!r} is {size} ({pixels:,} pixels); the limit is {limit:,} pixels "
        f"(about {int(limit**0.5):,}x{int(limit**0.5):,}); downscale it before passing it",
        index=index,
        value=pixels,
        limit=limit,
    )


def _open(path: str, name: str, index: int, limits: ImageLimits) -> tuple[Image.Image, BinaryIO]:
    def fail(problem: str) -> ImageInputError:
        return ImageInputError(f"Image {name!r} {problem}", index=index)

    handle, _size = open_regular_file(path, fail)
    try:
        with warnings.catch_warnings():
            # Our own limit below says it better, with the input's name.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(handle)
    except Image.DecompressionBombError as error:
        handle.close()
        found = _BOMB_PIXELS.search(str(error))
        pixels = int(found.group(1)) if found else limits.max_image_pixels + 1
        raise _too_large(name, index, pixels, limits.max_image_pixels, "too large") from None
    except (UnidentifiedImageError, OSError, ValueError) as error:
        handle.close()
        raise ImageInputError(
            f"Image {name!r} could not be read as an image ({type(error).__name__}); pass a "
            "PNG, JPEG, WebP or another format Pillow reads",
            index=index,
        ) from None
    width, height = image.size
    if width * height > limits.max_image_pixels:
        handle.close()
        raise _too_large(name, index, width * height, limits.max_image_pixels, f"{width}x{height}")
    return image, handle


def to_rgb(image: Image.Image) -> Image.Image:
    """``image`` as RGB; alpha (or palette transparency) composited onto white."""
    if image.mode == "RGB":
        return image
    has_alpha = "A" in image.getbands() or "transparency" in image.info
    if not has_alpha:
        return image.convert("RGB")
    rgba = image.convert("RGBA")
    background = Image.new("RGBA", rgba.size, (*_WHITE, 255))
    return Image.alpha_composite(background, rgba).convert("RGB")


def image_from_file(
    path: str | os.PathLike[str], *, index: int = 0, limits: ImageLimits | None = None
) -> Image.Image:
    """Read one image file as an RGB image at most ``limits.max_image_side`` wide and high.

    Args:
        path: The file.
        index: Its position among the request's images (for the error).
        limits: ``max_image_pixels`` refuses, ``max_image_side`` downscales.

    Returns:
        The RGB image; alpha is composited onto white, the aspect ratio kept.

    Raises:
        ImageInputError: Not a regular file (missing, a directory, a pipe,
            standard input, a device), not an image, corrupt, or more pixels
            than ``limits.max_image_pixels``. The message names the file.
    """
    limits = limits or ImageLimits()
    text = os.fspath(path)
    name = os.path.basename(text.rstrip("/" + os.sep)) or text
    side = max(1, limits.max_image_side)
    image, handle = _open(text, name, index, limits)
    try:
        if image.mode in ("1", "P"):  # palette images resize by nearest neighbour: expand
            image = to_rgb(image)
        # draft (JPEG: decode at 1/2..1/8 scale), then reduce() by whole factors, then resample.
        image.thumbnail((side, side), Image.Resampling.LANCZOS, reducing_gap=2.0)
        image.load()
        return to_rgb(image)
    except (OSError, ValueError, SyntaxError) as error:
        raise ImageInputError(
            f"Image {name!r} is truncated or corrupt ({type(error).__name__}); re-export it",
            index=index,
        ) from None
    finally:
        handle.close()


def images_from_files(
    paths: Sequence[str | os.PathLike[str]],
    *,
    limits: ImageLimits | None = None,
    progress: ProgressCallback | None = None,
) -> tuple[Image.Image, ...]:
    """Read image files as RGB images (see :func:`image_from_file`).

    Raises:
        ImageInputError: More files than ``limits.max_images``, or one file
            was refused (the message names it).
    """
    limits = limits or ImageLimits()
    if len(paths) > limits.max_images:
        raise ImageInputError(
            f"{len(paths)} images were given; this model accepts at most {limits.max_images} "
            "per request; pass fewer images or split the request",
            value=len(paths),
            limit=limits.max_images,
        )
    images = []
    for index, path in enumerate(paths):
        images.append(image_from_file(path, index=index, limits=limits))
        report(progress, "Preparing images", index + 1, len(paths))
    return tuple(images)
