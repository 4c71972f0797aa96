"""Write the Modal image's exact pins from uv.lock (run after every `uv lock`).

    uv run --frozen python scripts/modal_image_lock.py          # rewrite the file
    uv run --frozen python scripts/modal_image_lock.py --check  # exit 1 if stale

The image holds backend-cuda with its `vllm` extra, resolved by the lock for
the container's platform (Linux x86_64, CPython 3.11), plus the workspace
packages backend-cuda needs and modal-remote itself as local sources. The
stager's slim image holds modal-remote's own closure instead (no backend-cuda,
so no torch, CUDA or vLLM; Modal supplies its own client, so `modal` is pruned
as the GPU image never has it). The test suite runs the check, so a lock change
that forgets this fails CI.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "packages/modal-remote/src/comfy_llm_modal_remote/image_lock.json"
PYTHON_VERSION = "3.11"
CONTAINER = {
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "python_version": PYTHON_VERSION,
    "python_full_version": f"{PYTHON_VERSION}.13",
    "extra": "",
}
_LOCAL = re.compile(r"^-e \./packages/(?P<folder>[\w-]+)$")


def _export(*selection: str) -> list[str]:
    uv = shutil.which("uv")
    if uv is None:
        raise SystemExit("uv must be on PATH (it is in the dev group)")
    args = [uv, "export", "--frozen", *selection, "--prune", "modal"]
    args += ["--no-dev", "--no-hashes", "--no-header", "--no-annotate"]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, check=True)
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def _uv_version() -> str:
    lock = (ROOT / "uv.lock").read_text(encoding="utf-8")
    match = re.search(r'\[\[package\]\]\nname = "uv"\nversion = "([^"]+)"', lock)
    if match is None:
        raise SystemExit("uv.lock does not pin uv (it is in the dev group)")
    return match.group(1)


def _import_name(folder: str) -> str:
    project = (ROOT / "packages" / folder / "pyproject.toml").read_text(encoding="utf-8")
    match = re.search(r'packages = \["src/([\w]+)"\]', project)
    if match is None:
        raise SystemExit(f"packages/{folder}/pyproject.toml names no wheel package")
    return match.group(1)


def _pins(lines: list[str]) -> tuple[list[str], list[str]]:
    """(exact pins for the container's platform, workspace import names) of an export."""
    pins: list[str] = []
    local = {"comfy_llm_modal_remote"}
    for line in lines:
        if line.startswith("#"):
            continue
        folder = _LOCAL.match(line)
        if folder:
            local.add(_import_name(folder.group("folder")))
            continue
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate(CONTAINER):
            continue
        (specifier,) = requirement.specifier
        if specifier.operator != "==":
            raise SystemExit(f"{line!r} is not an exact pin")
        pins.append(f"{requirement.name}=={specifier.version}")
    return sorted(pins, key=str.lower), sorted(local)


def build() -> dict[str, object]:
    """The image lock as a JSON-ready dict."""
    pins, local = _pins(_export("--package", "comfy-llm-backend-cuda", "--extra", "vllm"))
    stager_pins, stager_local = _pins(_export("--package", "comfy-llm-modal-remote"))
    return {
        "python_version": PYTHON_VERSION,
        "uv_version": _uv_version(),
        "platform": "linux-x86_64",
        "requirements": pins,
        "local_packages": local,
        "stager_requirements": stager_pins,
        "stager_local_packages": stager_local,
    }


def render() -> str:
    """The file's exact text."""
    return json.dumps(build(), indent=2) + "\n"


def main(argv: list[str]) -> int:
    """Write the lock file, or with ``--check`` report whether it is stale."""
    text = render()
    if "--check" in argv:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT.relative_to(ROOT)} is stale: run scripts/modal_image_lock.py")
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
