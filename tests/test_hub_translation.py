"""Hub failures are translated in one module: profiles' ``_hub_errors``.

Staging once caught huggingface_hub's errors again and parsed profiles'
messages for the detail (reviews/architecture-2026-12.md §4, "the Hub error
translation" twice). Now every other module lets ``HubError`` through or calls
``comfy_llm_profiles.hub_error``; this test keeps it that way by finding every
product module that imports one of huggingface_hub's exception classes.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
THE_TRANSLATION = "packages/profiles/src/comfy_llm_profiles/_hub_errors.py"


def _hub_exceptions_imported(path: Path) -> set[str]:
    """huggingface_hub's exception classes this module imports (at any depth)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("huggingface_hub.errors")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("huggingface_hub"):
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                value = getattr(module, alias.name, None)
                if isinstance(value, type) and issubclass(value, BaseException):
                    found.add(f"{node.module}.{alias.name}")
    return found


def test_only_profiles_hub_errors_imports_the_hubs_exceptions() -> None:
    importers = {
        str(path.relative_to(REPO_ROOT)): names
        for path in sorted(REPO_ROOT.glob("packages/*/src/**/*.py"))
        if (names := _hub_exceptions_imported(path))
    }
    assert set(importers) == {THE_TRANSLATION}, importers
