"""``comfy-llm run``: answer a prompt through the node's own path.

Wired up by the local-slice issue; until then it explains itself.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

__all__ = ["add_run_parser", "cmd_run"]


def add_run_parser(sub: Any, add_common: Callable[[argparse.ArgumentParser], None]) -> None:
    """Register the ``run`` subcommand on the CLI's subparsers."""
    run = sub.add_parser("run", help="answer a prompt with a model (the node's path)")
    run.add_argument("--model", required=True, help="owner/model[@revision] or a curated id")
    run.add_argument("--prompt", required=True, help="the user prompt")
    run.add_argument("--system", help="a system prompt")
    run.add_argument("--image", action="append", default=[], help="an image file (repeatable)")
    run.add_argument("--video", help="a video file")
    run.add_argument("--video-frames", type=int, default=8, help="frames sampled from --video")
    run.add_argument("--file", action="append", default=[], help="a text or PDF file (repeatable)")
    run.add_argument("--max-new-tokens", type=int, default=512)
    run.add_argument("--no-reasoning", action="store_true", help="disable the reasoning channel")
    run.add_argument("--temperature", type=float, default=0.7)
    run.add_argument("--top-p", type=float, default=0.95)
    run.add_argument("--seed", type=int)
    add_common(run)


def cmd_run(args: argparse.Namespace) -> dict[str, Any]:
    """Run one request and return ``{"response", "reasoning", "metadata"}``."""
    raise NotImplementedError(
        "comfy-llm run is not wired up yet in this version; use `comfy-llm stage` to download."
    )
