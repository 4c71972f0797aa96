"""``comfy-llm caption FOLDER``: caption a folder of images (the caption node's path)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from comfy_llm_core import defaults, install_command

from comfy_llm._cli._args import default_model, read_schema_file

__all__ = ["add_caption_parser", "cmd_caption"]


def add_caption_parser(sub: Any, add_common: Callable[[argparse.ArgumentParser], None]) -> None:
    """Register the ``caption`` subcommand on the CLI's subparsers."""
    caption = sub.add_parser("caption", help="caption every image in a folder (LoRA datasets)")
    caption.add_argument("folder", help="a folder of images (png, jpg, webp, ...)")
    caption.add_argument(
        "--model", help="owner/model[@revision], a curated id or a checkpoint folder path"
    )
    caption.add_argument(
        "--prompt",
        default="Describe this image in one detailed sentence, as a caption for training.",
        help="the instruction given with every image",
    )
    caption.add_argument("--system", help="a system prompt")
    caption.add_argument(
        "--prefix", default="", help="text put before every caption (trigger word)"
    )
    caption.add_argument("--write", action="store_true", help="write <name>.txt next to each image")
    caption.add_argument(
        "--redo", action="store_true", help="caption images that already have a caption file"
    )
    caption.add_argument("--overwrite", action="store_true", help="replace existing caption files")
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
    caption.add_argument("--gpu", default="L40S", help="Modal GPU type with --on-modal (H100, ...)")
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


def cmd_caption(args: argparse.Namespace) -> dict[str, Any]:
    """Caption the folder; returns ``{"captions": [...], "metadata": {...}}``."""
    from comfy_llm_residency.backend import GenerationSettings

    from comfy_llm._caption import CaptionJob, caption_items, run_captions
    from comfy_llm._cli._console import ConsoleProgress

    settings = GenerationSettings(
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        seed=args.seed,
        enable_reasoning=args.reasoning,
        response_schema=read_schema_file(args.schema),
    )
    items = caption_items(folder=args.folder)
    job = CaptionJob(
        model=args.model or default_model("modal" if args.on_modal else args.target),
        prompt=args.prompt,
        system_prompt=args.system,
        settings=settings,
        prefix=args.prefix,
        write_files=args.write,
        skip_existing=not args.redo,
        overwrite=args.overwrite,
        target=args.target,
        storage_root=args.storage_root,
        batch_size=args.batch_size,
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
    return {"captions": batch.captions, "metadata": batch.metadata}
