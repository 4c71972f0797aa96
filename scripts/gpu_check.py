"""The GPU check's stages (run by ``scripts/gpu-check.sh``): one JSON, each stage on its own.

Every stage records its status (``ok`` / ``failed`` / ``skipped`` with why),
its seconds and its numbers; a failed stage never stops the later ones (the
vLLM review r2, "GPU check plan"). What runs without CUDA runs here too
(facts, the CPU preprocessing rates, the smoke tests' collection), so the
install path is proven on any machine:

0. ``facts``: driver, GPU, torch / Transformers versions, whether Transformers
   knows Qwen3.5 and whether ``fla`` / ``causal_conv1d`` import, CPU count.
1. ``start_check``: CUDA context sizes as NVML sees them (after
   ``torch.cuda.init``, the first cuBLAS GEMM, an SDPA call; each in a fresh
   child), then, beside a fake tenant holding 0, 30 and 100 GiB, the
   utilization the backend would pass for the published Qwen3.5-2B and
   27B-FP8 terms and vLLM 0.32's ``request_memory`` rule
   (vllm/v1/worker/utils.py 716-772: free at the child's start >= ceil(total
   x utilization)) against what a child spawned through the backend's
   ``engine_process_scope`` reads.
2. ``transformers_real_size`` (``scripts/gpu_check_real.py``): a
   random-weight Qwen3.5-2B of real shape built on the GPU, taken as a local
   model folder through the manager: estimate vs NVML vs allocator peak,
   captions/s at batch 8/32 on 512² and 1024² images at 64 tokens, eviction,
   two-way memory with a tenant process.
3. ``kernels``: bf16 GEMM ceilings at decode shapes (batch 32/128 x 2048 x
   6144), the real-size vision tower over 1/4/16 images at 512², 768² and
   1024² (ms an image, TFLOP/s), and SDPA over one image's vision tokens
   (256/576/1024 tokens, 16 heads of 64): the measured ceilings the
   throughput estimate needs. The LLM's prefill is measured end to end by
   stage 2's captions/s, not block by block.
4. ``cpu_preprocessing``: Transformers' Qwen2-VL fast image processor per
   image at 512², 1024², 2048² on 1 thread and on all, and PIL decode of a
   1024² JPEG and PNG (vLLM runs this on one thread, renderers/base.py:148).
5. ``smoke``: the ``gpu``-marked tests (tests/gpu) and bench/bench_node.py
   on CUDA.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_GIB = 1024**3


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _child(code: str, timeout: float = 120) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter; its last stdout line is JSON."""
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-1500:])
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def facts() -> dict[str, Any]:
    """Stage 0: what the machine is (see the module docstring)."""
    import importlib.util

    result: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
    }
    for name in ("torch", "transformers", "pynvml", "fla", "causal_conv1d", "vllm"):
        result[f"{name}_importable"] = importlib.util.find_spec(name) is not None
    import torch
    import transformers

    result["torch"] = torch.__version__
    result["transformers"] = transformers.__version__
    result["torch_cuda"] = torch.version.cuda
    result["transformers_has_qwen3_5"] = (
        importlib.util.find_spec("transformers.models.qwen3_5") is not None
    )
    try:
        smi = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                "--format=csv,noheader",
            ],
            check=False,
            capture_output=True,
            text=True,
            timeout=20,
        )
        result["nvidia_smi"] = smi.stdout.strip() or smi.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as error:
        result["nvidia_smi"] = f"unavailable: {error}"
    from comfy_llm_backend_cuda.vllm import cuda_driver_version

    result["driver_cuda_version"] = cuda_driver_version()
    return result


_CONTEXT = """
import json, torch, pynvml
pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0)
used = lambda: pynvml.nvmlDeviceGetMemoryInfo(h).used
base = used(); out = {}
torch.cuda.init(); torch.zeros(1, device="cuda"); torch.cuda.synchronize()
out["context"] = used() - base
a = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16); (a @ a).sum().item()
out["after_cublas"] = used() - base - torch.cuda.memory_reserved()
q = torch.randn(1, 16, 1024, 64, device="cuda", dtype=torch.bfloat16)
torch.nn.functional.scaled_dot_product_attention(q, q, q).sum().item()
out["after_sdpa"] = used() - base - torch.cuda.memory_reserved()
print(json.dumps(out))
"""

_TENANT = """
import sys, time, torch
held = torch.empty(int(float(sys.argv[1]) * 1024**3), dtype=torch.uint8, device="cuda")
print("ready", flush=True); time.sleep(600)
"""

_ENGINE_START = """
import json, torch
free, total = torch.cuda.mem_get_info()
print(json.dumps({"free": free, "total": total}))
"""


def _published_profile(size: str) -> Any:
    """A stand-in profile carrying the memory terms of the published shape (no weights)."""
    from comfy_llm_profiles._vllm_memory import vllm_engine_options, vllm_memory_terms
    from comfy_llm_testworld.shapes import qwen35_shape

    config = qwen35_shape(size)
    weights = {"2b": int(4.6 * _GIB), "27b-fp8": int(29.5 * _GIB)}[size]
    options = vllm_engine_options(config)
    terms = vllm_memory_terms(
        config,
        runtime_weight_bytes=weights,
        context_tokens=32768,
        max_num_seqs=int(options["max_num_seqs"]),
    )

    class Profile:
        backend_options = tuple((f"memory_{k}_bytes", v) for k, v in terms.items())
        estimated_memory_bytes = sum(terms.values())
        weight_bytes = weights

    return Profile()


def start_check() -> dict[str, Any]:
    """Stage 1: CUDA context sizes and vLLM's start-up check beside fake tenants."""
    if not _cuda():
        return {"status": "skipped", "why": "no CUDA device"}
    import pynvml  # nvidia-ml-py (the image has it); the backend reads vLLM's bundled copy
    from comfy_llm_backend_cuda.vllm import (
        engine_process_scope,
        gpu_memory_utilization,
        nvml_memory,
    )

    result: dict[str, Any] = {"context_bytes": _child(_CONTEXT)}
    tenants: dict[str, Any] = {}
    for gib in (0, 30, 100):
        tenant = None
        if gib:
            tenant = subprocess.Popen(
                [sys.executable, "-c", _TENANT, str(gib)], stdout=subprocess.PIPE, text=True
            )
            assert tenant.stdout is not None
            tenant.stdout.readline()
        try:
            reading = nvml_memory(pynvml)
            assert reading is not None, "NVML unavailable"
            with engine_process_scope({}):
                started = _child(_ENGINE_START)
            row: dict[str, Any] = {"free_at_admission": reading.available_bytes}
            for size in ("2b", "27b-fp8"):
                utilization = gpu_memory_utilization(_published_profile(size), reading)
                requested = -(-started["total"] * utilization // 1)
                row[size] = {
                    "gpu_memory_utilization": utilization,
                    "requested_bytes": int(requested),
                    "free_at_engine_start": started["free"],
                    "passes_request_memory": started["free"] >= requested,
                    "slack_bytes": int(started["free"] - requested),
                }
            tenants[f"{gib}GiB"] = row
        finally:
            if tenant is not None:
                tenant.kill()
                tenant.wait()
    result["tenants"] = tenants
    return result


def real_size(work: Path) -> dict[str, Any]:
    """Stage 2: the Transformers path at real size (``scripts/gpu_check_real.py``)."""
    if not _cuda():
        return {"status": "skipped", "why": "no CUDA device"}
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gpu_check_real import transformers_real_size

    return transformers_real_size(work / "real_size")


def _time(call: Callable[[], Any], repeat: int = 10) -> float:
    import torch

    for _ in range(3):
        call()
    torch.cuda.synchronize()
    begin = time.perf_counter()
    for _ in range(repeat):
        call()
    torch.cuda.synchronize()
    return (time.perf_counter() - begin) / repeat


def kernels() -> dict[str, Any]:
    """Stage 3: decode GEMM, vision tower and vision attention ceilings."""
    if not _cuda():
        return {"status": "skipped", "why": "no CUDA device"}
    import torch

    result: dict[str, Any] = {"decode_gemm": {}, "vision_sdpa": {}}
    weight = torch.randn(2048, 6144, device="cuda", dtype=torch.bfloat16)
    for batch in (32, 128):
        x = torch.randn(batch, 2048, device="cuda", dtype=torch.bfloat16)
        seconds = _time(lambda x=x: x @ weight)
        result["decode_gemm"][f"{batch}x2048x6144"] = {
            "ms": round(seconds * 1000, 4),
            "tflops": round(2 * batch * 2048 * 6144 / seconds / 1e12, 2),
            "weight_gb_per_s": round(2048 * 6144 * 2 / seconds / 1e9, 1),
        }
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gpu_check_real import vision_tower_ceilings

    result["vision_tower"] = vision_tower_ceilings()
    for tokens in (256, 576, 1024):  # 512², 768², 1024² after the 2 x 2 merge: x4 patches
        q = torch.randn(1, 16, tokens * 4, 64, device="cuda", dtype=torch.bfloat16)
        seconds = _time(lambda q=q: torch.nn.functional.scaled_dot_product_attention(q, q, q))
        result["vision_sdpa"][f"{tokens}_tokens"] = {"ms_per_layer": round(seconds * 1000, 4)}
    return result


def cpu_preprocessing() -> dict[str, Any]:
    """Stage 4: the CPU side vLLM runs on one thread (image processor, decode)."""
    import io

    import numpy as np
    import torch
    from PIL import Image
    from transformers import Qwen2VLImageProcessor

    processor = Qwen2VLImageProcessor()
    rng = np.random.default_rng(0)
    result: dict[str, Any] = {"processor_ms_per_image": {}, "decode_ms": {}}
    threads = torch.get_num_threads()
    for side in (512, 1024, 2048):
        image = Image.fromarray(rng.integers(0, 255, (side, side, 3), dtype=np.uint8))
        for count in (1, threads):
            torch.set_num_threads(count)
            begin = time.perf_counter()
            for _ in range(3):
                processor(images=[image], return_tensors="pt")
            ms = (time.perf_counter() - begin) / 3 * 1000
            result["processor_ms_per_image"][f"{side}px_{count}threads"] = round(ms, 2)
    torch.set_num_threads(threads)
    image = Image.fromarray(rng.integers(0, 255, (1024, 1024, 3), dtype=np.uint8))
    for kind in ("JPEG", "PNG"):
        buffer = io.BytesIO()
        image.save(buffer, kind)
        data = buffer.getvalue()
        begin = time.perf_counter()
        for _ in range(5):
            Image.open(io.BytesIO(data)).convert("RGB")
        result["decode_ms"][kind] = round((time.perf_counter() - begin) / 5 * 1000, 2)
    return result


def smoke(work: Path, logs: Path) -> dict[str, Any]:
    """Stage 5: tests/gpu and bench_node.py on CUDA; pytest's whole output in ``logs``."""
    result: dict[str, Any] = {}
    xml = work / "gpu_tests.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "gpu", "tests/gpu",
         "-q", "-rfEs", "--tb=short", "--show-capture=no", f"--junitxml={xml}"],
        check=False, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    (logs / "gpu_tests.log").write_text(done.stdout + done.stderr)
    result["gpu_tests_exit_code"] = done.returncode
    result["gpu_tests_tail"] = done.stdout[-1500:]
    if _cuda():
        out = work / "bench_node.json"
        bench = subprocess.run(
            [sys.executable, "bench/bench_node.py", "--backends", "transformers", "--runs", "5",
             "--tokens", "64", "--device", "cuda", "--out", str(out)],
            check=False, capture_output=True, text=True, timeout=150,
        )  # fmt: skip
        result["bench_node"] = json.loads(out.read_text()) if out.exists() else bench.stderr[-1500:]
    else:
        result["bench_node"] = "skipped: no CUDA device"
    if done.returncode not in (0, 5):  # 5: nothing collected ran (every test skipped)
        result["status"] = "failed"  # the bench's figures are kept beside the failure
        result["error"] = f"tests/gpu exited {done.returncode}"
    return result


def main() -> int:
    """Run every stage, or those $GPU_CHECK_STAGES names; write ``argv[1]`` after each.

    ``argv[2]`` is the scratch folder.
    """
    out, work = Path(sys.argv[1]), Path(sys.argv[2])
    started = time.perf_counter()
    report: dict[str, Any] = {"cuda": _cuda(), "stages": {}}
    stages: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("facts", facts),
        ("start_check", start_check),
        ("transformers_real_size", lambda: real_size(work)),
        ("kernels", kernels),
        ("cpu_preprocessing", cpu_preprocessing),
        ("smoke", lambda: smoke(work, out.parent)),
    ]
    asked = {n for n in os.environ.get("GPU_CHECK_STAGES", "").split(",") if n}  # a rerun's few
    for name, stage in stages:
        if asked and name not in asked:
            report["stages"][name] = {"status": "skipped", "why": "not in $GPU_CHECK_STAGES"}
            continue
        begin = time.perf_counter()
        try:
            entry = stage()
            entry.setdefault("status", "ok")
        except Exception as error:  # a failed stage never stops the next
            entry = {"status": "failed", "error": f"{type(error).__name__}: {error}"[-2000:]}
        entry["seconds"] = round(time.perf_counter() - begin, 2)
        report["stages"][name] = entry
        print(name, entry["status"], entry["seconds"], flush=True)
        out.write_text(json.dumps(report, indent=2) + "\n")  # what ran so far survives a kill
    report["seconds"] = round(time.perf_counter() - started, 2)
    out.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if any(e["status"] == "failed" for e in report["stages"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
