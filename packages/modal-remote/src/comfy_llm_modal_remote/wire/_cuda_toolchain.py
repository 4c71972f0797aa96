"""The GPU image's CUDA toolchain: what FlashInfer's JIT needs, made and proven at build.

vLLM 0.32 JIT-builds FlashInfer kernels when an engine starts (its sampler's
warm-up runs FlashInfer's top-k/top-p sampling on every CUDA GPU), and
FlashInfer builds and *links* each module with its own ninja rules
(``flashinfer/jit/cpp_ext.py:257-261`` in the pinned 0.7.0.post1 wheel)::

    $cuda_home/bin/nvcc ... -gencode=arch=compute_XX,code=sm_XX -c k.cu -o k.cuda.o
    c++ k.cuda.o -shared -L$cuda_home/lib64 -L$cuda_home/lib64/stubs -lcudart -lcuda

The image's CUDA is the pip CUDA 13 layout (``nvidia/cu13`` in site-packages:
``nvidia-cuda-nvcc``, ``-crt``, ``-nvvm``, ``-cccl`` and ``nvidia-cuda-runtime``,
pinned in ``image_lock.json``). That layout has ``lib/`` but no ``lib64/``,
only the versioned ``libcudart.so.13`` and no driver stub, so the link fails
with ``cannot find -lcudart`` while ``nvcc --version`` passes. What was
chosen, and why (the evidence is in the issue's closing note):

* FlashInfer's prebuilt kernels cannot replace the JIT here: PyPI has no
  ``flashinfer-jit-cache`` at all (it is published on FlashInfer's own index
  only), and its newest ``flashinfer-cubin`` is 0.6.13, which FlashInfer
  0.7.0.post1 refuses (it requires the same version, ``jit/env.py``);
  ``flashinfer-cubin`` holds only the cubin-loaded kernels anyway, not the
  sampling module.
* A CUDA *devel* base image (``nvidia/cuda:*-devel`` + ``add_python``) has
  the layout, but adds several GB of CUDA libraries that the pinned wheels
  already install, cannot be assembled or checked offline, and moves the
  image off ``debian_slim``.
* So the pip layout is completed in place, one build step, nothing
  downloaded: ``lib64 -> lib``, ``libcudart.so -> libcudart.so.<major>``, and a
  driver stub ``lib/stubs/libcuda.so`` (``SONAME libcuda.so.1``, exporting every
  driver API function ``cuda.h`` declares, built from that header with the
  image's gcc; the stub is only linked against: at run time the module's
  ``NEEDED libcuda.so.1`` is the driver Modal's GPU runtime provides). The same
  step then compiles a probe kernel for every GPU family the node offers
  with FlashInfer's nvcc flags, links it with FlashInfer's link line, and
  checks that the module needs ``libcudart.so.<major>`` and ``libcuda.so.1``:
  a wheel that moves its files fails the image build, not a request.

The compiler is the runtime's minor release (13.0, ``[tool.uv]
constraint-dependencies`` in the workspace root): nvcc's host stubs call
registration functions of the libcudart they link against, and Modal's R580
driver (CUDA 13.0) cannot JIT PTX newer than 13.0 (FlashInfer emits SASS
only, ``code=sm_XX``, but the CuTe DSL and Triton paths are not nvcc's).

Triton and Inductor need only gcc (``debian_slim`` apt-installs gcc and
build-essential, modal/_image.py:2823), Python's headers and the driver's
``libcuda.so.1`` (Triton 3.7 links ``-l:libcuda.so.1`` from the directory
``ldconfig -p`` names, triton/backends/nvidia/driver.py:16-44); the step checks
the headers. FlashInfer's GDN prefill on Hopper (Qwen3.5's linear attention,
``gdn_prefill.py:1002-1029``) is a CuTe DSL kernel compiled in process by
``nvidia-cutlass-dsl``: no nvcc, no link.

:func:`toolchain_script` is the build step's exact text; the CI check
(``tests/test_cuda_toolchain.py``) runs it on the layout assembled from the
pinned wheels.
"""

from __future__ import annotations

import shlex

__all__ = [
    "FLASHINFER_CUDA_FLAGS",
    "FLASHINFER_LDFLAGS",
    "PROBE_ARCHITECTURES",
    "toolchain_script",
]

FLASHINFER_LDFLAGS = (
    "-shared",
    "-L$cuda_home/lib64",
    "-L$cuda_home/lib64/stubs",
    "-lcudart",
    "-lcuda",
)
"""FlashInfer's link flags, as ``generate_ninja_build_for_op`` writes them
(``flashinfer/jit/cpp_ext.py:257-261``; the CI check reads them from the pinned
wheel and fails when they change)."""

FLASHINFER_CUDA_FLAGS = (
    "--compiler-options=-fPIC",
    "--expt-relaxed-constexpr",
    "-static-global-template-stub=false",
)
"""The architecture-free nvcc flags FlashInfer adds for CUDA >= 12.8
(``build_cuda_cflags``, cpp_ext.py:196-210)."""

PROBE_ARCHITECTURES = ("80", "89", "90a", "100a", "120f")
"""One SASS target per GPU family the node offers, in FlashInfer's spelling
(``CompilationContext._normalize_cuda_arch``): A100 (8.0), L4/L40S (8.9),
H100/H200 (9.0 → 90a), B200 (10.0 → 100a), RTX PRO 6000 (12.0 → 120f)."""

_PROBE_SOURCE = (
    "#include <cuda.h>",
    "#include <cuda_runtime.h>",
    "__global__ void scale(float* x, float a, int n) {",
    "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }",
    'extern "C" int probe(float* x, int n) {',
    "  int driver = 0; cuDriverGetVersion(&driver);",
    "  scale<<<(n + 255) / 256, 256>>>(x, 2.0f, n);",
    "  return driver + (int)cudaGetLastError(); }",
)


def _expand(flags: tuple[str, ...], cuda_home: str) -> str:
    return " ".join(flag.replace("$cuda_home", cuda_home) for flag in flags)


def toolchain_script(cuda_home: str) -> str:
    """The build step: complete the pip CUDA layout at ``cuda_home``, then prove the link.

    One line for ``bash -c`` (a Dockerfile ``RUN`` line); idempotent; fails
    (non-zero) naming what is missing.
    """
    home = shlex.quote(cuda_home)
    gencode = " ".join(
        f"-gencode=arch=compute_{arch},code=sm_{arch}" for arch in PROBE_ARCHITECTURES
    )
    source = " ".join(shlex.quote(line) for line in _PROBE_SOURCE)
    steps = [
        "set -euo pipefail",
        f"home={home}",
        'work="$(mktemp -d)"',
        # the names FlashInfer's link line asks for
        '[ -e "$home/lib64" ] || ln -s lib "$home/lib64"',
        'runtime="$(cd "$home/lib" && ls libcudart.so.[0-9]* | head -n 1)"',
        '[ -e "$home/lib/libcudart.so" ] || ln -s "$runtime" "$home/lib/libcudart.so"',
        # the driver stub: every driver API function cuda.h declares, SONAME libcuda.so.1
        'mkdir -p "$home/lib/stubs"',
        "printf '#include <cuda.h>\\n' | gcc -E -P -I\"$home/include\" -x c -"
        " | grep -oE '\\bCUresult +cu[A-Za-z0-9_]+ *\\(' | sed -E 's/^CUresult +//; s/ *\\($//'"
        " | sort -u | sed -E 's/.*/void &(void) {}/' > \"$work/libcuda_stub.c\"",
        '[ "$(wc -l < "$work/libcuda_stub.c")" -gt 100 ]',
        'gcc -shared -fPIC -nostdlib -Wl,-soname,libcuda.so.1 -o "$home/lib/stubs/libcuda.so"'
        ' "$work/libcuda_stub.c"',
        # the probe: FlashInfer's compile, then FlashInfer's link
        f'printf "%s\\n" {source} > "$work/probe.cu"',
        f'"$home/bin/nvcc" {_expand(FLASHINFER_CUDA_FLAGS, "$home")} -isystem "$home/include"'
        f' {gencode} -c "$work/probe.cu" -o "$work/probe.cuda.o"',
        f'c++ "$work/probe.cuda.o" {_expand(FLASHINFER_LDFLAGS, "$home")} -o "$work/probe.so"',
        'readelf -d "$work/probe.so" | grep -q "NEEDED.*\\[$runtime\\]"',
        'readelf -d "$work/probe.so" | grep -q "NEEDED.*\\[libcuda.so.1\\]"',
        # Triton's launcher and Inductor compile against Python's headers
        "python -c 'import os, sysconfig; "
        'assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))\'',
        'rm -rf "$work"',
        'echo "CUDA toolchain ready: FlashInfer JIT compiles and links under $home"',
    ]
    return "bash -c " + shlex.quote("; ".join(steps))
