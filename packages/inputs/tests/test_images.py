"""ComfyUI IMAGE batches to RGB images."""

from __future__ import annotations

import numpy as np
import pytest
from comfy_llm_core import ImageLimits
from comfy_llm_inputs import ImageInputError, images_from_comfy
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp


def test_numpy_batch_to_rgb_images() -> None:
    batch = np.zeros((2, 4, 5, 3), np.float32)
    batch[0, ..., 0] = 1.0
    batch[1, ..., 2] = 0.5
    images = images_from_comfy(batch)
    assert len(images) == 2
    assert all(image.mode == "RGB" and image.size == (5, 4) for image in images)
    assert np.asarray(images[0])[0, 0].tolist() == [255, 0, 0]
    assert np.asarray(images[1])[0, 0].tolist() == [0, 0, 128]


def test_none_is_no_images() -> None:
    assert images_from_comfy(None) == ()


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_torch_tensors_are_duck_typed(dtype: str) -> None:
    torch = pytest.importorskip("torch")
    tensor = torch.full((1, 3, 2, 3), 0.25, dtype=getattr(torch, dtype), requires_grad=True)
    (image,) = images_from_comfy(tensor)
    assert np.asarray(image)[0, 0].tolist() == [64, 64, 64]


def test_grey_and_alpha_channels() -> None:
    grey = np.full((1, 2, 2, 1), 0.5, np.float32)
    assert np.asarray(images_from_comfy(grey)[0])[0, 0].tolist() == [128, 128, 128]
    rgba = np.zeros((1, 1, 2, 4), np.float32)
    rgba[0, 0, 0] = [1.0, 0.0, 0.0, 1.0]  # opaque red
    rgba[0, 0, 1] = [1.0, 0.0, 0.0, 0.0]  # fully transparent: white background
    pixels = np.asarray(images_from_comfy(rgba)[0])
    assert pixels[0, 0].tolist() == [255, 0, 0]
    assert pixels[0, 1].tolist() == [255, 255, 255]


def test_values_outside_0_1_are_clipped_and_uint8_accepted() -> None:
    batch = np.array([[[[-1.0, 2.0, 0.5]]]], np.float32)
    assert np.asarray(images_from_comfy(batch)[0])[0, 0].tolist() == [0, 255, 128]
    as_bytes = np.array([[[[1, 2, 3]]]], np.uint8)
    assert np.asarray(images_from_comfy(as_bytes)[0])[0, 0].tolist() == [1, 2, 3]


@pytest.mark.parametrize(
    ("shape", "pattern"),
    [
        ((4, 5, 3), r"4-D .* got shape \[4, 5, 3\] \(add a batch dimension"),
        ((1, 1, 4, 5, 3), "4-D"),
        ((1, 4, 5, 2), "2 channels"),
        ((1, 3, 8, 8), "channels-first"),
        ((0, 4, 5, 3), "batch is empty"),
        ((1, 0, 5, 3), "zero size"),
    ],
)
def test_shape_errors(shape: tuple[int, ...], pattern: str) -> None:
    with pytest.raises(ImageInputError, match=pattern):
        images_from_comfy(np.zeros(shape, np.float32))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values_are_refused_with_the_index(bad: float) -> None:
    batch = np.zeros((3, 2, 2, 3), np.float32)
    batch[1, 0, 0, 0] = bad
    with pytest.raises(ImageInputError, match=r"item 1 contains 1 NaN or infinite") as info:
        images_from_comfy(batch)
    assert info.value.index == 1


def test_too_many_images_names_value_limit_and_fix() -> None:
    with pytest.raises(ImageInputError, match=r"9 images; .* at most 8 .* pass fewer") as info:
        images_from_comfy(np.zeros((9, 2, 2, 3), np.float32))
    assert (info.value.value, info.value.limit) == (9, 8)
    assert len(images_from_comfy(np.zeros((2, 1, 1, 3)), limits=ImageLimits(max_images=2))) == 2


def test_wrong_dtype_and_list_of_tensors() -> None:
    with pytest.raises(ImageInputError, match=r"dtype int64"):
        images_from_comfy(np.zeros((1, 2, 2, 3), np.int64))
    with pytest.raises(ImageInputError, match=r"not a list"):
        images_from_comfy([np.zeros((1, 2, 2, 3)), np.zeros((1, 2, 2, 3))])


def test_progress_counts_images() -> None:
    seen = []
    images_from_comfy(np.zeros((3, 1, 1, 3)), progress=lambda *event: seen.append(event))
    assert seen == [("Preparing images", k, 3) for k in (1, 2, 3)]


@settings(max_examples=50, deadline=None)
@given(
    hnp.arrays(
        np.float32,
        hnp.array_shapes(min_dims=4, max_dims=4, min_side=1, max_side=4).map(
            lambda shape: (*shape[:3], 3)
        ),
        elements=st.floats(-0.5, 1.5, width=32),
    )
)
def test_conversion_is_clip_then_round(batch: np.ndarray) -> None:
    images = images_from_comfy(batch, limits=ImageLimits(max_images=4))
    expected = np.floor(np.clip(batch, 0, 1) * 255 + 0.5).astype(np.uint8)
    for image, pixels in zip(images, expected, strict=True):
        assert np.array_equal(np.asarray(image), pixels)
