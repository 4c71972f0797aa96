"""Whether the node's version is new to the Comfy registry (the release workflow asks).

Usage: python3 scripts/registry-version.py [--api URL] [--github-output FILE]

Reads ``[project].name`` (the node id) and ``[project].version`` from
pyproject.toml and asks the registry's public API for the node's published
versions (``GET <api>/nodes/<id>/versions``). Prints ``publish=true`` when the
version is not among them (or the node is not on the registry yet: 404), else
``publish=false``, and appends the same line to ``--github-output``. The
registry refuses a version it already has, so a re-run of a release publishes
nothing twice. Standard library only: the workflow runs it with the runner's
Python. Exit status: 0 answered, 1 the registry could not be asked (no guess).
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
API = "https://api.comfy.org"


def published_versions(api: str, node_id: str) -> list[str] | None:
    """The node's versions on the registry, or ``None`` when it has no such node."""
    url = f"{api.rstrip('/')}/nodes/{node_id}/versions"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            entries = json.load(response)
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise
    return [str(entry["version"]) for entry in entries]


def main(argv: list[str] | None = None) -> int:
    """Answer for this checkout's node version; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api", default=API, help=f"the registry API (default {API})")
    parser.add_argument("--github-output", type=Path, help="append publish=... to this file")
    args = parser.parse_args(argv)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    node_id, version = project["name"], project["version"]
    try:
        versions = published_versions(args.api, node_id)
    except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError) as error:
        print(f"registry-version: cannot ask {args.api} about {node_id}: {error}", file=sys.stderr)
        return 1
    publish = versions is None or version not in versions
    where = "not on the registry yet" if versions is None else f"{len(versions)} versions there"
    print(f"{node_id} {version}: {where}; publish={str(publish).lower()}", file=sys.stderr)
    line = f"publish={str(publish).lower()}\n"
    sys.stdout.write(line)
    if args.github_output is not None:
        with args.github_output.open("a", encoding="utf-8") as output:
            output.write(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
