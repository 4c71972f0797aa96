"""Both install paths end with the node importable the way ComfyUI imports it."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

import pytest
from comfy_llm._cli import main

REPO_ROOT = Path(__file__).resolve().parents[1]


def _load_like_comfyui(init_file: Path, module_name: str) -> ModuleType:
    # ComfyUI's load_custom_node: a spec from the folder's __init__.py, run it.
    spec = importlib.util.spec_from_file_location(
        module_name, init_file, submodule_search_locations=[str(init_file.parent)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(module_name, None)
    return module


def _node_ids(module: ModuleType) -> list[str]:
    extension = asyncio.run(module.comfy_entrypoint())
    nodes = asyncio.run(extension.get_node_list())
    return [node.define_schema().node_id for node in nodes]


def _fake_comfyui(root: Path) -> Path:
    (root / "comfy").mkdir(parents=True)
    (root / "main.py").write_text("# ComfyUI\n")
    (root / "custom_nodes").mkdir()
    return root


def test_clone_into_custom_nodes_exposes_the_entrypoint(comfyui_standin: Path) -> None:
    module = _load_like_comfyui(REPO_ROOT / "__init__.py", "comfy-llm-clone")
    assert _node_ids(module) == ["ModalLLM", "ComfyLLMCaption"]


def test_clone_without_installed_packages_finds_workspace_sources(tmp_path: Path) -> None:
    # -S skips site processing, so the editable installs' .pth files do not
    # apply: comfy_llm is importable only through the clone's own fallback.
    site_packages = sysconfig.get_paths()["purelib"]
    init = str(REPO_ROOT / "__init__.py")
    script = (
        "import asyncio, importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('clone', {init!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "ext = asyncio.run(module.comfy_entrypoint())\n"
        "nodes = asyncio.run(ext.get_node_list())\n"
        "node_id = nodes[0].define_schema().node_id\n"
        "print(json.dumps([node_id, module.comfy_entrypoint.__module__]))\n"
    )
    from comfy_llm_testworld.comfyui_standin import standin_path

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(standin_path()), site_packages]),
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    done = subprocess.run(
        [sys.executable, "-S", "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    node_id, module_name = json.loads(done.stdout)
    assert node_id == "ModalLLM"
    assert module_name == "comfy_llm._entrypoint"


def test_a_registry_install_runs_its_own_packages_over_another_install(tmp_path: Path) -> None:
    """Another comfy-llm in ComfyUI's Python (say an older wheel) never mixes in."""
    stale = tmp_path / "site-packages"
    (stale / "comfy_llm").mkdir(parents=True)
    (stale / "comfy_llm" / "__init__.py").write_text('__version__ = "0.0.1"\n')
    (stale / "comfy_llm_core").mkdir()
    (stale / "comfy_llm_core" / "__init__.py").write_text('__version__ = "0.0.1"\n')
    site_packages = sysconfig.get_paths()["purelib"]
    init = str(REPO_ROOT / "__init__.py")
    script = (
        "import asyncio, importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('clone', {init!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "nodes = asyncio.run(asyncio.run(module.comfy_entrypoint()).get_node_list())\n"
        "import comfy_llm, comfy_llm_core\n"
        "print(json.dumps([comfy_llm.__file__, comfy_llm_core.__version__]))\n"
    )
    from comfy_llm_testworld.comfyui_standin import standin_path

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(standin_path()), str(stale), site_packages]),
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    done = subprocess.run(
        [sys.executable, "-S", "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    node_file, core_version = json.loads(done.stdout)
    assert Path(node_file).is_relative_to(REPO_ROOT / "packages" / "comfy-node" / "src")
    import comfy_llm_core

    assert core_version == comfy_llm_core.__version__ != "0.0.1"


def test_comfyui_link_writes_an_importable_shim(
    tmp_path: Path, comfyui_standin: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    comfyui = _fake_comfyui(tmp_path / "ComfyUI")
    assert main(["comfyui-link", str(comfyui), "--json"]) == 0
    shim = Path(json.loads(capsys.readouterr().out)["shim"])
    assert shim == comfyui / "custom_nodes" / "comfy_llm_link" / "__init__.py"
    assert _node_ids(_load_like_comfyui(shim, "comfy_llm_link")) == ["ModalLLM", "ComfyLLMCaption"]
    # Re-running replaces its own shim without complaint.
    assert main(["comfyui-link", str(comfyui)]) == 0


def test_comfyui_link_refuses_a_folder_that_is_not_comfyui(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["comfyui-link", str(tmp_path)]) == 2  # fix the input
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert str(tmp_path) in err and "main.py" in err


def test_comfyui_link_leaves_a_foreign_folder_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    comfyui = _fake_comfyui(tmp_path / "ComfyUI")
    foreign = comfyui / "custom_nodes" / "comfy_llm_link"
    foreign.mkdir()
    (foreign / "__init__.py").write_text("# someone else's\n")
    assert main(["comfyui-link", str(comfyui)]) == 2  # fix the input
    assert "--force" in capsys.readouterr().err
    assert (foreign / "__init__.py").read_text() == "# someone else's\n"
    assert main(["comfyui-link", str(comfyui), "--force"]) == 0


def test_requirements_txt_covers_every_third_party_dependency() -> None:
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    text = (REPO_ROOT / "requirements.txt").read_text(encoding="utf-8")
    lines = [line.split(" #")[0].strip() for line in text.splitlines()]
    listed = {
        canonicalize_name(Requirement(line).name) for line in lines if line and line[0] != "#"
    }
    needed = set()
    for folder in (
        "profiles",
        "staging",
        "reasoning",
        "inputs",
        "residency",
        "comfy-node",
        "backend-mlx",
        "backend-cuda",
    ):
        data = tomllib.loads((REPO_ROOT / "packages" / folder / "pyproject.toml").read_text())
        for dependency in data["project"]["dependencies"]:
            name = canonicalize_name(Requirement(dependency).name)
            if not name.startswith("comfy-llm") and name not in {"torch", "torchvision"}:
                needed.add(name)
    assert needed <= listed, f"missing from requirements.txt: {sorted(needed - listed)}"


def test_comfyui_link_refuses_an_interpreter_that_cannot_import_the_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # ComfyUI with its own venv that lacks comfy_llm: a shim there would fail silently.
    comfyui = _fake_comfyui(tmp_path / "ComfyUI")
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(comfyui / ".venv")], check=True
    )
    assert main(["comfyui-link", str(comfyui)]) == 2  # fix the input
    err = capsys.readouterr().err
    assert "cannot import comfy_llm" in err and str(comfyui / ".venv") in err
    assert "uv pip install --python" in err
    assert not (comfyui / "custom_nodes" / "comfy_llm_link").exists()
    # The interpreter that has it installed is accepted when named.
    assert main(["comfyui-link", str(comfyui), "--python", sys.executable]) == 0
