"""scripts/registry-scan.py: each rule the registry's scan is reported to apply, on the
syntax tree, over the files the registry archive ships, with a reasoned allow-list."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location(
    "registry_scan", REPO_ROOT / "scripts" / "registry-scan.py"
)
assert _SPEC and _SPEC.loader
scan_module = importlib.util.module_from_spec(_SPEC)
sys.modules["registry_scan"] = scan_module  # dataclasses look their module up
_SPEC.loader.exec_module(scan_module)


def _rules(source: str) -> list[tuple[int, str]]:
    return [(hit.line, hit.rule) for hit in scan_module.scan_source("x.py", source)]


@pytest.mark.parametrize(
    ("source", "rule"),
    [
        ("import subprocess\n", "command-execution"),
        ("from subprocess import run\n", "command-execution"),
        ("import os\nos.system('ls')\n", "command-execution"),
        ("import os\nos.popen('ls')\n", "command-execution"),
        ("import pickle\n", "unsafe-deserialization"),
        ("from marshal import loads\n", "unsafe-deserialization"),
        ("import torch\ntorch.load(path)\n", "unsafe-deserialization"),
        ("x = eval('1')\n", "code-execution"),
        ("exec(code)\n", "code-execution"),
        ("__import__(name)\n", "code-execution"),
        ("import importlib\nimportlib.import_module(name)\n", "dynamic-import"),
        ("import socket\n", "network"),
        ("import urllib.request\n", "network"),
        ("client.connect(address)\n", "network"),
        ("import os\nos.environ['A'] = '1'\n", "environment-write"),
        ("import os\nos.environ.update(a='1')\n", "environment-write"),
        ("import os\nTOKEN = os.environ.get('HF_TOKEN')\n", "credential-access"),
        ("import sys\nsys.modules.get('torch')\n", "introspection"),
        ("import ctypes\n", "introspection"),
        ("load(repo, trust_remote_code=True)\n", "remote-code"),
        ("load(repo, trust_remote_code=flag)\n", "remote-code"),
    ],
)
def test_each_rule_is_found(source: str, rule: str) -> None:
    assert rule in {found for _, found in _rules(source)}


def _script_rules(source: str) -> list[tuple[int, str]]:
    return [(hit.line, hit.rule) for hit in scan_module.scan_script("x.js", source)]


@pytest.mark.parametrize(
    ("source", "rule"),
    [
        ("const f = eval(text);\n", "code-execution"),
        ("const f = new Function('a', body);\n", "code-execution"),
        ("setTimeout('run()', 10);\n", "code-execution"),
        ("const m = await import(url);\n", "dynamic-import"),
        ("fetch('https://example.com/x');\n", "network"),
        ("const s = new WebSocket(address);\n", "network"),
        ("box.innerHTML = text;\n", "html-injection"),
        ("box.insertAdjacentHTML('beforeend', text);\n", "html-injection"),
        ("document.write(text);\n", "html-injection"),
        ("const code = atob(blob);\n", "obfuscation"),
        ("const s = '\\x65\\x76\\x61\\x6c';\n", "obfuscation"),
    ],
)
def test_each_script_rule_is_found(source: str, rule: str) -> None:
    assert rule in {found for _, found in _script_rules(source)}


def test_harmless_script_and_comments_are_not_flagged() -> None:
    source = (
        'import { app } from "../../scripts/app.js";\n'
        "/* put innerHTML here?\n   never: eval( in a comment */\n"
        "box.textContent = text; // not innerHTML = x\n"
        "const reply = await api.fetchApi(`/history?max_items=32`);\n"
    )
    assert _script_rules(source) == []


def test_the_shipped_frontend_extension_is_clean() -> None:
    web = REPO_ROOT / "packages/comfy-node/src/comfy_llm/_comfyui/web"
    scripts = sorted(web.glob("*.js"))
    assert scripts
    for path in scripts:
        assert scan_module.scan_script(path.name, path.read_text(encoding="utf-8")) == []


def test_subprocess_pip_install_is_its_own_finding() -> None:
    source = (
        "import subprocess, sys\n"
        "subprocess.run([sys.executable, '-m', 'pip', 'install', 'x'])\n"
        "subprocess.run('pip install y', shell=True)\n"
    )
    assert [line for line, rule in _rules(source) if rule == "pip-install"] == [2, 3]


@pytest.mark.parametrize(
    "source",
    [
        "model.eval()\n",  # a method, not the builtin
        "import torch\ntorch.load(path, weights_only=True)\n",
        "import importlib\nimportlib.import_module('json')\n",
        "load(repo, trust_remote_code=False)\n",
        "import os\nos.environ.get('HOME')\n",
        "MESSAGE = 'install it with: pip install \"comfy-llm[cuda]\"'\n",  # a hint, nothing runs
        "import platform\nplatform.node()\n",
    ],
)
def test_harmless_code_is_not_flagged(source: str) -> None:
    assert _rules(source) == []


def _repo(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "repo"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def _run(root: Path, allow: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(REPO_ROOT / "scripts" / "registry-scan.py"), "--root", str(root)]
    if allow is not None:
        (root / "allow.toml").write_text(allow, encoding="utf-8")
        command += ["--allow", str(root / "allow.toml")]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


BASE = {
    "pyproject.toml": "[project]\nname = 'x'\n[tool.comfy]\nincludes = []\n",
    ".comfyignore": "/tests/\n",
    "__init__.py": "import sys\nX = sys.modules.get('torch')\n",
    "tests/test_x.py": "import subprocess\n",  # not shipped: not scanned
}
ALLOW = (
    "[[allow]]\npath = '__init__.py'\nrule = 'introspection'\nline = \"sys.modules.get('torch')\"\n"
    "reason = 'read-only lookup of an already imported module'\n"
)


def test_shipped_hits_fail_without_an_entry_and_pass_with_one(tmp_path: Path) -> None:
    root = _repo(tmp_path, BASE)
    refused = _run(root, allow="")
    assert refused.returncode == 1, refused.stdout
    assert "__init__.py:2: introspection" in refused.stdout and "NOT ALLOWED" in refused.stdout
    assert "tests/test_x.py" not in refused.stdout
    allowed = _run(root, allow=ALLOW)
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert "allowed: read-only lookup" in allowed.stdout


def test_a_stale_entry_fails(tmp_path: Path) -> None:
    root = _repo(tmp_path, {**BASE, "__init__.py": "X = 1\n"})
    result = _run(root, allow=ALLOW)
    assert result.returncode == 1
    assert "STALE allow-list entry" in result.stdout


def test_an_entry_without_a_reason_is_refused(tmp_path: Path) -> None:
    root = _repo(tmp_path, BASE)
    result = _run(root, allow=ALLOW.replace("read-only lookup of an already imported module", "ok"))
    assert result.returncode == 2
    assert "reason" in result.stderr


def test_the_allow_list_never_admits_what_the_standards_prohibit() -> None:
    entries = scan_module.load_allow_list(REPO_ROOT / "scripts" / "registry-scan-allow.toml")
    prohibited = {"command-execution", "pip-install", "unsafe-deserialization", "code-execution"}
    assert entries and not [entry for entry in entries if entry.rule in prohibited]
