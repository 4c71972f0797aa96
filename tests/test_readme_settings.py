"""The README's settings table names every environment variable the packages read."""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# Variables are spelled as string literals (the *_ENV constants and env_* calls).
_VARIABLE = re.compile(r"[\"']((?:HF|HUGGING_FACE|COMFY|MODAL)_[A-Z0-9_]+)[\"']")


def _read_by_code() -> set[str]:
    names = set()
    for source in REPO_ROOT.glob("packages/*/src/**/*.py"):
        text = source.read_text(encoding="utf-8")
        # A name the module itself defines (``MODAL_GPUS = ...``, listed in ``__all__``)
        # is a Python constant, not an environment variable.
        names.update(
            name
            for name in _VARIABLE.findall(text)
            if not re.search(rf"^{name}\s*[:=]", text, re.MULTILINE)
        )
    return {name for name in names if not re.search(r"_ENVS?$", name)}


def _documented() -> set[str]:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    settings = text.split("## Settings", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([A-Z0-9_]+)`", settings, re.MULTILINE))


def test_every_environment_variable_is_in_the_settings_table() -> None:
    missing = _read_by_code() - _documented()
    assert not missing, f"add to README.md's Settings table: {sorted(missing)}"
