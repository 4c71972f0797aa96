"""The caption node's LoRA-folder inputs, appended after every older one, and their reading.

Split from ``_caption_node`` by meaning: what a trainer's folder wants
(``_caption_conventions``, ``_caption_media``, ``_caption_cleanup``) as
widgets, and the ``CaptionConventions`` they make. Saved workflows restore
widget values by position, so a new input only ever goes at the end.
"""

from __future__ import annotations

from typing import Any

from comfy_api.latest import io

from comfy_llm._caption_conventions import (
    CAPTION_EXTENSIONS,
    CAPTION_MODES,
    CSV_NAME,
    MANIFEST_NAME,
)
from comfy_llm._caption_media import MAX_CAPTION_IMAGES
from comfy_llm._caption_presets import PROMPT_PRESETS
from comfy_llm._comfyui._inputs import supported

__all__ = ["convention_inputs", "conventions_from"]


def convention_inputs() -> list[Any]:
    """The LoRA captioner's options (``_caption_conventions``), after every older input."""
    boolean, string, combo = io.Boolean.Input, io.String.Input, io.Combo.Input
    return [
        string(
            "caption_suffix",
            default="",
            optional=True,
            tooltip="Text put after every caption; {name}, {folder} and [trigger] are filled in.",
        ),
        string(
            "trigger_word",
            default="",
            optional=True,
            tooltip="Replaces [trigger] in the prefix and suffix. Empty: [trigger] stays in "
            "the files for ai-toolkit, which fills in its own trigger_word.",
        ),
        combo(
            "caption_mode",
            options=list(CAPTION_MODES),
            default="skip_existing",
            optional=True,
            tooltip="An image that already has a caption file: skip_existing keeps it and "
            "does not caption the image; overwrite replaces it; append / prepend add the new "
            "caption after / before it.",
        ),
        combo(
            "caption_extension",
            options=list(CAPTION_EXTENSIONS),
            default=".txt",
            optional=True,
            tooltip=".txt (kohya, ai-toolkit, ComfyUI's own loader), .caption, or .json "
            "(a sidecar with the caption and the model).",
        ),
        boolean(
            "write_manifest",
            default=False,
            optional=True,
            tooltip=f"Also write {MANIFEST_NAME} into the folder: one line per file, "
            '{"image_path": ..., "caption": ...} as musubi-tuner reads it.',
        ),
        boolean(
            "subfolders",
            default=False,
            optional=True,
            tooltip="Caption the images and videos in the folder's subfolders too.",
        ),
        string(
            "caption_separator",
            default=", ",
            optional=True,
            tooltip="What joins prefix, caption and suffix (never doubled).",
            **supported(io.String.Input, advanced=True),
        ),
        *(
            boolean(name, default=True, optional=True, tooltip=tip)
            for name, tip in _CLEANUP_SWITCHES.values()
        ),
        string(
            "include_patterns",
            default="",
            optional=True,
            tooltip="Caption only the folder's files matching these globs, comma-separated: "
            "*.png matches the file name, sub/* (with a /) the path below the folder.",
        ),
        string(
            "exclude_patterns",
            default="",
            optional=True,
            tooltip="Leave out the folder's files matching these globs (as include_patterns).",
        ),
        io.Int.Input(
            "max_files",
            default=0,
            min=0,
            max=MAX_CAPTION_IMAGES,
            optional=True,
            tooltip="Caption at most this many of the folder's files, in sorted order "
            "(0: every file); to try settings on a few first.",
        ),
        boolean(
            "write_csv",
            default=False,
            optional=True,
            tooltip=f"Also write {CSV_NAME} into the folder: columns image_path, caption.",
        ),
        combo(
            "prompt_preset",
            options=list(PROMPT_PRESETS),
            default="custom",
            optional=True,
            tooltip="custom: the prompt above. prose_short / prose_detailed: a sentence or a "
            "paragraph (Flux, SD3, video models); booru_tags: comma-separated tags (SDXL "
            "anime models). A preset replaces the prompt.",
        ),
    ]


_CLEANUP_SWITCHES = {
    "think": ("clean_think_tags", "Drop <think>…</think> blocks and stray think tags."),
    "whitespace": (
        "clean_whitespace",
        "Put the caption on one line: newlines and runs of spaces become one space.",
    ),
    "quotes": ("clean_quotes", "Drop quotes around the whole caption."),
    "repetition": (
        "clean_repetition",
        "Cut a phrase the model repeats 3+ times in a row to one (a looping small model).",
    ),
}
"""Each ``_caption_cleanup`` rule's switch (on by default; counted in metadata_json)."""


def conventions_from(optional: dict[str, Any]) -> Any:
    """The node's convention inputs as ``CaptionConventions`` (checked where they enter)."""
    from comfy_llm._caption_conventions import CaptionConventions, check_template
    from comfy_llm._caption_media import split_patterns

    for field in ("caption_prefix", "caption_suffix"):
        check_template(field, optional.get(field, ""))
    mode = optional.get("caption_mode", "skip_existing")
    return CaptionConventions(
        suffix=optional.get("caption_suffix", ""),
        separator=optional.get("caption_separator", ", "),
        trigger_word=optional.get("trigger_word", ""),
        # skip_existing defers to the older switches (both at their defaults: the same)
        mode=None if mode == "skip_existing" else mode,
        extension=optional.get("caption_extension", ".txt"),
        manifest=optional.get("write_manifest", False),
        subfolders=optional.get("subfolders", False),
        include=split_patterns(optional.get("include_patterns", "")),
        exclude=split_patterns(optional.get("exclude_patterns", "")),
        limit=optional.get("max_files", 0),
        csv=optional.get("write_csv", False),
        cleanup=tuple(
            rule for rule, (name, _) in _CLEANUP_SWITCHES.items() if optional.get(name, True)
        ),
    )
