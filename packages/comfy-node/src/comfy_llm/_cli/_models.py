"""``comfy-llm models``: what can be picked here, with size and target compatibility."""

from __future__ import annotations

import argparse

from comfy_llm._cli._args import AddCommon, Subcommands
from comfy_llm._json import JsonRecord
from comfy_llm._targets import detect_target

__all__ = ["add_models_parser", "cmd_models", "print_models"]

_GIB = 1024**3


def add_models_parser(sub: Subcommands, add_common: AddCommon) -> argparse.ArgumentParser:
    """Register ``models`` on the CLI's subparsers."""
    parser = sub.add_parser(
        "models",
        help="list curated, staged, local-folder and Hugging Face cache models with size and "
        "whether the target accepts them (no download, no Hub request)",
    )
    add_common(parser)
    return parser


def cmd_models(args: argparse.Namespace) -> JsonRecord:
    """List the models; compatibility is judged for ``--target`` (else the detected one)."""
    from comfy_llm._catalogue import list_models
    from comfy_llm._storage import storage_root

    target = detect_target(args.target)
    root = storage_root(args.storage_root)
    models = [choice.to_dict() for choice in list_models(root, target)]
    return {"target": target.value, "storage_root": str(root), "models": models}


def print_models(result: JsonRecord) -> None:
    """One line per model: source, reference, size, compatible with the target, why."""
    print(f"target {result['target']}")
    for model in result["models"]:
        size = model["size_bytes"]
        shown = f"{size / _GIB:.2f} GiB" if size is not None else "-"
        ok = {True: "yes", False: "no", None: "?"}[model["compatible"]]
        print(f"{model['source']:<8}  {model['reference']}  {shown}  {ok}  {model['reason']}")
