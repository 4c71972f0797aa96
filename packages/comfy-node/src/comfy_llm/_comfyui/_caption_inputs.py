"""``CaptionInputs``: the ``ComfyLLMCaption`` node's inputs, one typed record for schema and run.

The shared widgets come in ``ModalLLM``'s order (``_inputs``), with the
caption defaults (a short budget, greedy decoding, no thinking), then the
caption-only ones; the LoRA-folder inputs (``_caption_conventions``,
``_caption_media``, ``_caption_cleanup``) came later and stay after every
older one. Saved workflows restore widget values by position, so a new
field only ever goes at the end.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from comfy_api.latest import io
from comfy_llm_core import defaults
from comfy_llm_residency.backend import GenerationSettings

from comfy_llm._caption_conventions import (
    CAPTION_EXTENSIONS,
    CAPTION_MODES,
    CSV_NAME,
    MANIFEST_NAME,
    CaptionConventions,
    checked_conventions,
)
from comfy_llm._caption_job import CaptionJob, ImageBatch
from comfy_llm._caption_media import MAX_CAPTION_IMAGES, split_patterns
from comfy_llm._caption_modal import ModalCaptionOptions
from comfy_llm._caption_presets import PROMPT_PRESETS, preset_prompt
from comfy_llm._comfyui._inputs import (
    DEFAULT_MODEL,
    SharedInputs,
    media_input,
    modal_workers_input,
    prompt_input,
    shared,
    supported,
    widget,
)
from comfy_llm._storage import comfy_input_dir

__all__ = ["CAPTION_MAX_NEW_TOKENS", "CAPTION_TEMPERATURE", "CaptionInputs", "input_folder"]

CAPTION_MAX_NEW_TOKENS = 128
CAPTION_TEMPERATURE = 0.0


def _text(name: str, default: str, /, *, tooltip: str, advanced: bool = False) -> io.Input:
    string = io.String.Input
    extra = supported(string, advanced=True) if advanced else {}
    return string(name, default=default, optional=True, tooltip=tooltip, **extra)


def _switch(name: str, default: bool, /, *, tooltip: str) -> io.Input:
    return io.Boolean.Input(name, default=default, optional=True, tooltip=tooltip)


def _choice(name: str, default: str, /, *, tooltip: str, among: str) -> io.Input:
    options = {"modes": CAPTION_MODES, "extensions": CAPTION_EXTENSIONS, "presets": PROMPT_PRESETS}
    return io.Combo.Input(
        name, options=list(options[among]), default=default, optional=True, tooltip=tooltip
    )


def _batch_size_input(name: str, default: int, /) -> io.Input:
    return io.Int.Input(
        name,
        default=default,
        min=1,
        max=defaults.MAX_CAPTION_BATCH_SIZE,
        optional=True,
        tooltip=(
            "Images the engine captions at once (vLLM always; Transformers and MLX-VLM "
            "with temperature 0). Captions are written as each batch ends."
        ),
        **supported(io.Int.Input, advanced=True),
    )


def _max_files_input(name: str, default: int, /) -> io.Input:
    return io.Int.Input(
        name,
        default=default,
        min=0,
        max=MAX_CAPTION_IMAGES,
        optional=True,
        tooltip="Caption at most this many of the folder's files, in sorted order "
        "(0: every file); to try settings on a few first.",
    )


_CLEANUP_SWITCHES = {
    "think": "clean_think_tags",
    "whitespace": "clean_whitespace",
    "quotes": "clean_quotes",
    "repetition": "clean_repetition",
}
"""Each ``_caption_cleanup`` rule's switch (on by default; counted in metadata_json)."""


@dataclasses.dataclass(frozen=True)
class CaptionInputs(SharedInputs):
    """One ``ComfyLLMCaption`` execution's inputs, in the node's widget order.

    ``images`` is ComfyUI's IMAGE batch, sliced one image per item and handed
    to ``comfy_llm_inputs`` unread.
    """

    prompt: str = widget(
        "Describe this image in one detailed sentence, as a caption for training.",
        prompt_input,
        tooltip="The instruction given with every image.",
        placeholder="How to caption each image…",
    )
    model_profile: str = shared(DEFAULT_MODEL)
    # widget() is a dataclasses.field (its default is None), not a shared mutable default
    images: ImageBatch | None = widget(  # noqa: RUF009
        None, media_input(io.Image.Input, "An IMAGE batch to caption.")
    )
    folder: str = widget(
        "",
        _text,
        tooltip="A folder of images (png, jpg, webp, ...) and videos to caption, sorted "
        "by name: a full path, or a folder name inside ComfyUI's input folder.",
    )
    system_prompt: str = shared("")
    max_new_tokens: int = shared(CAPTION_MAX_NEW_TOKENS)
    enable_reasoning: bool = shared(False)
    temperature: float = shared(CAPTION_TEMPERATURE)
    top_p: float = shared(defaults.TOP_P)
    seed: int = shared(0, tooltip="Sampling seed, the same for every image.")
    keep_model_loaded: bool = shared(True)
    response_schema: str = shared(
        "",
        tooltip="A JSON Schema every caption must satisfy (constrained decoding); an image "
        "whose answer still fails after one retry counts as failed, with the reason.",
    )
    caption_prefix: str = widget(
        "",
        _text,
        tooltip="Text put before every caption, e.g. a LoRA trigger word; one separator "
        "joins it (a trailing comma is not doubled). {name}, {folder} and "
        "[trigger] are filled in.",
    )
    write_caption_files: bool = widget(
        True,
        _switch,
        tooltip="Write a caption file next to each image or video from the folder "
        "(atomically), <name> plus caption_extension.",
    )
    skip_existing: bool = widget(
        True,
        _switch,
        tooltip="Keep captions already on disk and do not caption those images "
        "(caption_mode other than skip_existing decides instead).",
    )
    overwrite_captions: bool = widget(
        False,
        _switch,
        tooltip="Replace existing caption files (only with skip_existing off; "
        "caption_mode other than skip_existing decides instead).",
    )
    batch_size: int = widget(defaults.CAPTION_BATCH_SIZE, _batch_size_input)
    # New inputs go last: saved workflows keep their widget order.
    run_on_modal: bool = shared(False)
    modal_gpu: str = shared(defaults.DEFAULT_GPU)
    modal_workers: int = widget(1, modal_workers_input)
    custom_model: str = shared("")
    # The LoRA captioner's options (``_caption_conventions``), after every older input.
    caption_suffix: str = widget(
        "",
        _text,
        tooltip="Text put after every caption; {name}, {folder} and [trigger] are filled in.",
    )
    trigger_word: str = widget(
        "",
        _text,
        tooltip="Replaces [trigger] in the prefix and suffix. Empty: [trigger] stays in "
        "the files for ai-toolkit, which fills in its own trigger_word.",
    )
    caption_mode: str = widget(
        "skip_existing",
        _choice,
        among="modes",
        tooltip="An image that already has a caption file: skip_existing keeps it and "
        "does not caption the image; overwrite replaces it; append / prepend add the new "
        "caption after / before it.",
    )
    caption_extension: str = widget(
        ".txt",
        _choice,
        among="extensions",
        tooltip=".txt (kohya, ai-toolkit, ComfyUI's own loader), .caption, or .json "
        "(a sidecar with the caption and the model).",
    )
    write_manifest: bool = widget(
        False,
        _switch,
        tooltip=f"Also write {MANIFEST_NAME} into the folder: one line per file, "
        '{"image_path": ..., "caption": ...} as musubi-tuner reads it.',
    )
    subfolders: bool = widget(
        False, _switch, tooltip="Caption the images and videos in the folder's subfolders too."
    )
    caption_separator: str = widget(
        ", ",
        _text,
        advanced=True,
        tooltip="What joins prefix, caption and suffix (never doubled).",
    )
    clean_think_tags: bool = widget(
        True, _switch, tooltip="Drop <think>…</think> blocks and stray think tags."
    )
    clean_whitespace: bool = widget(
        True,
        _switch,
        tooltip="Put the caption on one line: newlines and runs of spaces become one space.",
    )
    clean_quotes: bool = widget(True, _switch, tooltip="Drop quotes around the whole caption.")
    clean_repetition: bool = widget(
        True,
        _switch,
        tooltip="Cut a phrase the model repeats 3+ times in a row to one (a looping small model).",
    )
    include_patterns: str = widget(
        "",
        _text,
        tooltip="Caption only the folder's files matching these globs, comma-separated: "
        "*.png matches the file name, sub/* (with a /) the path below the folder.",
    )
    exclude_patterns: str = widget(
        "",
        _text,
        tooltip="Leave out the folder's files matching these globs (as include_patterns).",
    )
    max_files: int = widget(0, _max_files_input)
    write_csv: bool = widget(
        False,
        _switch,
        tooltip=f"Also write {CSV_NAME} into the folder: columns image_path, caption.",
    )
    prompt_preset: str = widget(
        "custom",
        _choice,
        among="presets",
        tooltip="custom: the prompt above. prose_short / prose_detailed: a sentence or a "
        "paragraph (Flux, SD3, video models); booru_tags: comma-separated tags (SDXL "
        "anime models). A preset replaces the prompt.",
    )

    def conventions(self) -> CaptionConventions:
        """The convention inputs as ``CaptionConventions`` (checked where they enter)."""
        mode = self.caption_mode
        off = [rule for rule, name in _CLEANUP_SWITCHES.items() if not getattr(self, name)]
        return checked_conventions(
            prefix=("caption_prefix", self.caption_prefix),
            suffix=("caption_suffix", self.caption_suffix),
            disabled_cleanup=off,
            separator=self.caption_separator,
            trigger_word=self.trigger_word,
            # skip_existing defers to the older switches (both at their defaults: the same)
            mode=None if mode == "skip_existing" else mode,
            extension=self.caption_extension,
            manifest=self.write_manifest,
            subfolders=self.subfolders,
            include=split_patterns(self.include_patterns),
            exclude=split_patterns(self.exclude_patterns),
            limit=self.max_files,
            csv=self.write_csv,
        )

    def job(
        self, settings: GenerationSettings, conventions: CaptionConventions, root: Path
    ) -> CaptionJob:
        """What every image of the batch shares.

        Raises:
            InvalidSettingError: An unknown ``prompt_preset``, or ``batch_size`` out of range.
        """
        return CaptionJob(
            model=self.model(),
            prompt=preset_prompt(self.prompt_preset, self.prompt),
            system_prompt=self.system_prompt or None,
            settings=settings,
            prefix=self.caption_prefix,
            write_files=self.write_caption_files,
            skip_existing=self.skip_existing,
            overwrite=self.overwrite_captions,
            storage_root=root,
            keep_loaded=self.keep_model_loaded,
            batch_size=self.batch_size,
            conventions=conventions,
        )

    def modal_options(self) -> ModalCaptionOptions:
        """The Modal GPU type and width of a ``run_on_modal`` batch."""
        return ModalCaptionOptions(gpu=self.modal_gpu, workers=self.modal_workers)


def input_folder(folder: str) -> str:
    """A relative folder names one inside ComfyUI's input folder when that one exists.

    As ComfyUI's own dataset loaders take a folder of ``input/``; a shipped
    template names its sample folder that way. Otherwise the value is used
    as given.
    """
    if not folder or Path(folder).expanduser().is_absolute():
        return folder
    base = comfy_input_dir()
    if base is not None and (base / folder).is_dir():
        return str(base / folder)
    return folder
