"""``comfy-llm modal-bench``: the Modal cold-cycle benchmark (billable).

The options, the run and the report are modal-remote's harness
(``comfy_llm_modal_remote.bench``); this only registers the subcommand and
shows the summary. Without the ``modal`` extra the subcommand still exists
and says what to install.
"""

from __future__ import annotations

import argparse
from typing import Any

from comfy_llm_core import ExecutionTarget, install_command

from comfy_llm._cli._args import Subcommands
from comfy_llm._cli._console import ConsoleProgress
from comfy_llm._json import JsonRecord
from comfy_llm.errors import TargetUnavailableError

__all__ = ["add_modal_bench_parser", "cmd_modal_bench", "print_bench_summary"]

_HELP = "benchmark cold and warm Modal requests on an isolated app (billable; JSON report)"


def _harness() -> Any:
    """``comfy_llm_modal_remote.bench``, or None without the Modal extra."""
    try:
        from comfy_llm_modal_remote import bench
    except ModuleNotFoundError as error:
        if error.name != "comfy_llm_modal_remote":
            raise
        return None
    return bench


def add_modal_bench_parser(sub: Subcommands) -> None:
    """Register ``modal-bench`` on the CLI's subparsers.

    Its options belong to the harness and are parsed by :func:`cmd_modal_bench`
    (``modal-bench --help`` shows them): building them here would import
    modal-remote, and with it the engines' plumbing, for every command.
    """
    sub.add_parser("modal-bench", help=_HELP, add_help=False)


def _bench_parser(harness: Any) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="comfy-llm modal-bench", description=_HELP)
    harness.add_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the whole report on stdout")
    parser.add_argument(
        "--debug", action="store_true", help="show library logging and a traceback on failure"
    )
    return parser


def cmd_modal_bench(args: argparse.Namespace) -> JsonRecord:
    """Parse ``args.options`` with the harness's options, run it, return the report.

    The report is also written to ``--output``; ``args.json`` and
    ``args.debug`` take the parsed flags.

    Raises:
        TargetUnavailableError: The ``modal`` extra is not installed.
        ModalUnavailableError: ``modal`` or its credentials are missing.
    """
    harness = _harness()
    if harness is None:
        raise TargetUnavailableError(
            ExecutionTarget.MODAL.value,
            f"the Modal extra is not installed: `{install_command('modal')}`, run "
            "`modal token new` once, then run modal-bench again",
        )
    options = _bench_parser(harness).parse_args(args.options)
    args.json = options.json
    args.debug = args.debug or options.debug

    console = ConsoleProgress()
    try:
        report: JsonRecord = harness.run_from_args(options, progress=console)
    finally:
        console.close()
    return report


def print_bench_summary(report: JsonRecord) -> None:
    """One line per measured state, then where the report went."""
    for state, figures in report["summary"].items():
        shown = ", ".join(f"{k.removeprefix('median_')} {v}" for k, v in figures.items())
        print(f"{state}: {shown}")
    print(f"report: {report['output']}")
