"""comfy-llm installed from a package index: the README's commands, the extras' narrowness."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import zipfile
from email.parser import HeaderParser
from pathlib import Path

import comfy_llm
import pytest
from comfy_llm_testworld.checkpoints import write_checkpoint
from comfy_llm_testworld.wheel_index import serve_wheels
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO_ROOT = Path(__file__).resolve().parents[2]
VERSION = comfy_llm.__version__
MAC = "aarch64-apple-darwin"
LINUX = "x86_64-manylinux_2_28"
PYPI = "https://pypi.org/simple"


def readme_commands(name: str) -> list[str]:
    """The commands of the README's bash block marked ``<!-- install-tier: name -->``."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(rf"<!-- install-tier: {name} -->\s*```bash\n(.*?)```", readme, re.S)
    assert match, f"README.md has no bash block marked install-tier: {name}"
    lines = [line.split("  #", 1)[0].strip() for line in match.group(1).splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def fake_comfyui(home: Path, uv: str, env: dict[str, str]) -> Path:
    """``~/ComfyUI`` with its own fresh venv (uv-made: no pip), as the README assumes."""
    comfyui = home / "ComfyUI"
    (comfyui / "comfy").mkdir(parents=True)
    (comfyui / "custom_nodes").mkdir()
    (comfyui / "main.py").write_text("# ComfyUI\n")
    subprocess.run(
        [uv, "venv", "--quiet", "--python", sys.executable, str(comfyui / ".venv")],
        env=env,
        check=True,
    )
    return comfyui


def _metadata(wheel: Path) -> dict[str, list[str]]:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        headers = HeaderParser().parsestr(archive.read(name).decode("utf-8"))
    return {
        key: headers.get_all(key) or []
        for key in ("Name", "Version", "Requires-Dist", "Classifier")
    }


def _run(
    command: list[str] | str, env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    args = ["bash", "-c", command] if isinstance(command, str) else command
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)


def _ok(command: list[str] | str, env: dict[str, str], cwd: Path) -> str:
    done = _run(command, env, cwd)
    assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done.stdout


def _versions(python: Path, env: dict[str, str], cwd: Path) -> dict[str, str]:
    out = _ok([str(python.parent / "comfy-llm"), "--version"], env, cwd).splitlines()
    assert out[0].startswith(f"comfy-llm {VERSION} (Python 3.11"), out
    return {"comfy-llm": VERSION, **dict(line.split() for line in out[1:])}


def _tiny_run(python: Path, env: dict[str, str], home: Path) -> dict:
    checkpoint = write_checkpoint("qwen3_5", home / "models" / "Qwen3.5-tiny", scripted=True)
    out = _ok(
        [
            str(python.parent / "comfy-llm"),
            "run",
            "--model",
            str(checkpoint),
            "--prompt",
            "hi",
            "--target",
            "local_cpu",
            "--temperature",
            "0",
            "--max-new-tokens",
            "16",
            "--storage-root",
            str(home / "storage"),
            "--json",
        ],
        env,
        home,
    )
    return json.loads(out)


def test_every_wheel_requires_its_siblings_at_its_version_from_an_index(dist: Path) -> None:
    wheels = sorted(dist.glob("*.whl"))
    # every workspace member: the packages and the test world
    members = len(list((REPO_ROOT / "packages").glob("*/pyproject.toml"))) + 1
    assert len(wheels) == members and len(list(dist.glob("*.tar.gz"))) == members
    for wheel in wheels:
        metadata = _metadata(wheel)
        assert metadata["Version"] == [VERSION], wheel.name
        for text in metadata["Requires-Dist"]:
            requirement = Requirement(text)
            assert requirement.url is None, f"{wheel.name}: a path or URL in built metadata: {text}"
            if canonicalize_name(requirement.name).startswith("comfy-llm"):
                assert str(requirement.specifier) == f"=={VERSION}", f"{wheel.name}: {text}"
        private = "Private :: Do Not Upload" in metadata["Classifier"]
        assert private == (metadata["Name"] == ["comfy-llm-testworld"]), wheel.name


def test_readme_install_then_version_a_tiny_offline_run_and_the_modal_advice(
    tmp_path: Path, uv: str, uv_env: dict[str, str]
) -> None:
    home = tmp_path / "home"
    env = {**uv_env, "HOME": str(home)}
    comfyui = fake_comfyui(home, uv, env)
    for command in readme_commands("local"):
        _ok(command, env, home)
    python = comfyui / ".venv" / "bin" / "python"
    versions = _versions(python, env, home)
    assert {"comfy-llm-core", "comfy-llm-backend-cuda"} <= set(versions)
    assert "comfy-llm-modal-remote" not in versions and set(versions.values()) == {VERSION}
    assert (comfyui / "custom_nodes" / "comfy_llm_link" / "__init__.py").is_file()
    answer = _tiny_run(python, env, home)
    assert answer["response"] == "answer"
    assert answer["metadata"]["comfy_llm_versions"]["comfy-llm-backend-cuda"] == VERSION
    # Without the Modal extra, run_on_modal says what to install: from this index, it works.
    refused = _run(
        [str(python), "-c", "from comfy_llm._remote import modal_remote; modal_remote()"], env, home
    )
    assert refused.returncode == 1
    (advice,) = re.findall(r"`([^`]*install[^`]*)`", refused.stderr.splitlines()[-1])
    assert (
        advice
        == f"uv pip install --python {shlex.quote(str(python))} 'comfy-llm[modal]=={VERSION}'"
    )
    _ok(advice, env, home)
    _ok(
        [str(python), "-c", "from comfy_llm_modal_remote import code_fingerprint as f; f()"],
        env,
        home,
    )


def test_readme_modal_install_then_version_and_an_offline_image_check(
    tmp_path: Path, uv: str, uv_env: dict[str, str]
) -> None:
    home = tmp_path / "home"
    env = {**uv_env, "HOME": str(home)}
    comfyui = fake_comfyui(home, uv, env)
    (command,) = readme_commands("modal")
    _ok(command, env, home)
    python = comfyui / ".venv" / "bin" / "python"
    versions = _versions(python, env, home)
    assert {"comfy-llm-core", "comfy-llm-modal-remote"} <= set(versions)
    # Offline: every file the Modal image mounts is installed here (the deploy's own check).
    script = "from comfy_llm_modal_remote import code_fingerprint; print(code_fingerprint())"
    assert re.fullmatch(r"[0-9a-f]{64}\n", _ok([str(python), "-c", script], env, home))


_RESOLVED: dict[tuple[str, str], subprocess.CompletedProcess[str]] = {}


def _compile(
    uv: str, requirement: str, platform: str, env: dict[str, str], *options: str
) -> subprocess.CompletedProcess[str]:
    """The resolution of ``requirement`` for ``platform`` (nothing installed)."""
    if platform == MAC:
        env = {**env, "MACOSX_DEPLOYMENT_TARGET": "14.0"}  # mlx 0.32.4: macOS >= 14 wheels only
    env = {key: value for key, value in env.items() if key != "UV_CONSTRAINT"}  # newest, as a user
    return subprocess.run(
        [
            uv,
            "pip",
            "compile",
            "--python-version",
            "3.11",
            "--python-platform",
            platform,
            "--emit-index-annotation",
            "--no-header",
            "--no-annotate",
            *options,
            "-",
        ],
        input=f"{requirement}\n",
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _sources(done: subprocess.CompletedProcess[str]) -> dict[str, tuple[str, str]]:
    """``{name: (version, index it came from)}`` of a successful resolution."""
    assert done.returncode == 0, done.stderr[-4000:]
    found: dict[str, tuple[str, str]] = {}
    name = version = ""
    for line in done.stdout.splitlines():
        if line and not line.startswith(" "):
            requirement = Requirement(line)
            name = canonicalize_name(requirement.name)
            version = str(requirement.specifier).removeprefix("==")
        elif line.strip().startswith("# from "):
            found[name] = (version, line.strip().removeprefix("# from "))
    return found


MAC_ENGINE_FREE = {"torch", "triton"}
CASES = [
    pytest.param(
        "apple", MAC, {"mlx-vlm", "mlx", "mlx-metal"}, {"torch", "triton", "vllm"}, id="apple-mac"
    ),
    pytest.param(
        "apple", LINUX, set(), {"mlx", "mlx-vlm", "torch", "transformers"}, id="apple-linux"
    ),
    pytest.param(
        "cuda",
        LINUX,
        {"torch", "transformers"},
        {"mlx", "mlx-vlm", "modal", "vllm"},
        id="cuda-linux",
    ),
    # 8-bit / NF4 at load (issue 30): bitsandbytes with what Transformers' quantizers
    # import, over the Transformers engine; no vLLM, no MLX.
    pytest.param(
        "bitsandbytes",
        LINUX,
        {"bitsandbytes", "accelerate", "torch", "transformers"},
        {"mlx", "mlx-vlm", "modal", "vllm"},
        id="bitsandbytes-linux",
    ),
    pytest.param("modal", LINUX, {"modal"}, {"mlx", "mlx-vlm", "vllm"}, id="modal-linux"),
    pytest.param("modal", MAC, {"modal"}, {"mlx", "mlx-vlm", "vllm"}, id="modal-mac"),
    # The intended rule: [modal] is Modal's client and the worker's sources, no engine.
    pytest.param(
        "modal",
        LINUX,
        {"modal"},
        {"torch", "transformers"},
        id="modal-linux-no-engine",
    ),
    pytest.param(
        "apple,modal",
        MAC,
        {"mlx-vlm", "modal"},
        {"torch", "triton"},
        id="apple-modal-mac-no-torch",
    ),
]


@pytest.mark.parametrize(("extras", "platform", "present", "absent"), CASES)
def test_each_extra_resolves_from_the_index_narrowly(
    uv: str,
    uv_env: dict[str, str],
    index_url: str,
    extras: str,
    platform: str,
    present: set[str],
    absent: set[str],
) -> None:
    key = (extras, platform)  # one resolution per pair, for each rule asserted on it
    if key not in _RESOLVED:
        _RESOLVED[key] = _compile(uv, f"comfy-llm[{extras}]", platform, uv_env)
    resolved = _sources(_RESOLVED[key])
    names = set(resolved)
    assert present <= names, sorted(names)
    assert not absent & names, sorted(absent & names)
    if platform == MAC:
        assert not [name for name in names if name.startswith("nvidia-")]
    ours = {name: source for name, (_, source) in resolved.items() if name.startswith("comfy-llm")}
    assert "comfy-llm" in ours and set(ours.values()) == {index_url}
    assert {source for name, (_, source) in resolved.items() if name not in ours} == {PYPI}


def _wheel(folder: Path, name: str, version: str) -> None:
    """A wheel that holds only its metadata: what a squatter's upload needs to resolve."""
    dist = f"{name.replace('-', '_')}-{version}"
    files = {
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist}.dist-info/RECORD": "",
    }
    with zipfile.ZipFile(folder / f"{dist}-py3-none-any.whl", "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)


def test_no_other_index_can_supply_a_name_of_ours(
    tmp_path: Path, uv: str, uv_env: dict[str, str], index_url: str
) -> None:
    """A squatter's index as the default one: it offers a higher version, and a name we lack."""
    squatter = tmp_path / "squatter"
    squatter.mkdir()
    _wheel(squatter, "comfy-llm-core", "99.0.0")
    _wheel(squatter, "comfy-llm-lost", "1.0.0")
    with serve_wheels(squatter) as squatter_url:
        default = ("--default-index", squatter_url)
        # Our index first: its names come only from it, whatever the default index offers.
        resolved = _sources(_compile(uv, "comfy-llm-reasoning", LINUX, uv_env, *default))
        assert resolved == {
            "comfy-llm-core": (VERSION, index_url),
            "comfy-llm-reasoning": (VERSION, index_url),
        }
        lost = _compile(uv, "comfy-llm-lost", LINUX, uv_env, *default)
        assert lost.returncode != 0 and "comfy-llm-lost" in lost.stderr
        # The control: without our index first, the squatter's higher version wins.
        alone = {key: value for key, value in uv_env.items() if key != "UV_INDEX"}
        assert _sources(_compile(uv, "comfy-llm-core", LINUX, alone, *default)) == {
            "comfy-llm-core": ("99.0.0", squatter_url)
        }
