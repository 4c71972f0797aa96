"""Compile caches under one namespace per accelerator stack.

``VLLM_CACHE_ROOT``, ``TORCHINDUCTOR_CACHE_DIR``, ``TRITON_CACHE_DIR``,
``CUDA_CACHE_PATH`` and ``FLASHINFER_WORKSPACE_BASE`` point below
``<root>/<namespace>/``, where the namespace is derived from the GPU type,
the Python version, the torch build and the vLLM version. Compatible stacks
(an ordinary source redeploy) share the artifacts; a change of any of the
four never reads another stack's.

Two roots. vLLM's own cache (``VLLM_CACHE_ROOT``) is what a new container
reads back: compiled graphs under ``torch_compile_cache/<hash>/``, each with
the Inductor output vLLM keeps beside it (vLLM points
``TORCHINDUCTOR_CACHE_DIR`` at ``<hash>/inductor_cache`` itself while it
compiles: vllm/compilation/compiler_interface.py ``InductorAdaptor.initialize_cache``
and vllm/compilation/decorators.py). It lives under the shared root,
``COMFY_MODAL_LLM_COMPILE_CACHE_ROOT`` (the Modal worker mounts its
compile-cache Volume there). Triton's cache, Inductor's process-wide default
and the CUDA driver's JIT cache stay on the process's own disk (the user
cache, ``<user cache>/comfy-llm/compile-cache``): Triton dlopens its launcher
``.so`` straight from its cache (triton/runtime/build.py), and a file held
open under a Volume mount makes ``Volume.commit()``'s reload fail
(modal volume.py:902-935). vLLM keeps a Triton cache the caller set
(``initialize_cache`` only fills in its own when ``TRITON_CACHE_DIR`` is unset).
FlashInfer's JIT cache (``FLASHINFER_WORKSPACE_BASE``) stays local for the
same reason; a Modal container that must not rebuild it needs the kernels in
its image (``flashinfer-jit-cache``).
Without ``COMFY_MODAL_LLM_COMPILE_CACHE_ROOT`` both roots are the user cache.

The variables reach the engine-core process only (``_process``): this
process's environment, ComfyUI's, is never changed. The GPU name comes from
vLLM's platform layer (NVML on CUDA), which creates no CUDA context here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any, Final

from comfy_llm_core import env_str

__all__ = [
    "CACHE_ENV_DIRS",
    "COMPILE_CACHE_ROOT_ENV",
    "CacheStack",
    "CompileCache",
    "apply_compile_cache",
    "compile_cache_root",
    "current_stack",
]

COMPILE_CACHE_ROOT_ENV: Final = "COMFY_MODAL_LLM_COMPILE_CACHE_ROOT"
#: Each variable, its folder below the namespace, and whether it lives under the shared
#: root (True: what another container reads back) or on this process's disk.
#: FlashInfer JIT-builds kernels (its sampler; the Gated DeltaNet prefill where asked for)
#: under ``$FLASHINFER_WORKSPACE_BASE/.cache/flashinfer`` (flashinfer/jit/env.py), else the
#: home folder; it dlopens them from there, as Triton does, so it stays on local disk.
CACHE_ENV_DIRS: Final = (
    ("VLLM_CACHE_ROOT", "vllm", True),
    ("TORCHINDUCTOR_CACHE_DIR", "inductor", False),
    ("TRITON_CACHE_DIR", "triton", False),
    ("CUDA_CACHE_PATH", "cuda", False),
    ("FLASHINFER_WORKSPACE_BASE", "flashinfer", False),
)


@dataclasses.dataclass(frozen=True, slots=True)
class CacheStack:
    """The four facts compiled artifacts depend on.

    Attributes:
        gpu_type: The device name (``NVIDIA H100 80GB HBM3``), ``cpu`` without one.
        python_version: ``major.minor``.
        torch_build: torch's version with its local build tag and CUDA version.
        vllm_version: The installed vLLM distribution's version.
    """

    gpu_type: str
    python_version: str
    torch_build: str
    vllm_version: str

    @property
    def namespace(self) -> str:
        """A readable, collision-free folder name for this stack."""
        digest = hashlib.sha256(
            json.dumps(dataclasses.astuple(self), separators=(",", ":")).encode()
        ).hexdigest()[:12]
        gpu = _slug(self.gpu_type.removeprefix("NVIDIA "))[:32]
        return f"{gpu}-py{_slug(self.python_version)}-vllm{_slug(self.vllm_version)}-{digest}"


@dataclasses.dataclass(frozen=True, slots=True)
class CompileCache:
    """Where this process's compile caches went.

    Attributes:
        root: The configured root.
        namespace: The stack's folder below it.
        directories: Environment variable -> directory it was set to.
    """

    root: Path
    namespace: str
    directories: tuple[tuple[str, str], ...]
    gpu_type: str = "cpu"

    def metadata(self) -> dict[str, object]:
        """The metadata fields naming the namespace."""
        return {"vllm_compile_cache_namespace": self.namespace}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "_", text).strip("_") or "unknown"


def current_stack(torch: Any, vllm_version: str, platform: Any = None) -> CacheStack:
    """Read the stack of this process.

    Args:
        torch: The torch module (its version and CUDA build only).
        vllm_version: The vLLM version (the engine module reports it).
        platform: vLLM's ``current_platform`` (None imports it). Its
            ``get_device_name`` reads NVML on CUDA: no CUDA context is
            created in this process (the CLI, the Modal parent).

    Returns:
        The stack.
    """
    if platform is None:
        from vllm.platforms import current_platform

        platform = current_platform
    gpu = str(platform.get_device_name(0)) if platform.is_cuda_alike() else "cpu"
    cuda = getattr(torch.version, "cuda", None)
    build = f"{torch.__version__}" + (f"-cuda{cuda}" if cuda else "")
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    return CacheStack(gpu, python, build, vllm_version)


def local_cache_root() -> Path:
    """This process's own compile-cache folder: ``<user cache>/comfy-llm/compile-cache``."""
    base = env_str("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "comfy-llm" / "compile-cache"


def compile_cache_root() -> Path:
    """The shared root (``COMFY_MODAL_LLM_COMPILE_CACHE_ROOT``), else :func:`local_cache_root`."""
    configured = env_str(COMPILE_CACHE_ROOT_ENV)
    if configured:
        return Path(configured).expanduser()
    return local_cache_root()


def apply_compile_cache(
    stack: CacheStack, root: Path | None = None, local_root: Path | None = None
) -> CompileCache:
    """Create the namespace's folders; the five variables for the engine process.

    Args:
        stack: This process's stack.
        root: The shared root (vLLM's cache); None reads :func:`compile_cache_root`.
        local_root: This process's disk (Triton, Inductor, CUDA, FlashInfer); None reads
            :func:`local_cache_root`.

    Returns:
        The folders (``directories``: variable -> folder, for the engine process only).
    """
    shared = (root if root is not None else compile_cache_root()) / stack.namespace
    local = (local_root if local_root is not None else local_cache_root()) / stack.namespace
    directories = []
    for variable, folder, on_shared_root in CACHE_ENV_DIRS:
        path = (shared if on_shared_root else local) / folder
        path.mkdir(parents=True, exist_ok=True)
        directories.append((variable, str(path)))
    return CompileCache(shared.parent, stack.namespace, tuple(directories), stack.gpu_type)
