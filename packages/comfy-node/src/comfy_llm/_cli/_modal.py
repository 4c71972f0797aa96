"""``comfy-llm modal status`` / ``comfy-llm modal stop``: this installation's Modal app.

The app is ``comfy-llm-<id>`` (or ``COMFY_MODAL_APP_NAME``), the one the node
deploys; ``status`` says whether it is deployed and how many containers run
(warm GPUs bill until their idle window ends), ``stop`` ends them all at once
(the Volumes and their models stay; the next run deploys again).
"""

from __future__ import annotations

import argparse

from comfy_llm._cli._args import AddCommon, Subcommands
from comfy_llm._json import JsonRecord

__all__ = ["add_modal_parser", "cmd_modal", "print_modal"]

_HELP = "show or stop this installation's Modal app and its running (billed) containers"


def add_modal_parser(sub: Subcommands, add_common: AddCommon) -> None:
    """Register ``modal status|stop``."""
    parser = sub.add_parser("modal", help=_HELP, description=_HELP)
    parser.add_argument("action", choices=["status", "stop"], help="status, or stop the app")
    add_common(parser)


def cmd_modal(args: argparse.Namespace) -> JsonRecord:
    """Run ``status`` or ``stop`` for the app of ``--storage-root``'s installation.

    Raises:
        TargetUnavailableError: The ``modal`` extra is not installed.
        ModalUnavailableError: ``modal`` or its credentials are missing or refused.
    """
    from comfy_llm._remote import modal_remote
    from comfy_llm._storage import installation_dir, storage_root

    remote = modal_remote()
    directory = installation_dir(storage_root(args.storage_root))
    if args.action == "stop":
        return {"action": "stop", **remote.stop_app(directory)}
    return {"action": "status", **remote.app_status(directory)}


def print_modal(result: JsonRecord) -> None:
    """One line a person reads."""
    app = result["app"]
    if result["action"] == "stop":
        if not result["was_deployed"]:
            print(f"{app}: not deployed (nothing to stop)")
        else:
            print(f"{app}: stopped ({result['containers_stopped']} containers ended)")
        return
    if not result["deployed"]:
        print(f"{app}: not deployed")
        return
    count = result["containers"]
    hint = "; `comfy-llm modal stop` ends them now" if count else ""
    print(f"{app}: deployed, {count} container(s) running{hint}")
