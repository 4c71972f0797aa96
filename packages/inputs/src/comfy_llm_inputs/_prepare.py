"""One entry point: node inputs to :class:`PreparedInputs`."""

from __future__ import annotations

import os
from typing import Any

from comfy_llm_core import MediaLimits, defaults

from ._files import read_input_files
from ._image_files import images_from_files
from ._images import images_from_comfy
from ._limits import ProgressCallback
from ._parts import ImagePart
from ._prepared import PreparedInputs
from ._prompt import assemble_prompt
from ._video import check_frame_count, sample_video_frames
from .errors import InputError


def _has_files(files: Any) -> bool:
    if files is None:
        return False
    try:
        return len(files) > 0
    except TypeError:
        return True


def _image_paths(images: Any) -> list[Any] | None:
    """The image file paths when ``images`` is a path or a list of paths, else None."""
    if isinstance(images, (str, os.PathLike)):
        return [images]
    if (
        isinstance(images, (list, tuple))
        and images
        and all(isinstance(item, (str, os.PathLike)) for item in images)
    ):
        return list(images)
    return None


def prepare_inputs(
    prompt: str,
    *,
    system_prompt: str | None = None,
    images: Any = None,
    video: Any = None,
    video_frames: int = defaults.VIDEO_FRAMES,
    files: Any = None,
    limits: MediaLimits | None = None,
    progress: ProgressCallback | None = None,
) -> PreparedInputs:
    """Validate and convert every input of one request.

    Cheap checks run first (empty request, mixed image and video, the frame
    count), then images, files and finally the video, so a bad file is
    reported before any video is decoded.

    Args:
        prompt: The user prompt (may be empty when media or files are given).
        system_prompt: Optional system prompt; blank counts as none.
        images: ComfyUI IMAGE (``[B, H, W, C]`` float tensor or array), or
            image file paths (read by :func:`images_from_files`).
        video: ComfyUI VIDEO, a components object, a path, bytes or stream.
        video_frames: Frames to sample from ``video``.
        files: ``OPENAI_INPUT_FILES`` value, mappings or paths.
        limits: Bounds per modality, normally the model profile's.
        progress: Optional ``progress(message, done, total)`` callback.

    Returns:
        The prepared inputs, with the prompt assembled.

    Raises:
        InputError: The request is empty, or mixes images and video where
            ``limits.video.allow_mixed_image_video`` is false, or the prompt is not
            a string.
        ImageInputError: The IMAGE input was refused.
        VideoInputError: The VIDEO input was refused or unreadable.
        FileInputError: A file was refused; the message names it.
    """
    limits = limits or MediaLimits()
    if not isinstance(prompt, str):
        raise InputError(f"prompt must be text, not {type(prompt).__name__}")
    if system_prompt is not None and not isinstance(system_prompt, str):
        raise InputError(f"system_prompt must be text, not {type(system_prompt).__name__}")
    if not prompt.strip() and images is None and video is None and not _has_files(files):
        raise InputError(
            "The request is empty: the prompt is blank and no image, video or file is "
            "connected; type a prompt or connect an input"
        )
    if images is not None and video is not None and not limits.video.allow_mixed_image_video:
        raise InputError(
            "This model takes images or a video in one request, not both; disconnect the "
            "IMAGE or the VIDEO input (or run them as separate requests)"
        )
    if video is not None:
        check_frame_count(video_frames, limits.video)
    paths = _image_paths(images)
    prepared_images = (
        images_from_files(paths, limits=limits.image, progress=progress)
        if paths is not None
        else images_from_comfy(images, limits=limits.image, progress=progress)
    )
    extracted = read_input_files(files, limits=limits.file, progress=progress)
    frames = (
        sample_video_frames(video, video_frames, limits=limits.video, progress=progress)
        if video is not None
        else ()
    )
    text = assemble_prompt(
        prompt,
        video_timestamps=[frame.timestamp_seconds for frame in frames],
        files=extracted,
    )
    return PreparedInputs.text(
        text,
        *(ImagePart(image) for image in prepared_images),
        *frames,
        system_prompt=system_prompt if system_prompt and system_prompt.strip() else None,
        file_names=tuple(file.name for file in extracted),
    )
