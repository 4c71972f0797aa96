"""IMAGE, VIDEO and file preparation with bounds, engine-neutral.

Turns a ComfyUI node's inputs into :class:`PreparedInputs`, a system prompt
and a tuple of typed parts: RGB images, uniformly sampled and timestamped
video frames (file-backed videos are sampled by seeking, never decoded
whole), and the prompt with bounded UTF-8 text from text files and PDFs
assembled into it; each part has its own wire codec, and
:func:`chat_messages` turns the parts into the one conversation every engine
renders. Torch is never imported: tensors are duck-typed. Depends only on
numpy, pillow, av and pypdf.
"""

from __future__ import annotations

from ._chat import chat_messages, template_wrote_bos
from ._files import (
    EXTENSION_MIME_TYPES,
    PDF_MIME_TYPE,
    TEXT_MIME_TYPES,
    ExtractedFile,
    read_input_files,
)
from ._image_files import image_from_file, images_from_files
from ._images import images_from_comfy
from ._limits import ProgressCallback
from ._parts import PART_KINDS, ImagePart, Part, TextPart, VideoFramePart
from ._paths import path_problem
from ._prepare import prepare_inputs
from ._prepared import COUNT_KEYS, WIRE_VERSION, PreparedInputs
from ._prompt import assemble_prompt, file_section
from ._video import sample_video_frames
from ._video_source import FileSamplerStats
from .errors import FileInputError, ImageInputError, InputError, VideoInputError

__version__ = "0.1.0"

__all__ = [
    "COUNT_KEYS",
    "EXTENSION_MIME_TYPES",
    "PDF_MIME_TYPE",
    "TEXT_MIME_TYPES",
    "TextPart",
    "WIRE_VERSION",
    "ExtractedFile",
    "FileInputError",
    "FileSamplerStats",
    "ImageInputError",
    "ImagePart",
    "InputError",
    "PART_KINDS",
    "Part",
    "PreparedInputs",
    "ProgressCallback",
    "VideoFramePart",
    "VideoInputError",
    "assemble_prompt",
    "chat_messages",
    "file_section",
    "image_from_file",
    "images_from_comfy",
    "images_from_files",
    "path_problem",
    "prepare_inputs",
    "read_input_files",
    "sample_video_frames",
    "template_wrote_bos",
]
