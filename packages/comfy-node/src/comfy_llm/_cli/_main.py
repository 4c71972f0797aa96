"""The ``comfy-llm`` command line.

Subcommands share the node's code path: ``models`` lists what is available
here, ``resolve`` inspects and pins a model
without downloading weights, ``stage`` downloads its snapshot, ``run`` answers
a prompt, ``comfyui-link`` makes ComfyUI load the installed node,
``modal-bench`` runs the Modal cold-cycle benchmark (modal-remote's harness),
``modal status|stop`` shows or stops this installation's Modal app. ``--json``
prints one JSON document on stdout; progress always goes to stderr; failures
print exactly one line, ``comfy-llm: error: <message>`` (rendered by
``comfy_llm_core.render_error``: tokens scrubbed), and exit with a code that
says what to do (see ``EXIT_CODES_HELP``). Library logging (huggingface_hub's
retry messages, HTTP client chatter) stays off stderr unless ``--debug``,
which is accepted before or after the subcommand.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from comfy_llm_core import (
    DiskFullError,
    ErrorAction,
    configure_library_logging,
    redact,
    render_error,
)

from comfy_llm._cli._bench import add_modal_bench_parser, cmd_modal_bench, print_bench_summary
from comfy_llm._cli._caption import add_caption_parser, cmd_caption
from comfy_llm._cli._console import ConsoleProgress
from comfy_llm._cli._link import link_into_comfyui
from comfy_llm._cli._modal import add_modal_parser, cmd_modal, print_modal
from comfy_llm._cli._models import add_models_parser, cmd_models, print_models
from comfy_llm._cli._run import add_run_parser, cmd_run
from comfy_llm._cli._version import version_lines
from comfy_llm._cli._wording import in_cli_words
from comfy_llm._json import JsonRecord
from comfy_llm._targets import detect_target

__all__ = ["EXIT_CODES", "main"]

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_DISK_FULL = 74  # sysexits.h EX_IOERR: no room to write; free space, then run again
EXIT_RETRY = 75  # sysexits.h EX_TEMPFAIL
EXIT_INTERRUPTED = 130

EXIT_CODES = {
    ErrorAction.FATAL: EXIT_FAILURE,
    ErrorAction.FIX_INPUT: EXIT_USAGE,
    ErrorAction.RETRY: EXIT_RETRY,
}
"""Exit code per :class:`~comfy_llm_core.ErrorAction` of the failure."""

EXIT_CODES_HELP = (
    "exit codes: 0 success; 1 failed (this setup cannot serve the request); "
    "2 fix the input (a bad argument, setting, token, model or file); "
    "74 the disk is full (free space there, then run again); "
    "75 temporary (network, Hub, a busy lease): try again; 130 interrupted"
)

_DEBUG_FLAG = "--debug"
_DEBUG_HELP = "show library logging and a traceback on failure (tokens scrubbed)"

_MODEL_HELP = (
    "owner/model[@revision], a curated profile id, or a checkpoint folder (an absolute "
    "path, or models/<folder>/<name> inside ComfyUI)"
)
_TARGET_HELP = "local_apple, local_cuda, local_cpu or modal (default: detected for this machine)"


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", help=_TARGET_HELP)
    parser.add_argument(
        "--storage-root",
        help="folder for snapshots and manifests (default: COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT, "
        "<ComfyUI models>/modal_llm inside ComfyUI, else a per-user cache folder)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    _add_debug(parser)


def _add_debug(parser: argparse.ArgumentParser) -> None:
    """``--debug`` after the subcommand; SUPPRESS keeps one given before it."""
    parser.add_argument(
        _DEBUG_FLAG, action="store_true", default=argparse.SUPPRESS, help=_DEBUG_HELP
    )


class _VersionAction(argparse.Action):
    """``--version``: every comfy-llm package's version, read only when asked (imports them)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(version_lines())
        parser.exit()


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="comfy-llm",
        description="Run multimodal language models the way the comfy-llm ComfyUI node does.",
        epilog=EXIT_CODES_HELP,
    )
    parser.add_argument(
        "--version",
        action=_VersionAction,
        help="print the version of comfy-llm and of each of its packages this Python has",
    )
    parser.add_argument(_DEBUG_FLAG, action="store_true", default=False, help=_DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    resolve = sub.add_parser("resolve", help="inspect and pin a model without downloading weights")
    resolve.add_argument("model", help=_MODEL_HELP)
    _add_common(resolve)

    stage = sub.add_parser("stage", help="resolve, then download the model snapshot")
    stage.add_argument("model", help=_MODEL_HELP)
    _add_common(stage)

    link = sub.add_parser("comfyui-link", help="make a ComfyUI folder load this installed node")
    link.add_argument("comfyui_dir", help="the ComfyUI folder (holding main.py)")
    link.add_argument("--force", action="store_true", help="replace a foreign comfy_llm_link")
    link.add_argument(
        "--python",
        help="the Python ComfyUI runs with (default: the ComfyUI folder's .venv or venv, "
        "else this interpreter); it must import comfy_llm",
    )
    link.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    _add_debug(link)

    add_models_parser(sub, _add_common)
    add_run_parser(sub, _add_common)
    add_caption_parser(sub, _add_common)
    add_modal_bench_parser(sub)
    add_modal_parser(sub, _add_common)
    return parser


def _profile_summary(resolved: Any) -> JsonRecord:
    profile = resolved.profile
    return {
        "id": profile.profile_id,
        "repository": profile.repository,
        "revision": profile.revision,
        "requested_revision": profile.requested_revision,
        "execution_target": profile.execution_target.value,
        "backend": profile.backend,
        "architecture": profile.architecture,
        "quantization_method": profile.quantization_method,
        "dtype": profile.dtype,
        "modalities": list(profile.modalities),
        "estimated_memory_bytes": profile.estimated_memory_bytes,
        "estimated_memory_gb": round(profile.estimated_memory_bytes / 1024**3, 3),
        "reasoning_parser": profile.reasoning_parser,
        "manifest_path": str(resolved.manifest_path),
    }


def _print_human(summary: JsonRecord) -> None:
    width = max(len(key) for key in summary)
    for key, value in summary.items():
        shown = ", ".join(value) if isinstance(value, list) else value
        print(f"{key.ljust(width)}  {shown}")


def _resolve(args: argparse.Namespace, progress: Callable[..., None]) -> Any:
    from comfy_llm_profiles import resolve_profile

    from comfy_llm._pipeline import gguf_fetcher, staged_gguf_lister
    from comfy_llm._storage import storage_root

    target = detect_target(args.target)
    root = storage_root(args.storage_root)
    fetch = gguf_fetcher(root, progress)  # a GGUF repository is decided from its files
    resolved = resolve_profile(
        args.model,
        target,
        storage_root=root,
        progress=progress,
        fetch_gguf=fetch,
        staged_gguf=staged_gguf_lister(root),
    )
    return resolved, root


def _cmd_resolve(args: argparse.Namespace) -> JsonRecord:
    console = ConsoleProgress()
    try:
        resolved, _root = _resolve(args, console)
    finally:
        console.close()
    return _profile_summary(resolved)


def _cmd_stage(args: argparse.Namespace) -> JsonRecord:
    from comfy_llm._pipeline import resolve_and_stage  # loads huggingface_hub
    from comfy_llm._storage import storage_root

    console = ConsoleProgress()
    try:
        target = detect_target(args.target)
        root = storage_root(args.storage_root)
        resolved, snapshot = resolve_and_stage(args.model, target, root, console)
    finally:
        console.close()
    summary = _profile_summary(resolved)
    summary.update(
        snapshot_path=str(snapshot.path),
        downloaded=snapshot.downloaded,
        bytes_downloaded=snapshot.bytes_downloaded,
        seconds=round(snapshot.seconds, 3),
    )
    return summary


def _cmd_link(args: argparse.Namespace) -> JsonRecord:
    init = link_into_comfyui(args.comfyui_dir, force=args.force, python=args.python)
    return {"shim": str(init), "restart": "restart ComfyUI to load the node"}


def _configure_logging(debug: bool) -> None:
    """Library chatter off stderr, or shown scrubbed with ``--debug``.

    Without ``--debug`` nothing heavy is imported for it (a bad argument still
    fails at once); with it huggingface_hub is loaded now (through staging) so
    its own stderr handler gets the token filter too.
    """
    if debug:
        import comfy_llm_staging  # noqa: F401  (loads huggingface_hub and its handler)
    configure_library_logging(debug)


def _exit_code(error: BaseException) -> int:
    if isinstance(error, DiskFullError):  # not an input to fix, and not fixed by waiting
        return EXIT_DISK_FULL
    action = getattr(error, "action", ErrorAction.FATAL)
    return EXIT_CODES.get(action, EXIT_FAILURE)


def _fail(error: BaseException, debug: bool) -> int:
    if debug:
        sys.stderr.write(redact("".join(traceback.format_exception(error))))
    print(f"comfy-llm: error: {in_cli_words(render_error(error))}", file=sys.stderr)
    return _exit_code(error)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code (see ``EXIT_CODES_HELP``)."""
    parser = _build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command == "modal-bench":
        args.options = rest  # the harness's own options, parsed by the subcommand
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    _configure_logging(args.debug)
    commands: dict[str, Callable[[argparse.Namespace], JsonRecord]] = {
        "resolve": _cmd_resolve,
        "stage": _cmd_stage,
        "comfyui-link": _cmd_link,
    }
    commands["models"] = cmd_models
    commands["run"] = cmd_run
    commands["caption"] = cmd_caption
    commands["modal-bench"] = cmd_modal_bench
    commands["modal"] = cmd_modal
    try:
        result = commands[args.command](args)
    except KeyboardInterrupt:
        print("comfy-llm: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:
        return _fail(error, args.debug)
    if args.json:
        print(json.dumps(result, sort_keys=True))
    elif args.command == "run":
        print(result["response"])
    elif args.command == "modal-bench":
        print_bench_summary(result)
    elif args.command == "models":
        print_models(result)
    elif args.command == "modal":
        print_modal(result)
    elif args.command == "caption":
        for record, caption in zip(
            result["metadata"]["per_image"], result["captions"], strict=True
        ):
            print(f"{record['name']}\t{caption}")
    else:
        _print_human(result)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
