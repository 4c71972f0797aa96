"""scripts/house-figures.py: each figure issue 28 tracks, on a tree whose answers are known."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "house-figures.py"
_SPEC = importlib.util.spec_from_file_location("house_figures", SCRIPT)
assert _SPEC and _SPEC.loader
house_figures = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(house_figures)


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _tree(root: Path) -> None:
    _write(
        root,
        "packages/alpha/src/alpha/__init__.py",
        "from alpha._x import A, B\nfrom alpha.errors import AlphaError\n\n"
        '__all__ = ["A", "B", "AlphaError"]\n',
    )
    _write(
        root,
        "packages/alpha/src/alpha/errors.py",
        "from comfy import Base as _Base\n\n\n"
        "class AlphaError(ValueError):\n    pass\n\n\n"
        "class SubError(AlphaError):\n    pass\n\n\n"
        "class Other(_Base):\n    pass\n",
    )
    _write(
        root,
        "packages/alpha/src/alpha/_x.py",
        "from typing import Any\n\nfrom . import _y\n\nA: Any = 1\nB = 2  # Any in a comment\n",
    )
    _write(root, "packages/alpha/src/alpha/_y.py", "def f():\n    from alpha import _x\n")
    _write(root, "packages/alpha/src/alpha/_long.py", "x = 1\n" * 451)
    _write(
        root,
        "packages/beta/src/beta/__init__.py",
        "import alpha\nfrom alpha import A\n\n__all__ = []\n\n"
        "def g():\n    try:\n        return A\n    except (alpha.SubError, KeyError):\n"
        "        return None\n",
    )
    _write(root, "packages/alpha/tests/test_alpha.py", "from alpha import AlphaError\n")
    _write(root, "bench/bench_alpha.py", "from alpha._x import B\n")


def test_every_figure_on_a_known_tree(tmp_path: Path) -> None:
    _tree(tmp_path)
    figures = house_figures.measure(tmp_path, with_duplicates=False)
    alpha = figures["packages"]["alpha"]
    assert figures["product_modules"] == 6
    assert alpha["lines"] == 4 + 13 + 6 + 2 + 451
    assert figures["modules_over_limit"]["product"] == [["packages/alpha/src/alpha/_long.py", 451]]
    assert alpha["import_circles"] == [["alpha._x", "alpha._y", "alpha._x"]]
    assert figures["packages"]["beta"]["import_circles"] == []
    # A is used by beta's src; B only by bench; AlphaError only by alpha's own tests
    assert (alpha["exports"], alpha["exports_used_by_siblings"]) == (3, 1)
    assert alpha["exports_used_outside"] == 2
    assert alpha["exports_unused_outside"] == ["AlphaError"]
    # through a builtin base and through a class of the tree; not through an unknown import
    assert alpha["error_class_names"] == ["AlphaError", "SubError"]
    assert alpha["error_classes_caught_by_class"] == ["SubError"]
    assert alpha["error_module_lines"] == 13
    assert alpha["any"] == 2  # the import and the annotation, not the comment
    assert "duplicates" not in figures
    text = house_figures.render(figures)
    assert "import circle in alpha: alpha._x -> alpha._y -> alpha._x" in text
    assert "alpha: error classes product code catches by class: SubError" in text
    assert str(tmp_path) not in text + json.dumps(figures)  # nothing machine-specific


def test_the_command_prints_json(tmp_path: Path) -> None:
    _tree(tmp_path)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(tmp_path), "--no-duplicates", "--json"],
        capture_output=True,
        check=True,
    )
    figures = json.loads(done.stdout)
    assert figures == json.loads(json.dumps(house_figures.measure(tmp_path, with_duplicates=False)))
    assert set(figures["packages"]) == {"alpha", "beta"}


def test_duplicates_reads_only_product_sources(tmp_path: Path, monkeypatch) -> None:
    """The command's documented answer (the tool library's duplicates README, "Returns")."""
    _tree(tmp_path / "tree")
    tool = tmp_path / "bin" / "duplicates"
    _write(
        tmp_path,
        "bin/duplicates",
        "#!/bin/sh\n"
        f'(cd "$2" && find . -name "*.py" | sort) > {tmp_path / "seen"}\n'
        "echo '2 pairs of places (6 files read), each sharing runs of 6 or more lines'\n"
        "echo 'D1 alpha/alpha/_x.py:1-6 ~ beta/beta/__init__.py:1-6'\n"
        "echo 'D2 alpha/alpha/_long.py:1-9 ~ alpha/alpha/_long.py:10-18 shape'\n"
        "echo 'left out: 1 run of 6 lines that stand in more than 8 places each'\n",
    )
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
    found = house_figures.duplicates(tmp_path / "tree", 5)
    assert found["pairs"] == 2
    assert len(found["rows"]) == 2
    assert found["left_out"] == ["left out: 1 run of 6 lines that stand in more than 8 places each"]
    assert (tmp_path / "seen").read_text().split() == [
        "./alpha/alpha/__init__.py",
        "./alpha/alpha/_long.py",
        "./alpha/alpha/_x.py",
        "./alpha/alpha/_y.py",
        "./alpha/alpha/errors.py",
        "./beta/beta/__init__.py",
    ]
    monkeypatch.setattr(house_figures.shutil, "which", lambda name: None)
    assert house_figures.duplicates(tmp_path / "tree", 5)["pairs"] is None
