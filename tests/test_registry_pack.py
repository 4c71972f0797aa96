"""The Comfy registry's archive holds the node and nothing else.

The archive is built by comfy-cli's rules (comfy_llm_testworld.registry_pack
cites each one; the same 160 names came out of comfy-cli 1.23.0's own
``comfy node pack`` when this test was written): the ComfyUI entry, the
packages' sources, the node's requirements, the example workflows and the
documents; no tests, bench, testing, scripts, lock or CI.
"""

from __future__ import annotations

import ast
import subprocess
import zipfile
from pathlib import Path

from comfy_llm_testworld.registry_pack import build_archive, packed_files

REPO_ROOT = Path(__file__).resolve().parents[1]
TOP_LEVEL = {
    "LICENSE",
    "README.md",
    "SECURITY.md",
    "CHANGELOG.md",
    "__init__.py",
    "pyproject.toml",
    "requirements.txt",
}
# CLI-only helpers .comfyignore leaves out (a registry install has no `comfy-llm` command).
CLI_ONLY = (
    "packages/comfy-node/src/comfy_llm/_cli/",
    "packages/modal-remote/src/comfy_llm_modal_remote/bench/",
)


def _tracked() -> list[str]:
    listed = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "ls-files", "-z"], capture_output=True, check=True
    ).stdout.decode("utf-8")
    return [name for name in listed.split("\0") if name and (REPO_ROOT / name).is_file()]


def test_archive_is_exactly_the_entry_sources_requirements_examples_and_documents(
    tmp_path: Path,
) -> None:
    names = build_archive(REPO_ROOT, tmp_path / "node.zip")
    expected = {
        name
        for name in _tracked()
        if name in TOP_LEVEL
        or name.startswith("example_workflows/")
        or (
            name.startswith("packages/")
            and name.split("/")[2] == "src"
            and not name.startswith(CLI_ONLY)
        )
    }
    assert set(names) == expected
    assert set(names) >= TOP_LEVEL
    sources = [name for name in names if name.startswith("packages/")]
    assert {name.split("/")[1] for name in sources} == {
        path.parent.name for path in REPO_ROOT.glob("packages/*/pyproject.toml")
    }
    assert [name for name in names if name.startswith("example_workflows/")]
    # the frontend extension (WEB_DIRECTORY) ships with the node's sources
    assert "packages/comfy-node/src/comfy_llm/_comfyui/web/comfy-llm.js" in names


def test_archive_leaves_out_tests_bench_testing_scripts_lock_and_ci(tmp_path: Path) -> None:
    names = build_archive(REPO_ROOT, tmp_path / "node.zip")
    for name in names:
        parts = name.split("/")
        assert parts[0] not in {"bench", "testing", "scripts", "tests", ".ci", "uv.lock"}, name
        assert not {"tests", "vllm_tests", "conftest.py"} & set(parts), name
        assert not name.startswith("."), name
    with zipfile.ZipFile(tmp_path / "node.zip") as archive:
        assert all(info.compress_type == zipfile.ZIP_DEFLATED for info in archive.infolist())


def test_archive_carries_every_package_whole(tmp_path: Path) -> None:
    """Unpacked as custom_nodes/<folder>, each packed src holds one import package with
    its __init__ and py.typed, and every module the workspace's package has (the
    tier, testing/comfyui_tier, installs exactly this set into a real ComfyUI)."""
    build_archive(REPO_ROOT, tmp_path / "node.zip")
    node = tmp_path / "custom_nodes" / "comfy-llm"
    with zipfile.ZipFile(tmp_path / "node.zip") as archive:
        archive.extractall(node)
    tracked = set(_tracked())
    assert (node / "__init__.py").is_file() and (node / "requirements.txt").is_file()
    for src in sorted((REPO_ROOT / "packages").glob("*/src")):
        packed = node / src.relative_to(REPO_ROOT)
        inits = list(packed.glob("*/__init__.py"))
        assert len(inits) == 1, packed
        assert (inits[0].parent / "py.typed").is_file(), packed
        modules = {p.relative_to(REPO_ROOT).as_posix() for p in src.rglob("*.py")}
        assert {m for m in modules if m in tracked and not m.startswith(CLI_ONLY)} == {
            p.relative_to(node).as_posix() for p in packed.rglob("*.py")
        }


def _module_files() -> dict[str, str]:
    """Workspace module name -> repository path, for every package's tracked sources."""
    modules = {}
    for name in _tracked():
        parts = name.split("/")
        if len(parts) > 3 and parts[0] == "packages" and parts[2] == "src" and name.endswith(".py"):
            dotted = parts[3:]
            dotted[-1] = dotted[-1].removesuffix(".py")
            if dotted[-1] == "__init__":
                dotted.pop()
            modules[".".join(dotted)] = name
    return modules


def _imports(module: str, path: str, known: dict[str, str]) -> set[str]:
    """Every workspace module ``module`` may import, lazy imports inside functions included."""
    tree = ast.parse((REPO_ROOT / path).read_text(encoding="utf-8"))
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        for name in names:
            parts = name.split(".")
            for end in range(len(parts), 0, -1):  # the module and its parent packages
                if ".".join(parts[:end]) in known:
                    found.add(".".join(parts[:end]))
    return found


def test_the_node_never_reaches_what_the_archive_leaves_out() -> None:
    """From ComfyUI's entry (comfy_llm.comfy_entrypoint), following every import a module
    holds, lazy ones included, each workspace module reached is in the archive: the CLI-only
    helpers .comfyignore drops (comfyui-link, modal-bench) are not on the node's path."""
    known = _module_files()
    packed = set(packed_files(REPO_ROOT))
    reached, queue = set(), ["comfy_llm", "comfy_llm._entrypoint"]
    while queue:
        module = queue.pop()
        if module in reached:
            continue
        reached.add(module)
        queue += _imports(module, known[module], known) - reached
    left_out = {module for module, path in known.items() if path not in packed}
    assert left_out, "the archive leaves out the CLI-only helpers"
    assert not reached & left_out, sorted(reached & left_out)
    assert "comfy_llm_modal_remote.client._transport" in reached  # the walk follows lazy imports
