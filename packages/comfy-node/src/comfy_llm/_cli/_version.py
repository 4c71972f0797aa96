"""``comfy-llm --version``: the node's version and every comfy-llm package this Python has."""

from __future__ import annotations

import importlib
import pkgutil
import sys

__all__ = ["version_lines"]

_NOT_SHIPPED = frozenset({"comfy_llm_testworld"})  # the dev-only test world


def installed_versions() -> dict[str, str]:
    """``{distribution: version}`` of each importable comfy-llm package, by its ``__version__``.

    Imports each package (never an engine: those load inside the backends'
    functions); a package of a missing extra is simply absent.
    """
    names = {
        info.name
        for info in pkgutil.iter_modules()
        if info.name.startswith("comfy_llm") and info.name not in _NOT_SHIPPED
    }
    found = {}
    for name in sorted(names):
        module = importlib.import_module(name)
        found[name.replace("_", "-")] = str(getattr(module, "__version__", "unknown"))
    return found


def version_lines() -> str:
    """The first line names the node and the Python; one line per other package follows."""
    versions = installed_versions()
    node = versions.pop("comfy-llm", "unknown")
    python = ".".join(str(part) for part in sys.version_info[:3])
    lines = [f"comfy-llm {node} (Python {python})"]
    lines += [f"  {name} {version}" for name, version in versions.items()]
    return "\n".join(lines)
