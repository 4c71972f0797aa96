"""``LLMRequest``: one request as the node or the CLI received it, before any model work.

The pipeline (``_pipeline``) serves it here or hands it to Modal
(``_remote``); both read it, neither builds it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from comfy_llm_core import defaults
from comfy_llm_residency.backend import GenerationSettings

__all__ = ["LLMRequest"]


@dataclasses.dataclass(frozen=True)
class LLMRequest:
    """Everything one request needs, as the node or the CLI received it.

    Attributes:
        model: ``owner/model[@revision]``, a curated profile id, an absolute
            checkpoint folder or ``models/<folder>/<name>``.
        prompt: The user prompt.
        system_prompt: Optional system prompt ("" counts as none).
        images: ComfyUI IMAGE tensor/array, or image file paths (CLI).
        video: A ComfyUI VIDEO object or a video file path.
        video_frames: How many frames to sample from ``video``.
        files: OPENAI_INPUT_FILES value or file paths.
        settings: Generation settings.
        target: Explicit execution target name, else detected.
        run_on_modal: The node's Modal toggle.
        modal_gpu: The Modal GPU type the RemoteEngine runs on.
        storage_root: Explicit storage root, else the default.
        reserve_gb: Memory to keep free beyond the model (None: the default).
        keep_loaded: Keep the model resident after the request.
    """

    model: str
    prompt: str
    system_prompt: str | None = None
    images: object = None
    video: object = None
    video_frames: int = defaults.VIDEO_FRAMES
    files: object = None
    settings: GenerationSettings = dataclasses.field(default_factory=GenerationSettings)
    target: str | None = None
    run_on_modal: bool = False
    modal_gpu: str = defaults.DEFAULT_GPU
    storage_root: str | Path | None = None
    reserve_gb: float | None = None
    keep_loaded: bool = True
