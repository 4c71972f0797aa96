"""What to install is said in one place, and says a command that works from this install.

Review D5 (issue 31): the node's Modal error and tooltip told every user to
``pip install "comfy-llm[modal]"``, a name not on PyPI, so the command failed
for a registry install and an unclaimed name invited dependency confusion.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import shlex
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
from comfy_llm_core import _install, install_command
from comfy_llm_core._install import EXTRA_REQUIREMENTS
from packaging.requirements import Requirement

REPO_ROOT = Path(__file__).resolve().parents[1]
THE_ONE_PLACE = REPO_ROOT / "packages/core/src/comfy_llm_core/_install.py"


def _strings_outside_docstrings(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                docstrings.add(id(value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_only_core_says_what_to_install() -> None:
    """Every install command comes from install_command (an extra's bare name may be said)."""
    found = []
    for path in sorted(REPO_ROOT.glob("packages/*/src/**/*.py")):
        if path == THE_ONE_PLACE:
            continue
        for line, text in _strings_outside_docstrings(path):
            if "pip install" in text:
                found.append(f"{path.relative_to(REPO_ROOT)}:{line}: {text.strip()[:70]}")
    assert found == [], "ask comfy_llm_core.install_command instead:\n" + "\n".join(found)


def test_extra_requirements_are_the_packages_own() -> None:
    def project(folder: str) -> dict:
        return tomllib.loads((REPO_ROOT / "packages" / folder / "pyproject.toml").read_text())[
            "project"
        ]

    (modal,) = [d for d in project("modal-remote")["dependencies"] if d.startswith("modal")]
    assert EXTRA_REQUIREMENTS["modal"] == (modal,)
    (vllm,) = project("backend-cuda")["optional-dependencies"]["vllm"]
    requirement = Requirement(vllm)
    requirement.marker = None
    assert [str(Requirement(r)) for r in EXTRA_REQUIREMENTS["vllm"]] == [str(requirement)]
    # The platform engines come with requirements.txt, which a clone installs anyway.
    node_extras = project("comfy-node")["optional-dependencies"]
    assert set(node_extras) <= set(EXTRA_REQUIREMENTS)
    bnb = project("backend-cuda")["optional-dependencies"]["bitsandbytes"]
    assert EXTRA_REQUIREMENTS["bitsandbytes"] == tuple(bnb)
    (llamacpp,) = project("backend-llamacpp")["optional-dependencies"]["engine"]
    assert EXTRA_REQUIREMENTS["llamacpp"] == (llamacpp,)
    assert EXTRA_REQUIREMENTS["apple"] == EXTRA_REQUIREMENTS["cuda"] == ()
    requirements = (REPO_ROOT / "requirements.txt").read_text()
    assert "mlx-vlm==" in requirements and "transformers>=" in requirements
    # The README says the same for an install into custom_nodes/.
    readme = (REPO_ROOT / "README.md").read_text()
    assert f'uv pip install --python ../.venv/bin/python\n"{modal}"' in readme


def test_a_registry_install_is_told_to_install_modal_itself(tmp_path: Path) -> None:
    """The archive in custom_nodes/ (packages/*/src on the path, no comfy-llm installed)."""
    sources = [str(p) for p in sorted(REPO_ROOT.glob("packages/*/src"))]
    script = (
        "import json, sys\n"
        "sys.modules['modal'] = None  # the Modal client is not installed\n"
        "from comfy_llm_modal_remote import ModalUnavailableError, check_modal_available\n"
        "from comfy_llm_core import install_command\n"
        "try:\n"
        "    check_modal_available()\n"
        "except ModalUnavailableError as error:\n"
        "    print(json.dumps([str(error), install_command('modal'), install_command('cuda')]))\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([*sources, sysconfig.get_paths()["purelib"]]),
    }
    done = subprocess.run(
        [sys.executable, "-S", "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    message, modal, cuda = json.loads(done.stdout)
    assert "comfy-llm[" not in message and modal in message and "modal token new" in message
    python = shlex.quote(sys.executable)
    assert modal in (
        f"{python} -m pip install 'modal>=1.6,<2'",
        f"uv pip install --python {python} 'modal>=1.6,<2'",
    )
    assert cuda.endswith(f" -r {shlex.quote(str(REPO_ROOT / 'requirements.txt'))}")


def test_an_install_of_the_wheels_is_told_its_own_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import comfy_llm_core

    monkeypatch.setattr(_install, "_CLONE_ROOT", tmp_path)  # site-packages: no clone around
    original = importlib.metadata.version

    def pip_missing(name: str) -> str:
        if name == "pip":
            raise importlib.metadata.PackageNotFoundError(name)
        return original(name)

    python = shlex.quote(sys.executable)
    version = comfy_llm_core.__version__
    monkeypatch.setattr(importlib.metadata, "version", pip_missing)
    assert (
        install_command("modal")
        == f"uv pip install --python {python} 'comfy-llm[modal]=={version}'"
    )
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "26.0")
    assert install_command("apple") == f"{python} -m pip install 'comfy-llm[apple]=={version}'"
    # ComfyUI's own interpreter, for `comfy-llm comfyui-link`: it must import comfy_llm itself.
    other = "/home/a user/ComfyUI/.venv/bin/python"
    assert install_command("cuda", python=other, wheels=True) == (
        f"uv pip install --python '{other}' 'comfy-llm[cuda]=={version}'"
    )
    with pytest.raises(KeyError):
        install_command("rocm")
