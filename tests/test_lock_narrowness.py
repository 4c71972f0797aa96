"""The lock proves each extra installs only what its platform needs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

MACOS_ARM64 = {
    "sys_platform": "darwin",
    "platform_system": "Darwin",
    "platform_machine": "arm64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "python_version": "3.11",
    "python_full_version": "3.11.7",
}
LINUX_X86_64 = {
    **MACOS_ARM64,
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
}


def _export(repo_root: Path, *extras: str) -> list[str]:
    uv = shutil.which("uv")
    assert uv, "uv must be on PATH (it is in the dev group)"
    args = [uv, "export", "--frozen", "--package", "comfy-llm", "--no-dev", "--no-hashes"]
    args += ["--no-emit-workspace", "--no-header", "--no-annotate"]
    for extra in extras:
        args += ["--extra", extra]
    done = subprocess.run(args, cwd=repo_root, capture_output=True, text=True, check=True)
    return [line for line in done.stdout.splitlines() if line and not line.startswith(("#", "-"))]


def _installed(lines: list[str], environment: dict[str, str]) -> set[str]:
    names = set()
    for line in lines:
        requirement = Requirement(line)
        marker: Marker | None = requirement.marker
        if marker is None or marker.evaluate({**environment, "extra": ""}):
            names.add(canonicalize_name(requirement.name))
    return names


@pytest.fixture(scope="module")
def apple_on_mac(request: pytest.FixtureRequest) -> set[str]:
    root = Path(request.config.rootpath)
    return _installed(_export(root, "apple"), MACOS_ARM64)


@pytest.fixture(scope="module")
def cuda_on_linux(request: pytest.FixtureRequest) -> set[str]:
    root = Path(request.config.rootpath)
    return _installed(_export(root, "cuda"), LINUX_X86_64)


def test_apple_extra_on_macos_arm64_has_mlx_vlm_and_no_torch(apple_on_mac: set[str]) -> None:
    assert {"mlx-vlm", "mlx", "huggingface-hub", "psutil"} <= apple_on_mac
    assert not apple_on_mac & {"torch", "vllm", "modal", "torchvision", "triton"}
    assert not any(name.startswith("nvidia-") for name in apple_on_mac)


def test_cuda_extra_on_linux_has_torch_and_transformers_and_no_mlx(
    cuda_on_linux: set[str],
) -> None:
    assert {"torch", "transformers", "huggingface-hub"} <= cuda_on_linux
    assert not cuda_on_linux & {"mlx", "mlx-vlm", "mlx-cpu", "mlx-metal", "modal", "vllm"}


def test_apple_extra_installs_nothing_mlx_on_linux(request: pytest.FixtureRequest) -> None:
    linux = _installed(_export(Path(request.config.rootpath), "apple"), LINUX_X86_64)
    assert not linux & {"mlx", "mlx-vlm", "torch"}


def test_modal_extra_adds_modal_without_engines(request: pytest.FixtureRequest) -> None:
    linux = _installed(_export(Path(request.config.rootpath), "modal"), LINUX_X86_64)
    assert "modal" in linux
    assert not linux & {"mlx", "mlx-vlm", "vllm"}


def test_apple_and_modal_on_macos_arm64_install_modal_and_no_torch_or_transformers(
    request: pytest.FixtureRequest,
) -> None:
    """Review r2 finding 3: [modal] shipped backend-cuda's sources by depending on it, which
    pulled torch and Transformers 5 into a Mac's ComfyUI; its sources now ship as data."""
    root = Path(request.config.rootpath)
    mac = _installed(_export(root, "apple", "modal"), MACOS_ARM64)
    assert {"modal", "mlx-vlm", "huggingface-hub"} <= mac
    assert not mac & {"torch", "torchvision", "triton", "vllm"}
    assert not any(name.startswith("nvidia-") for name in mac)
    # What [modal] adds to an [apple] install: Modal's client, nothing of an engine
    # (mlx-vlm itself brings its own Transformers on a Mac).
    added = mac - _installed(_export(root, "apple"), MACOS_ARM64)
    assert "modal" in added
    assert not added & {"transformers", "safetensors", "torch", "tokenizers", "accelerate"}
