"""The GPU image's CUDA toolchain, checked offline against the wheels the image installs.

No Modal, no GPU: the image's CUDA layout (``nvidia/cu13``) is assembled from
the exact pins of ``image_lock.json`` with uv (the image's own installer;
downloads come from PyPI once and then from uv's cache), the image
definition's own build steps run on it, and a kernel is compiled and linked
exactly as FlashInfer's JIT does it: nvcc with its flags, then the link rule
and link flags read from the pinned ``flashinfer/jit/cpp_ext.py`` itself.
Needs only ``uv``, ``c++`` and ``readelf`` here; the compiler is the pip nvcc.
"""

from __future__ import annotations

import ast
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

TOOLCHAIN_WHEELS = (
    "nvidia-cuda-runtime",
    "nvidia-cuda-nvcc",
    "nvidia-cuda-crt",
    "nvidia-nvvm",
    "nvidia-cuda-cccl",
    "flashinfer-python",
)
"""What the image's ``CUDA_HOME`` is made of, plus FlashInfer (its link line)."""

KERNEL = """\
#include <cuda.h>
#include <cuda_runtime.h>
__global__ void top_p(float* probs, float p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n && probs[i] < p) probs[i] = 0.f; }
extern "C" int sample(float* probs, int n) {
  CUdevice device; cuCtxGetDevice(&device);
  top_p<<<(n + 255) / 256, 256>>>(probs, 0.9f, n);
  return (int)cudaGetLastError(); }
"""


def _pins() -> dict[str, str]:
    from comfy_llm_modal_remote.wire._image import _lock

    return dict(pin.split("==", 1) for pin in _lock()["requirements"])


def _assemble(target: Path) -> Path:
    """The image's site-packages for the toolchain wheels, at their pinned versions."""
    pins = _pins()
    uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--no-deps", "--no-build", "--target", str(target)]
        + ["--python-platform", "x86_64-manylinux_2_28", "--python-version", "3.11"]
        + [f"{name}=={pins[name]}" for name in TOOLCHAIN_WHEELS],
        check=True,
        timeout=900,
    )
    return target


@pytest.fixture(scope="module")
def site_packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _assemble(tmp_path_factory.mktemp("image") / "site-packages")


def _image_commands() -> list[str]:
    """The GPU image's Dockerfile commands, from the app's own definition."""
    from comfy_llm_modal_remote.worker import _app
    from modal._utils.async_utils import synchronizer

    commands: list[str] = []
    pending = [synchronizer._translate_in(_app.image)]
    while pending:
        layer = pending.pop()
        nonlocals = inspect.getclosurevars(layer._load).nonlocals
        build = nonlocals.get("dockerfile_function")
        if build is not None:
            commands[:0] = build("2025.06").commands
        pending.extend((nonlocals.get("base_images") or {}).values())
        if nonlocals.get("base_image") is not None:
            pending.append(nonlocals["base_image"])
    return commands


def _image_cuda_home(commands: list[str]) -> str:
    (line,) = [c for c in commands if c.startswith("ENV CUDA_HOME=")]
    return line.removeprefix("ENV CUDA_HOME=")


def _run_image_steps(commands: list[str], image_home: str, home: Path) -> None:
    """Every ``RUN`` after the pip install, on the assembled layout (its paths swapped in)."""
    install = next(i for i, c in enumerate(commands) if "/.uv/uv pip install" in c)
    env = {**os.environ, "PATH": f"{home}/bin:{Path(sys.executable).parent}:{os.environ['PATH']}"}
    for command in commands[install + 1 :]:
        if command.startswith("RUN "):
            subprocess.run(
                ["bash", "-c", command.removeprefix("RUN ").replace(image_home, str(home))],
                check=True,
                env=env,
                timeout=300,
            )


def _flashinfer_link(site: Path) -> tuple[list[str], str]:
    """``ldflags`` and the ``link`` rule's command, read from the pinned cpp_ext.py."""
    source = (site / "flashinfer/jit/cpp_ext.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    (function,) = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and n.name == "generate_ninja_build_for_op"
    ]
    (assign,) = [
        n
        for n in ast.walk(function)
        if isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "ldflags" for t in n.targets)
    ]
    ldflags = ast.literal_eval(assign.value)
    rule = re.search(r'"rule link",\s*"  command = ([^"]+)"', source)
    assert rule is not None, "FlashInfer's link rule moved: read cpp_ext.py again"
    return ldflags, rule.group(1)


def _layout(site: Path, target: Path) -> Path:
    """A private copy of the image's ``nvidia/cu13`` (the build steps change it)."""
    shutil.copytree(site / "nvidia/cu13", target / "nvidia/cu13", symlinks=True)
    return target / "nvidia/cu13"


def _compile_and_link(site: Path, home: Path, work: Path) -> subprocess.CompletedProcess[str]:
    """FlashInfer's JIT for one module: nvcc (its flags, Hopper SASS), then its link rule."""
    from comfy_llm_modal_remote.wire._cuda_toolchain import FLASHINFER_CUDA_FLAGS

    work.mkdir(parents=True, exist_ok=True)
    (work / "sampling.cu").write_text(KERNEL, encoding="utf-8")
    subprocess.run(
        [
            str(home / "bin/nvcc"),
            *FLASHINFER_CUDA_FLAGS,
            *("-isystem", str(home / "include"), "-gencode=arch=compute_90a,code=sm_90a"),
            *("-c", str(work / "sampling.cu"), "-o", str(work / "sampling.cuda.o")),
        ],
        check=True,
        timeout=300,
    )
    ldflags, rule = _flashinfer_link(site)
    command = (
        rule.replace("$cxx", os.environ.get("CXX", "c++"))
        .replace("$in", str(work / "sampling.cuda.o"))
        .replace("$ldflags", " ".join(ldflags))
        .replace("$out", str(work / "sampling.so"))
        .replace("$cuda_home", str(home))
    )
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=300)


def _needed(library: Path) -> list[str]:
    dynamic = subprocess.run(
        ["readelf", "-d", str(library)], capture_output=True, text=True, check=True
    ).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)


def _symbols(library: Path, *, undefined: bool) -> set[str]:
    flag = "--undefined-only" if undefined else "--defined-only"
    listed = subprocess.run(
        ["nm", "-D", flag, str(library)], capture_output=True, text=True, check=True
    ).stdout
    return {line.split()[-1].split("@")[0] for line in listed.splitlines() if line.strip()}


def test_flashinfer_links_a_jit_module_on_the_image_layout(
    site_packages: Path, tmp_path: Path
) -> None:
    """The image's build steps, then FlashInfer's compile and link: it must link.

    On the image before this change (a bare ``nvcc --version`` step) the link
    failed with ``cannot find -lcudart``, as on Modal.
    """
    home = _layout(site_packages, tmp_path / "site-packages")
    commands = _image_commands()
    _run_image_steps(commands, _image_cuda_home(commands), home)
    linked = _compile_and_link(site_packages, home, tmp_path / "jit")
    assert linked.returncode == 0, linked.stderr
    module = tmp_path / "jit/sampling.so"
    runtime = next(p.name for p in (home / "lib").glob("libcudart.so.[0-9]*"))
    assert {runtime, "libcuda.so.1"} <= set(_needed(module))
    # Everything it calls is in the image's libcudart or the driver API the stub stands for.
    provided = _symbols(home / "lib" / runtime, undefined=False) | _symbols(
        home / "lib/stubs/libcuda.so", undefined=False
    )
    cuda_calls = {s for s in _symbols(module, undefined=True) if s.startswith(("cu", "__cuda"))}
    assert cuda_calls and cuda_calls <= provided, cuda_calls - provided


def test_the_bare_pip_layout_cannot_link_what_flashinfer_builds(
    site_packages: Path, tmp_path: Path
) -> None:
    """Review finding 1, reproduced: ``nvcc`` works, FlashInfer's link does not."""
    home = _layout(site_packages, tmp_path / "site-packages")
    assert subprocess.run([str(home / "bin/nvcc"), "--version"], check=False).returncode == 0
    linked = _compile_and_link(site_packages, home, tmp_path / "jit")
    assert linked.returncode != 0
    assert "cannot find -lcudart" in linked.stderr


def test_the_link_flags_the_image_proves_are_flashinfers(site_packages: Path) -> None:
    """The build step's probe uses the pinned FlashInfer's own link flags (a new wheel that
    changes them fails here, before an image is built)."""
    from comfy_llm_modal_remote.wire._cuda_toolchain import FLASHINFER_LDFLAGS

    ldflags, rule = _flashinfer_link(site_packages)
    assert tuple(ldflags) == FLASHINFER_LDFLAGS
    assert rule == "$cxx $in $ldflags -o $out"


def test_nvcc_is_the_cuda_runtimes_minor_release(site_packages: Path) -> None:
    """nvcc's host stubs call the libcudart they link against, and Modal's R580 driver is
    CUDA 13.0: the compiler may not be newer than the runtime (review finding 1, PTX)."""
    pins: dict[str, Any] = _pins()
    runtime = tuple(pins["nvidia-cuda-runtime"].split(".")[:2])
    for name in ("nvidia-cuda-nvcc", "nvidia-cuda-crt", "nvidia-nvvm"):
        assert tuple(pins[name].split(".")[:2]) == runtime, (name, pins[name])
    version = subprocess.run(
        [str(site_packages / "nvidia/cu13/bin/nvcc"), "--version"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"release {'.'.join(runtime)}," in version
