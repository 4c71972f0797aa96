"""IMAGE, VIDEO and file preparation with bounds, engine-neutral.

Turns a ComfyUI node's inputs into :class:`PreparedInputs`: RGB images,
uniformly sampled and timestamped video frames (file-backed videos are
sampled by seeking, never decoded whole), and bounded UTF-8 text from text
files and PDFs, assembled into one prompt. Torch is never imported: tensors
are duck-typed. Depends only on numpy, pillow, av and pypdf.
"""

from __future__ import annotations

from ._files import (
    EXTENSION_MIME_TYPES,
    PDF_MIME_TYPE,
    TEXT_MIME_TYPES,
    ExtractedFile,
    read_input_files,
)
from ._image_files import image_from_file, images_from_files
from ._images import images_from_comfy
from ._limits import InputLimits, ProgressCallback
from ._paths import path_problem
from ._prepare import prepare_inputs
from ._prepared import WIRE_VERSION, PreparedInputs
from ._prompt import assemble_prompt, file_section
from ._video import VideoFrame, sample_video_frames
from ._video_source import FileSamplerStats
from .errors import FileInputError, ImageInputError, InputError, VideoInputError

__version__ = "0.1.0"

__all__ = [
    "EXTENSION_MIME_TYPES",
    "PDF_MIME_TYPE",
    "TEXT_MIME_TYPES",
    "WIRE_VERSION",
    "ExtractedFile",
    "FileInputError",
    "FileSamplerStats",
    "ImageInputError",
    "InputError",
    "InputLimits",
    "PreparedInputs",
    "ProgressCallback",
    "VideoFrame",
    "VideoInputError",
    "assemble_prompt",
    "file_section",
    "image_from_file",
    "images_from_comfy",
    "images_from_files",
    "path_problem",
    "prepare_inputs",
    "read_input_files",
    "sample_video_frames",
]
