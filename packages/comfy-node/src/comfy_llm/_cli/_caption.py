"""``comfy-llm caption FOLDER``: caption a folder of images (the caption node's path)."""

from __future__ import annotations

import argparse
import sys

from comfy_llm_core import defaults, install_command

from comfy_llm._caption_cleanup import CLEANUP_RULES
from comfy_llm._caption_clip import check_clip_folder, clip_warnings
from comfy_llm._caption_conventions import (
    CAPTION_MODES,
    CSV_NAME,
    MANIFEST_NAME,
    checked_conventions,
    write_batch_manifest,
)
from comfy_llm._caption_presets import PROMPT_PRESETS, preset_prompt
from comfy_llm._cli._args import AddCommon, Subcommands, default_model, read_schema_file
from comfy_llm._cli._console import ConsoleProgress
from comfy_llm._cli._wording import in_cli_words
from comfy_llm._json import JsonRecord

__all__ = ["add_caption_parser", "cmd_caption"]

_CLEANUP_HELP = {
    "think": "<think> blocks and tags",
    "whitespace": "newlines and runs of spaces",
    "quotes": "quotes around the caption",
    "repetition": "phrases repeated 3+ times in a row",
}


def add_caption_parser(sub: Subcommands, add_common: AddCommon) -> None:
    """Register the ``caption`` subcommand on the CLI's subparsers."""
    caption = sub.add_parser("caption", help="caption every image in a folder (LoRA datasets)")
    caption.add_argument("folder", help="a folder of images (png, jpg, webp, ...) and videos")
    caption.add_argument(
        "--model", help="owner/model[@revision], a curated id or a checkpoint folder path"
    )
    caption.add_argument(
        "--prompt",
        default="Describe this image in one detailed sentence, as a caption for training.",
        help="the instruction given with every image",
    )
    caption.add_argument(
        "--preset",
        choices=list(PROMPT_PRESETS),
        default="custom",
        help="a ready-made instruction instead of --prompt: prose_short, prose_detailed, "
        "booru_tags (custom: --prompt)",
    )
    caption.add_argument("--system", help="a system prompt")
    caption.add_argument(
        "--prefix",
        default="",
        help="text put before every caption (trigger word); {name}, {folder}, [trigger] filled in",
    )
    caption.add_argument("--suffix", default="", help="text put after every caption")
    caption.add_argument(
        "--trigger-word",
        default="",
        help="replaces [trigger] in prefix/suffix (unset: [trigger] stays, for ai-toolkit)",
    )
    caption.add_argument(
        "--separator", default=", ", help="joins prefix, caption and suffix (never doubled)"
    )
    write = caption.add_mutually_exclusive_group()
    write.add_argument(
        "--write",
        action="store_true",
        default=True,
        help="write a caption file next to each image (the default)",
    )
    write.add_argument(
        "--no-write", dest="write", action="store_false", help="print captions, write no files"
    )
    caption.add_argument(
        "--mode",
        choices=CAPTION_MODES,
        default=None,
        help="an image with a caption file: skip_existing (default), overwrite, append, prepend",
    )
    caption.add_argument(
        "--redo", action="store_true", help="caption images that already have a caption file"
    )
    caption.add_argument("--overwrite", action="store_true", help="replace existing caption files")
    caption.add_argument(
        "--caption-extension",
        default=".txt",
        help="caption file extension: .txt (default), .caption, .json (sidecar with metadata)",
    )
    caption.add_argument(
        "--jsonl",
        action="store_true",
        help=f"also write {MANIFEST_NAME} (musubi-tuner's image_path/caption lines)",
    )
    caption.add_argument(
        "--csv", action="store_true", help=f"also write {CSV_NAME} (columns image_path, caption)"
    )
    caption.add_argument(
        "--recursive", action="store_true", help="caption the images and videos of subfolders too"
    )
    for rule in CLEANUP_RULES:
        caption.add_argument(
            f"--no-clean-{rule}",
            dest="cleanup",
            action="append_const",
            const=rule,
            help=f"keep the answer's {_CLEANUP_HELP[rule]} (cleaned by default)",
        )
    caption.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="GLOB",
        help="caption only files matching GLOB (*.png: the name; sub/*: the path below FOLDER)",
    )
    caption.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="leave out files matching GLOB",
    )
    caption.add_argument(
        "--limit", type=int, default=0, help="caption at most N files, in sorted order (0: all)"
    )
    caption.add_argument(
        "--clip-tokenizer",
        metavar="FOLDER",
        help="a CLIP tokenizer folder (ComfyUI/comfy/sd1_tokenizer) to warn about captions over "
        "CLIP's 75 tokens; inside ComfyUI's Python its own is found",
    )
    caption.add_argument("--max-new-tokens", type=int, default=128)
    caption.add_argument("--temperature", type=float, default=0.0)
    caption.add_argument("--seed", type=int, default=0)
    caption.add_argument("--reasoning", action="store_true", help="let the model think first")
    caption.add_argument("--schema", help="a JSON Schema file every caption must satisfy")
    caption.add_argument(
        "--batch-size",
        type=int,
        default=defaults.CAPTION_BATCH_SIZE,
        help="images the engine captions at once (files are written as each batch ends)",
    )
    caption.add_argument(
        "--on-modal",
        action="store_true",
        help=f"caption on Modal GPUs (needs `{install_command('modal')}` and `modal token new` "
        "once)",
    )
    caption.add_argument(
        "--gpu", default=defaults.DEFAULT_GPU, help="Modal GPU type with --on-modal (H100, ...)"
    )
    caption.add_argument(
        "--workers", type=int, default=1, help="GPU containers at once with --on-modal"
    )
    caption.add_argument(
        "--chunk-images",
        type=int,
        default=None,
        help="images per Modal call (default: tens of seconds of engine work)",
    )
    add_common(caption)


def cmd_caption(args: argparse.Namespace) -> JsonRecord:
    """Caption the folder; returns ``{"captions": [...], "metadata": {...}}``."""
    from comfy_llm_residency.backend import GenerationSettings

    from comfy_llm._caption import run_captions
    from comfy_llm._caption_job import CaptionJob, caption_items

    settings = GenerationSettings(
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        seed=args.seed,
        enable_reasoning=args.reasoning,
        response_schema=read_schema_file(args.schema),
    )
    if args.clip_tokenizer:  # a typo is refused before any image is captioned
        check_clip_folder(args.clip_tokenizer)
    conventions = checked_conventions(
        prefix=("--prefix", args.prefix),
        suffix=("--suffix", args.suffix),
        disabled_cleanup=args.cleanup or (),
        separator=args.separator,
        trigger_word=args.trigger_word,
        mode=args.mode,
        extension=args.caption_extension,
        manifest=args.jsonl,
        subfolders=args.recursive,
        include=tuple(args.include),
        exclude=tuple(args.exclude),
        limit=args.limit,
        csv=args.csv,
    )
    items = caption_items(folder=args.folder, conventions=conventions)
    job = CaptionJob(
        model=args.model or default_model("modal" if args.on_modal else args.target),
        prompt=preset_prompt(args.preset, args.prompt),
        system_prompt=args.system,
        settings=settings,
        prefix=args.prefix,
        write_files=args.write,
        skip_existing=not args.redo,
        overwrite=args.overwrite,
        target=args.target,
        storage_root=args.storage_root,
        batch_size=args.batch_size,
        conventions=conventions,
        clip_tokenizer=args.clip_tokenizer,
    )
    console = ConsoleProgress()
    try:
        if args.on_modal:
            from comfy_llm._caption_modal import ModalCaptionOptions, run_captions_on_modal

            options = ModalCaptionOptions(args.gpu, args.workers, args.chunk_images)
            batch = run_captions_on_modal(job, items, options, progress=console)
        else:
            batch = run_captions(job, items, progress=console)
    finally:
        console.close()
    write_batch_manifest(conventions, args.folder, items, batch.captions, batch.metadata)
    for warning in clip_warnings(batch.metadata):  # stderr: --json's stdout stays one object
        print(f"comfy-llm: warning: {in_cli_words(warning)}", file=sys.stderr)
    return {"captions": batch.captions, "metadata": batch.metadata}
