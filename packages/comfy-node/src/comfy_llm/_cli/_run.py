"""``comfy-llm run``: answer a prompt through the node's own path.

Same pipeline as the node (:mod:`comfy_llm._pipeline`); progress and the
text generated so far go to stderr, the answer (or JSON) to stdout.
"""

from __future__ import annotations

import argparse
import sys

from comfy_llm_core import defaults

from comfy_llm._cli._args import (
    AddCommon,
    Subcommands,
    add_input_flags,
    check_paths,
    default_model,
    input_values,
    read_schema_file,
)
from comfy_llm._cli._console import ConsoleProgress
from comfy_llm._json import JsonRecord
from comfy_llm._notes import CLI_WORDS, worded

__all__ = ["add_run_parser", "cmd_run"]


def add_run_parser(sub: Subcommands, add_common: AddCommon) -> None:
    """Register the ``run`` subcommand on the CLI's subparsers."""
    run = sub.add_parser("run", help="answer a prompt with a model (the node's path)")
    run.add_argument(
        "--model",
        help="owner/model[@revision], a curated id or a checkpoint folder path (default: the "
        "curated list's model for the target: qwen3.5-2b-mlx-4bit on Apple Silicon, "
        "smolvlm2-2.2b-instruct on Modal, smolvlm-256m-instruct elsewhere)",
    )
    run.add_argument("--prompt", required=True, help="the user prompt")
    run.add_argument("--system", help="a system prompt")
    add_input_flags(run)
    run.add_argument(
        "--video-frames",
        type=int,
        default=defaults.VIDEO_FRAMES,
        help="frames sampled from --video",
    )
    run.add_argument("--max-new-tokens", type=int, default=defaults.MAX_NEW_TOKENS)
    run.add_argument("--no-reasoning", action="store_true", help="disable the reasoning channel")
    run.add_argument("--temperature", type=float, default=defaults.TEMPERATURE)
    run.add_argument("--top-p", type=float, default=defaults.TOP_P)
    run.add_argument(
        "--seed",
        type=int,
        help=f"sampling seed, 0 to {defaults.SEED_MAX}; leave it out for an unseeded (random) "
        "run (-1 is not a seed)",
    )
    run.add_argument("--schema", help="a JSON Schema file the answer must satisfy (JSON output)")
    add_common(run)


def cmd_run(args: argparse.Namespace) -> JsonRecord:
    """Run one request and return ``{"response", "reasoning", "metadata"}``.

    Raises:
        GenerationSettingsError: A generation setting (``--seed`` included) is out
            of range; checked before anything is resolved or loaded.
        InputError: An input path is not a readable regular file, or an input
            was refused.
    """
    check_paths(args)
    inputs = input_values(args)  # a bad image fails before the heavy imports
    from comfy_llm_residency.backend import GenerationSettings

    from comfy_llm._pipeline import LLMRequest, run_request

    settings = GenerationSettings(
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.seed,
        enable_reasoning=not args.no_reasoning,
        response_schema=read_schema_file(args.schema),
    )
    request = LLMRequest(
        model=args.model or default_model(args.target),
        prompt=args.prompt,
        system_prompt=args.system,
        inputs={**inputs, "video_frames": args.video_frames},
        settings=settings,
        target=args.target,
        storage_root=args.storage_root,
    )
    console = ConsoleProgress()
    try:
        result = run_request(request, progress=console)
    finally:
        console.close()
    metadata, message = worded(result.metadata, CLI_WORDS)
    if message is not None:  # exit 0: the request worked; say why the answer is empty
        print(f"comfy-llm: note: {message}", file=sys.stderr)
    return {
        "response": result.response,
        "reasoning": result.reasoning,
        "metadata": metadata.to_dict(),  # the record's one serialization for the CLI
    }
