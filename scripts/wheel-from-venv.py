"""Pack a distribution installed in this interpreter back into a wheel, without building.

Usage: .venv/bin/python scripts/wheel-from-venv.py DISTRIBUTION OUT_DIR

Prints the wheel's path. Why: ``llama-cpp-python`` is an sdist only, and
installing it anywhere compiles llama.cpp (about 7 minutes on 2 cores). The
workspace venv already holds the build ``uv sync`` made (its flags pinned by
``[tool.uv.extra-build-variables]``); the real-ComfyUI tier's venv takes the
same files as a wheel instead of compiling them a second time. It needs no
network and no uv cache layout: only what the installed distribution's RECORD
lists.

The files are the installed ones, every one inside site-packages (a RECORD
entry outside it, such as a console script, is refused rather than guessed
at); the installer's own records (INSTALLER, REQUESTED, direct_url.json) are
left out and RECORD is written anew with each file's sha256, as the wheel
format asks (PEP 427/376). The tag is the one the build wrote in WHEEL.
Standard library only.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.metadata
import io
import sys
import zipfile
from pathlib import Path, PurePosixPath

_INSTALLER_FILES = frozenset({"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"})


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def pack(distribution: str, out_dir: Path) -> Path:
    """Write ``<name>-<version>-<tag>.whl`` for an installed distribution; return its path."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise SystemExit(
            f"{distribution} is not installed in {sys.executable}: run `uv sync --locked` "
            "(the dev group installs it) first"
        ) from None
    site = Path(str(dist.locate_file(""))).resolve()
    files = [PurePosixPath(str(f)) for f in dist.files or ()]
    info = next((f.parts[0] for f in files if f.parts[0].endswith(".dist-info")), None)
    if info is None:
        raise SystemExit(f"{distribution}: no .dist-info among its installed files")
    tags = [
        line.split(":", 1)[1].strip()
        for line in (site / info / "WHEEL").read_text(encoding="utf-8").splitlines()
        if line.startswith("Tag:")
    ]
    if len(tags) != 1:
        raise SystemExit(f"{distribution}: expected one Tag in {info}/WHEEL, found {tags}")
    name = info.removesuffix(".dist-info")  # <normalized name>-<version>
    wheel = Path(out_dir) / f"{name}-{tags[0]}.whl"
    wheel.parent.mkdir(parents=True, exist_ok=True)
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as out:
        for relative in sorted(files):
            if ".." in relative.parts or relative.is_absolute():
                raise SystemExit(f"{distribution}: {relative} lies outside site-packages")
            if relative.parts[0] == info and relative.name in _INSTALLER_FILES:
                continue
            if relative.suffix == ".pyc" or "__pycache__" in relative.parts:
                continue  # compiled by the installer, not part of the wheel
            data = (site / relative).read_bytes()
            out.writestr(str(relative), data)
            writer.writerow([str(relative), _record_hash(data), len(data)])
        writer.writerow([f"{info}/RECORD", "", ""])
        out.writestr(f"{info}/RECORD", record.getvalue())
    return wheel


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__.split("\n\n", 2)[1])
    print(pack(sys.argv[1], Path(sys.argv[2])))
