"""``LLMRequest``: one request as the node or the CLI received it, before any model work.

The pipeline (``_pipeline``) serves it here or hands it to Modal
(``_remote``); both read it, neither builds it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

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
        inputs: The request's inputs beside the prompt, unread, by
            ``comfy_llm_inputs.prepare_inputs`` keyword: ``images`` (ComfyUI
            IMAGE, or image file paths), ``video`` (VIDEO or a file path),
            ``video_frames``, ``files`` (OPENAI_INPUT_FILES or paths). Data,
            not fields: a new kind of input passes through here untouched.
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
    inputs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    settings: GenerationSettings = dataclasses.field(default_factory=GenerationSettings)
    target: str | None = None
    run_on_modal: bool = False
    modal_gpu: str = defaults.DEFAULT_GPU
    storage_root: str | Path | None = None
    reserve_gb: float | None = None
    keep_loaded: bool = True

    def __post_init__(self) -> None:
        """Hold ``inputs`` read-only, its absent values (None) left out."""
        present = {name: value for name, value in self.inputs.items() if value is not None}
        object.__setattr__(self, "inputs", MappingProxyType(present))
