"""Measure the house figures issue 28 tracks, so "before" and "after" are one command apart.

Usage: uv run --frozen python scripts/house-figures.py [--root DIR] [--json] [--no-duplicates]

What is measured, and how (the method of reviews/architecture-2026-12.md):

* **Product lines**: every ``packages/*/src/**/*.py``, lines as ``wc -l`` counts them.
* **Modules over 450 lines**: product modules, and apart from them every other
  tracked ``.py`` (tests, bench, the test world, scripts).
* **Import circles inside each package**: the package's modules importing each
  other, function-level imports included (:func:`internal_imports`,
  :func:`import_circles`; ``tests/test_import_rules.py`` runs the same walk).
* **Exports**: each package's ``__all__``; how many of those names other
  packages' ``src/`` import (``from pkg[.sub] import X`` or ``pkg.X``), and how
  many any file outside the package's folder takes that way (other packages'
  tests, ``tests/``, bench, the test world and scripts; its own tests do not count).
* **Error classes**: classes in ``src/`` that derive from an exception, through
  the repository's own classes; the lines of the package's error module
  (``errors.py``, core's ``_errors.py``); and the classes product code names in
  an ``except`` clause or an ``isinstance`` call ("caught by class").
* **Any**: each ``Any`` name in the code of ``src/`` (imports included; strings and
  comments not), which is ``git grep -w Any`` less the prose.
* **Duplicates**: the ``duplicates`` command over a copy of the product sources
  alone (so tests do not count), when that command is on PATH.

Plain text by default, one JSON object with ``--json``. Paths are relative to
the root: nothing machine-specific is printed, so outputs can be compared.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import json
import re
import shutil
import subprocess
import sys
import tempfile
import tokenize
from pathlib import Path
from typing import Any

MODULE_LIMIT = 450
ERROR_MODULES = ("errors.py", "_errors.py")
_BUILTIN_ERRORS = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}


def packages(root: Path) -> dict[str, tuple[str, Path]]:
    """Folder name → (import name, its ``src/<import name>`` folder), for each package."""
    found = {}
    for folder in sorted((root / "packages").iterdir()):
        for init in sorted((folder / "src").glob("*/__init__.py")):
            found[folder.name] = (init.parent.name, init.parent)
    return found


def _python_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n")


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def internal_imports(root: Path, package: str) -> dict[str, set[str]]:
    """Module → the package's own modules it imports anywhere (lazy imports included).

    ``root`` is the folder holding the package (its ``src``); ``package`` its import name.
    """
    graph: dict[str, set[str]] = {}
    for path in _python_files(root / package):
        parts = path.relative_to(root).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found: set[str] = set()
        here = module if parts[-1] == "__init__" else module.rpartition(".")[0]
        for node in ast.walk(_parse(path)):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module)  # and `from package import _module`:
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level >= 1:
                base = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                if node.module:
                    found.add(f"{base}.{node.module}")
                else:
                    found.update(f"{base}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        graph[module] = {name for name in found if name.startswith(f"{package}.")}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each circle a depth-first walk of ``graph`` meets, as the modules around it."""
    state: dict[str, int] = {}
    circles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for imported in sorted(graph.get(module, ())):
            if state.get(imported) == 1:
                circles.append([*path[path.index(imported) :], imported])
            elif imported in graph and not state.get(imported):
                visit(imported, [*path, imported])
        state[module] = 2

    for module in sorted(graph):
        if not state.get(module):
            visit(module, [module])
    return circles


def _exports(init: Path) -> list[str]:
    for node in _parse(init).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            value = ast.literal_eval(node.value)  # type: ignore[union-attr]
            return sorted(value)
    return []


def _names_used(tree: ast.Module) -> set[tuple[str, str]]:
    """(package, name) ``tree`` takes: ``from package[.x] import name`` and ``package.name``."""
    used: set[tuple[str, str]] = set()
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            used.update((node.module.split(".")[0], alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            aliases.update((a.asname or a.name, a.name) for a in node.names if "." not in a.name)
    for node in ast.walk(tree) if aliases else ():
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
        ):
            used.add((aliases[node.value.id], node.attr))
    return used


def _taken(uses: dict[Path, set[tuple[str, str]]], paths: list[Path], package: str) -> set[str]:
    return {name for path in paths for origin, name in uses[path] if origin == package}


def _tracked_python(root: Path) -> list[Path]:
    """Every ``.py`` git tracks (or, outside a checkout, every one not in a venv)."""
    try:
        done = subprocess.run(
            ["git", "ls-files", "-z", "--", "*.py"],
            cwd=root,
            capture_output=True,
            check=True,
        )
        return sorted(root / name for name in done.stdout.decode().split("\0") if name)
    except (OSError, subprocess.CalledProcessError):
        return [p for p in _python_files(root) if not any(x.startswith(".") for x in p.parts)]


def _error_classes(trees: dict[Path, ast.Module]) -> set[tuple[Path, str]]:
    """(file, class name) of every class deriving from an exception (names can repeat)."""
    bases: dict[tuple[Path, str], set[str]] = {}
    for path, tree in trees.items():
        renamed = {
            alias.asname: alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
            if alias.asname
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                names = {_last_name(base) for base in node.bases}
                bases[path, node.name] = {renamed.get(n, n) for n in names if n}
    errors: set[tuple[Path, str]] = set()
    known = set(_BUILTIN_ERRORS)
    grew = True
    while grew:
        grew = False
        for key, parents in bases.items():
            if key not in errors and parents & known:
                errors.add(key)
                known.add(key[1])
                grew = True
    return errors


def _last_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _import_origins(tree: ast.Module, own: str) -> dict[str, tuple[str, str]]:
    """Name bound by an import in ``tree`` → (package it comes from, imported name)."""
    origin: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            package = (node.module or "").split(".")[0] if node.level == 0 else own
            for alias in node.names:
                origin[alias.asname or alias.name] = (package, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                origin[alias.asname or alias.name] = (alias.name.split(".")[0], "")
    return origin


def _class_expressions(tree: ast.Module) -> list[ast.expr]:
    """What each ``except`` clause and ``isinstance``/``issubclass`` call names, tuples opened."""
    named: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            named.append(node.type)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "issubclass")
            and len(node.args) == 2
        ):
            named.append(node.args[1])
    found: list[ast.expr] = []
    while named:
        item = named.pop()
        if isinstance(item, ast.Tuple):
            named += item.elts
        else:
            found.append(item)
    return found


def _caught_by_class(trees: dict[Path, ast.Module], owner: dict[Path, str]) -> set[tuple[str, str]]:
    """(package, class name) of each class an ``except`` clause or ``isinstance`` call names.

    A name is followed through the file's imports to the package it comes from;
    one the file does not import is its own package's.
    """
    caught: set[tuple[str, str]] = set()
    for path, tree in trees.items():
        origin = _import_origins(tree, owner[path])
        for item in _class_expressions(tree):
            if isinstance(item, ast.Name):
                caught.add(origin.get(item.id, (owner[path], item.id)))
            elif isinstance(item, ast.Attribute) and isinstance(item.value, ast.Name):
                caught.add((origin.get(item.value.id, (owner[path], ""))[0], item.attr))
    return caught


def _any_count(path: Path) -> int:
    with path.open("rb") as source:
        tokens = tokenize.tokenize(source.readline)
        return sum(1 for t in tokens if t.type == tokenize.NAME and t.string == "Any")


def duplicates(root: Path, seconds: int) -> dict[str, Any]:
    """``duplicates`` over a copy of ``packages/*/src`` alone; ``{"pairs": None}`` without it."""
    command = shutil.which("duplicates")
    if command is None:
        return {"pairs": None, "summary": "the duplicates command is not on PATH"}
    with tempfile.TemporaryDirectory(prefix="house-figures-") as scratch:
        for folder, (_, source) in packages(root).items():
            for path in _python_files(source):
                copy = Path(scratch) / folder / path.relative_to(source.parent)
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, copy)
        done = subprocess.run(
            [command, "--repo", scratch, "--most", "200", "--seconds", str(seconds)],
            capture_output=True,
            text=True,
            check=False,
        )
    lines = done.stdout.splitlines()
    summary = lines[0] if lines else done.stderr.strip()
    match = re.match(r"(\d+) pairs", summary)
    pairs = int(match.group(1)) if match else (0 if summary.startswith("no duplicates") else None)
    rows = [line for line in lines[1:] if re.match(r"D\d+ ", line)]
    incomplete = [line for line in lines if line.startswith("incomplete:")]
    left_out = [line for line in lines if line.startswith("left out:")]
    return {
        "pairs": pairs,
        "summary": summary,
        "rows": rows,
        "left_out": left_out,
        "incomplete": incomplete,
    }


def measure(root: Path, *, with_duplicates: bool = True, seconds: int = 120) -> dict[str, Any]:
    """Every figure, as plain data (paths relative to ``root``)."""
    found = packages(root)
    trees = {path: _parse(path) for _, source in found.values() for path in _python_files(source)}
    owner = {path: name for name, source in found.values() for path in _python_files(source)}
    errors = _error_classes(trees)
    caught = _caught_by_class(trees, owner) & {(owner[path], name) for path, name in errors}
    others = {path: _parse(path) for path in _tracked_python(root) if path not in trees}
    uses = {path: _names_used(tree) for path, tree in [*trees.items(), *others.items()]}
    per_package: dict[str, Any] = {}
    for folder, (name, source) in found.items():
        own = [path for path in trees if source in path.parents]
        exported = _exports(source / "__init__.py")
        home = root / "packages" / folder
        elsewhere = [path for path in uses if home not in path.parents]
        outside = _taken(uses, elsewhere, name) & set(exported)
        siblings = _taken(uses, [p for p in elsewhere if p in trees], name) & set(exported)
        classes = sorted(c for path, c in errors if source in path.parents)
        module = next((source / m for m in ERROR_MODULES if (source / m).is_file()), None)
        per_package[folder] = {
            "modules": len(own),
            "lines": sum(_lines(path) for path in own),
            "import_circles": import_circles(internal_imports(source.parent, name)),
            "exports": len(exported),
            "exports_used_by_siblings": len(siblings),
            "exports_used_outside": len(outside),
            "exports_unused_outside": sorted(set(exported) - outside),
            "error_classes": len(classes),
            "error_class_names": classes,
            "error_classes_caught_by_class": sorted({c for p, c in caught if p == name}),
            "error_module": str(module.relative_to(root)) if module else None,
            "error_module_lines": _lines(module) if module else 0,
            "any": sum(_any_count(path) for path in own),
        }
    over = sorted(
        ((str(path.relative_to(root)), _lines(path)) for path in [*trees, *others]),
        key=lambda item: (-item[1], item[0]),
    )
    over = [(path, lines) for path, lines in over if lines > MODULE_LIMIT]
    product = {str(path.relative_to(root)) for path in trees}
    figures = {
        "product_modules": len(trees),
        "product_lines": sum(p["lines"] for p in per_package.values()),
        "modules_over_limit": {
            "limit": MODULE_LIMIT,
            "product": [[p, n] for p, n in over if p in product],
            "other": [[p, n] for p, n in over if p not in product],
        },
        "import_circles": sum(len(p["import_circles"]) for p in per_package.values()),
        "exports": sum(p["exports"] for p in per_package.values()),
        "error_classes": sum(p["error_classes"] for p in per_package.values()),
        "error_classes_caught_by_class": len(caught),
        "error_module_lines": sum(p["error_module_lines"] for p in per_package.values()),
        "any": sum(p["any"] for p in per_package.values()),
        "packages": per_package,
    }
    if with_duplicates:
        figures["duplicates"] = duplicates(root, seconds)
    return figures


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    )


_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("modules", lambda p: p["modules"]),
    ("lines", lambda p: p["lines"]),
    ("circles", lambda p: len(p["import_circles"])),
    ("exports", lambda p: p["exports"]),
    ("by siblings", lambda p: p["exports_used_by_siblings"]),
    ("outside", lambda p: p["exports_used_outside"]),
    ("errors", lambda p: p["error_classes"]),
    ("caught", lambda p: len(p["error_classes_caught_by_class"])),
    ("error lines", lambda p: p["error_module_lines"]),
    ("Any", lambda p: p["any"]),
)


def render(figures: dict[str, Any]) -> str:
    """The figures as text a person reads."""
    per_package = figures["packages"]
    rows = [["package", *(name for name, _ in _COLUMNS)]]
    rows += [[folder, *(str(get(p)) for _, get in _COLUMNS)] for folder, p in per_package.items()]
    rows.append(["total", *(str(sum(get(p) for p in per_package.values())) for _, get in _COLUMNS)])
    out = [_table(rows), ""]
    over = figures["modules_over_limit"]
    out.append(f"modules over {over['limit']} lines: {len(over['product'])} in product code")
    out += [f"  {lines:5d}  {path}" for path, lines in over["product"]]
    out.append(f"  and {len(over['other'])} elsewhere (tests, bench, test world, scripts)")
    out += [f"  {lines:5d}  {path}" for path, lines in over["other"]]
    for folder, p in per_package.items():
        out += [f"import circle in {folder}: {' -> '.join(c)}" for c in p["import_circles"]]
    for folder, p in per_package.items():
        if p["error_classes_caught_by_class"]:
            caught = ", ".join(p["error_classes_caught_by_class"])
            out.append(f"{folder}: error classes product code catches by class: {caught}")
    for folder, p in per_package.items():
        if p["exports_unused_outside"]:
            unused = p["exports_unused_outside"]
            names = ", ".join(unused)
            out.append(f"{folder}: {len(unused)} exports used nowhere outside its folder: {names}")
    if "duplicates" in figures:
        found = figures["duplicates"]
        out.append(f"duplicates in product code: {found['summary']}")
        out += [f"  {line}" for line in found.get("left_out", []) + found.get("incomplete", [])]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Print the figures of the tree at ``--root`` (default: this checkout)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--json", action="store_true", help="one JSON object")
    parser.add_argument("--no-duplicates", action="store_true", help="skip `duplicates`")
    parser.add_argument("--duplicates-seconds", type=int, default=120)
    args = parser.parse_args(argv)
    figures = measure(
        args.root.resolve(),
        with_duplicates=not args.no_duplicates,
        seconds=args.duplicates_seconds,
    )
    print(json.dumps(figures, indent=2) if args.json else render(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
