"""The dependency rules of DESIGN.md hold in the code, not only on paper."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
HEAVY = {"torch", "torchvision", "transformers", "mlx", "mlx_vlm", "vllm", "modal", "llama_cpp"}
ENGINE_PACKAGES = {"backend-mlx", "backend-cuda", "backend-llamacpp"}
COMFYUI = {"comfy", "comfy_api", "comfy_execution", "folder_paths", "server"}


def _source_files(package_folder: str) -> list[Path]:
    return sorted((REPO_ROOT / "packages" / package_folder / "src").rglob("*.py"))


def _module_level_imports(path: Path) -> set[str]:
    """Top-level module names imported outside any function or class body."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = nested or isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda
            )
            if not inner and isinstance(child, ast.Import):
                names.update(alias.name.split(".")[0] for alias in child.names)
            elif not inner and isinstance(child, ast.ImportFrom) and child.level == 0:
                names.add((child.module or "").split(".")[0])
            visit(child, inner)

    visit(tree, False)
    return names


PACKAGES = sorted(p.name for p in (REPO_ROOT / "packages").iterdir() if (p / "src").is_dir())


@pytest.mark.parametrize("package", PACKAGES)
def test_only_backends_import_engines_at_module_level(package: str) -> None:
    allowed = HEAVY if package in ENGINE_PACKAGES else set()
    if package == "modal-remote":
        allowed = {"modal"}
    offenders = {
        str(path.relative_to(REPO_ROOT)): sorted((_module_level_imports(path) & HEAVY) - allowed)
        for path in _source_files(package)
    }
    assert {k: v for k, v in offenders.items() if v} == {}


@pytest.mark.parametrize("package", [p for p in PACKAGES if p != "comfy-node"])
def test_nothing_below_comfy_node_imports_comfyui(package: str) -> None:
    for path in _source_files(package):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                found = {(node.module or "").split(".")[0]}
            else:
                continue
            assert not found & COMFYUI, f"{path} imports {found & COMFYUI}"


def test_importing_the_node_package_loads_no_engine_and_no_comfyui() -> None:
    code = (
        "import json, sys\n"
        "import comfy_llm, comfy_llm._cli, comfy_llm_profiles, comfy_llm_staging\n"
        "import comfy_llm_inputs, comfy_llm_reasoning, comfy_llm_residency\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    env = {**os.environ, "HF_HUB_DISABLE_TELEMETRY": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    loaded = set(json.loads(done.stdout))
    assert not loaded & (HEAVY | COMFYUI)


def test_import_linter_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


_SPEC = importlib.util.spec_from_file_location(
    "house_figures", REPO_ROOT / "scripts" / "house-figures.py"
)
assert _SPEC and _SPEC.loader
house_figures = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(house_figures)

KNOWN_CIRCLE_EDGES: dict[str, set[tuple[str, str]]] = {
    # None since issue 28 step 4 split modal-remote into client/ worker/ wire/ bench/
    # (the app took code_fingerprint from the transport, which imported the app).
}


#: Every workspace package with sources: the product packages and the test world.
SOURCE_FOLDERS = {p: REPO_ROOT / "packages" / p / "src" for p in PACKAGES}
SOURCE_FOLDERS["testing"] = REPO_ROOT / "testing" / "src"


def test_the_circle_walk_covers_every_workspace_package() -> None:
    """A package added to the workspace is walked for circles without editing this file."""
    members = {
        init.parent.name
        for source in (*REPO_ROOT.glob("packages/*/src"), REPO_ROOT / "testing" / "src")
        for init in source.glob("*/__init__.py")
    }
    walked = {
        init.parent.name
        for source in SOURCE_FOLDERS.values()
        for init in source.glob("*/__init__.py")
    }
    assert walked == members
    assert len(walked) == len(SOURCE_FOLDERS)


@pytest.mark.parametrize("folder", sorted(SOURCE_FOLDERS))
def test_no_import_circle_inside_a_package(folder: str) -> None:
    """Modules of one package import each other one way only (lazy imports count).

    History: comfy-node's two faces and pipeline, profiles' _curated -> _decide ->
    _profile -> _reference and backend-cuda's backends each had a circle once.
    """
    source = SOURCE_FOLDERS[folder]
    (package,) = [init.parent.name for init in source.glob("*/__init__.py")]
    graph = house_figures.internal_imports(source, package)
    allowed = KNOWN_CIRCLE_EDGES.get(folder, set())
    assert {edge for edge in allowed if edge[1] not in graph.get(edge[0], ())} == set(), (
        "an allowed arrow is gone: delete it from KNOWN_CIRCLE_EDGES"
    )
    for importer, imported in allowed:
        graph[importer] = graph[importer] - {imported}
    assert house_figures.import_circles(graph) == []


def _node_imports(path: Path) -> list[tuple[str, tuple[str, ...]]]:
    """``(module, names)`` for every import of the node package ``comfy_llm`` in ``path``."""
    found: list[tuple[str, tuple[str, ...]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(a.name, ()) for a in node.names if a.name.split(".")[0] == "comfy_llm"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "comfy_llm":
                continue
            found.append((node.module, tuple(alias.name for alias in node.names)))
    return found


def test_bench_and_the_test_world_use_only_the_node_packages_public_names() -> None:
    """bench/, the test world and scripts/ drive comfy-node through ``comfy_llm.__all__``.

    Issue 28: they imported ``comfy_llm._comfyui._modal_llm``, ``_glue``, ``_pipeline``
    and ``_storage``, so a private rename broke a benchmark nobody ran.
    """
    import comfy_llm

    public = set(comfy_llm.__all__)
    outside = [
        *sorted((REPO_ROOT / "bench").rglob("*.py")),
        *sorted((REPO_ROOT / "testing" / "src").rglob("*.py")),
        *sorted((REPO_ROOT / "scripts").rglob("*.py")),
    ]
    wrong = [
        f"{path.relative_to(REPO_ROOT)}: {module} {names}"
        for path in outside
        for module, names in _node_imports(path)
        if module != "comfy_llm" or not set(names) <= public
    ]
    assert not wrong
    # the names that need no ComfyUI resolve here (the nodes and the glue: the tiers)
    for name in public - {"ModalLLMNode", "CaptionImagesNode", "ComfyGlue"}:
        assert getattr(comfy_llm, name) is not None
