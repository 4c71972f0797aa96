"""ComfyUI IMAGE tensors to RGB PIL images, without importing torch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from comfy_llm_core import ImageLimits
from PIL import Image

from ._limits import ProgressCallback, report
from .errors import ImageInputError

if TYPE_CHECKING:
    import numpy as np

_CHANNELS = (1, 3, 4)
# numpy is imported on first use: sampling a video file does not need it.


def to_numpy(value: Any) -> np.ndarray:
    """Return ``value`` as a NumPy array; torch tensors are duck-typed.

    A torch tensor (anything with ``detach``) is detached and moved to the
    CPU; dtypes NumPy lacks (bfloat16) are widened to float32 first.

    Args:
        value: A torch tensor, a NumPy array or anything ``np.asarray`` takes.

    Returns:
        The array (a view when no copy is needed).
    """
    import numpy as np

    if hasattr(value, "detach"):
        tensor = value.detach()
        if hasattr(tensor, "cpu"):
            tensor = tensor.cpu()
        try:
            return np.asarray(tensor.numpy())
        except (TypeError, RuntimeError):
            return np.asarray(tensor.float().numpy())
    return np.asarray(value)


def shape_of(value: Any) -> tuple[int, ...]:
    """Return the shape of a tensor or array without converting it.

    Args:
        value: A torch tensor, a NumPy array or a nested sequence.

    Returns:
        The shape as a tuple of ints.
    """
    import numpy as np

    shape = getattr(value, "shape", None)
    if shape is None:
        return tuple(np.asarray(value).shape)
    return tuple(int(size) for size in shape)


def pixels_to_image(pixels: np.ndarray) -> Image.Image:
    """Turn one validated ``[height, width, channels]`` array into an RGB image.

    Floats are taken as 0..1 and clipped; ``uint8`` as 0..255. One channel
    is grey; a fourth channel is alpha, composited onto white.

    Args:
        pixels: A finite array of shape ``[H, W, 1|3|4]``, float or uint8.

    Returns:
        An RGB ``PIL.Image.Image`` of size ``(W, H)``.
    """
    import numpy as np

    if pixels.dtype == np.uint8:
        values = pixels.astype(np.float32) / 255.0
    else:
        values = np.clip(pixels.astype(np.float32, copy=False), 0.0, 1.0)
    channels = values.shape[2]
    if channels == 1:
        values = np.repeat(values, 3, axis=2)
    elif channels == 4:
        alpha = values[:, :, 3:4]
        values = values[:, :, :3] * alpha + (1.0 - alpha)
    quantized = np.floor(values * 255.0 + 0.5).astype(np.uint8)
    return Image.fromarray(np.ascontiguousarray(quantized), mode="RGB")


def check_pixels(pixels: np.ndarray, *, what: str, index: int) -> None:
    """Refuse non-numeric or non-finite pixel arrays.

    Args:
        pixels: One image, ``[H, W, C]``.
        what: How to name the input in messages (``"IMAGE"``, ``"VIDEO"``).
        index: The image's position in its batch.

    Raises:
        ImageInputError: The dtype is not float or uint8, or a value is NaN
            or infinite.
    """
    import numpy as np

    kind = pixels.dtype.kind
    if kind != "f" and pixels.dtype != np.uint8:
        raise ImageInputError(
            f"{what} item {index} has dtype {pixels.dtype}; expected float values in 0..1 "
            "(or uint8 0..255); convert the tensor with .float() / 255",
            index=index,
        )
    if kind == "f" and not np.isfinite(pixels).all():
        bad = int(pixels.size - np.count_nonzero(np.isfinite(pixels)))
        raise ImageInputError(
            f"{what} item {index} contains {bad} NaN or infinite values; the upstream node "
            "produced an invalid image: fix or replace it (values must be finite, 0..1)",
            index=index,
            value=bad,
        )


def _from_pil(
    images: list[Image.Image] | tuple[Image.Image, ...],
    limits: ImageLimits,
    progress: ProgressCallback | None,
) -> tuple[Image.Image, ...]:
    """Already-decoded PIL images (image files): RGB as they are, no float round trip."""
    from ._image_files import to_rgb

    if len(images) > limits.max_images:
        raise ImageInputError(
            f"{len(images)} images were given; this model accepts at most {limits.max_images} "
            "per request; pass fewer images or split the request",
            value=len(images),
            limit=limits.max_images,
        )
    result = []
    for index, image in enumerate(images):
        result.append(to_rgb(image))
        report(progress, "Preparing images", index + 1, len(images))
    return tuple(result)


def images_from_comfy(
    images: Any,
    *,
    limits: ImageLimits | None = None,
    progress: ProgressCallback | None = None,
) -> tuple[Image.Image, ...]:
    """Convert a ComfyUI IMAGE batch to RGB PIL images.

    The input is ComfyUI's ``[batch, height, width, channels]`` float tensor
    with values in 0..1 (a torch tensor or a NumPy array; 1, 3 or 4
    channels). Values outside 0..1 are clipped; alpha is composited onto
    white. A 3-D ``[height, width, channels]`` array is refused rather than
    guessed at, since ComfyUI always sends a batch and a 3-D tensor may as
    well be a MASK. A list of PIL images (decoded image files) is taken as
    it is, converted to RGB without any float copy.

    Args:
        images: The IMAGE value, or ``None`` for no images.
        limits: Bounds; ``limits.max_images`` caps the batch size.
        progress: Optional ``progress(message, done, total)`` callback.

    Returns:
        One RGB image per batch item, in order; empty for ``None``.

    Raises:
        ImageInputError: Wrong rank, wrong channel count, an empty batch or
            zero-sized image, a non-numeric dtype, NaN/inf values, or more
            images than ``limits.max_images``.
    """
    if images is None:
        return ()
    limits = limits or ImageLimits()
    if (
        isinstance(images, (list, tuple))
        and images
        and all(isinstance(item, Image.Image) for item in images)
    ):
        return _from_pil(images, limits, progress)
    if isinstance(images, (list, tuple)) and images and hasattr(images[0], "shape"):
        raise ImageInputError(
            f"IMAGE must be one [batch, height, width, channels] tensor, not a list of "
            f"{len(images)} tensors; batch them first (e.g. with an Image Batch node)"
        )
    shape = shape_of(images)
    if len(shape) != 4:
        hint = " (add a batch dimension: image[None])" if len(shape) == 3 else ""
        raise ImageInputError(
            f"IMAGE must be a 4-D [batch, height, width, channels] tensor, got shape "
            f"{list(shape)}{hint}; connect an IMAGE output, not a MASK or latent",
            value=len(shape),
            limit=4,
        )
    batch, height, width, channels = shape
    if batch == 0:
        raise ImageInputError(
            "IMAGE batch is empty (0 images); connect a node that outputs at least one image "
            "or leave the input unconnected",
            value=0,
        )
    if channels not in _CHANNELS:
        raise ImageInputError(
            f"IMAGE has {channels} channels (shape {list(shape)}); expected 1, 3 or 4 in the "
            "last dimension [batch, height, width, channels]; a channels-first tensor must be "
            "permuted to channels-last",
            value=channels,
        )
    if height == 0 or width == 0:
        raise ImageInputError(
            f"IMAGE has zero size ({width}x{height}); pass images at least 1x1 pixel",
            value=0,
        )
    if batch > limits.max_images:
        raise ImageInputError(
            f"IMAGE batch has {batch} images; this model accepts at most {limits.max_images} "
            f"per request; pass fewer images (e.g. select {limits.max_images} with an Image "
            "From Batch node) or split the request",
            value=batch,
            limit=limits.max_images,
        )
    result: list[Image.Image] = []
    for index in range(batch):
        pixels = to_numpy(images[index])
        check_pixels(pixels, what="IMAGE", index=index)
        result.append(pixels_to_image(pixels))
        report(progress, "Preparing images", index + 1, batch)
    return tuple(result)
