"""Benchmark: captions per second, one caption batch versus separate node runs.

Run from the workspace root::

    uv run --frozen python bench/bench_batch.py --out bench/results/batch.json

Offline: the test world's fake Hub serves the tiny random Qwen3.5 checkpoint;
the ComfyUI stand-in provides the progress bar and interrupt checks. Per
engine (Transformers through ``local_cpu``, MLX-VLM through ``local_apple``,
i.e. ``mlx[cpu]`` on Linux), after one warm-up request that loads the model:

* ``batch``: ``CaptionImagesNode.execute`` with an IMAGE batch of ``--images``;
* ``separate``: ``--images`` separate ``ModalLLMNode.execute`` calls, one image
  each, on the same resident model.

Both use the same prompt, seed and ``max_new_tokens``. Reported: wall seconds,
captions per second and the ratio ``batch / separate``. This asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPOSITORY = "bench/qwen35"
ENGINES = {"transformers": "local_cpu", "mlx_vlm": "local_apple"}


def _environment(workdir: Path) -> None:
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    os.environ["HF_HOME"] = str(workdir / "hf_home")
    os.environ["COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT"] = str(workdir / "storage")
    os.environ["COMFYUI_STANDIN_BASE"] = str(workdir / "ComfyUI")
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        os.environ.pop(name, None)


def _engine(name: str, images: Any, tokens: int) -> dict[str, Any]:
    from comfy_api.latest import io
    from comfy_llm._caption_node import CaptionImagesNode
    from comfy_llm._node import ModalLLMNode
    from comfy_llm_residency import reset_managers

    os.environ["COMFY_LLM_EXECUTION_TARGET"] = ENGINES[name]
    reset_managers()
    ModalLLMNode.hidden = io.HiddenHolder(unique_id="1")
    CaptionImagesNode.hidden = io.HiddenHolder(unique_id="2")
    common = {"max_new_tokens": tokens, "temperature": 0.0, "seed": 0, "enable_reasoning": False}
    prompt = "Caption this image."
    ModalLLMNode.execute(prompt=prompt, model_profile=REPOSITORY, images=images[:1], **common)

    started = time.perf_counter()
    for index in range(images.shape[0]):
        ModalLLMNode.execute(
            prompt=prompt, model_profile=REPOSITORY, images=images[index : index + 1], **common
        )
    separate = time.perf_counter() - started

    started = time.perf_counter()
    output = CaptionImagesNode.execute(
        model_profile=REPOSITORY, prompt=prompt, images=images, **common
    )
    batch = time.perf_counter() - started
    count = len(output.args[0])
    reset_managers()
    return {
        "images": count,
        "batch_seconds": round(batch, 3),
        "separate_seconds": round(separate, 3),
        "batch_captions_per_second": round(count / batch, 3),
        "separate_captions_per_second": round(count / separate, 3),
        "batch_over_separate": round(separate / batch, 3),
        "batching": "sequential under one resident load (no engine batch API used)",
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print (or write) the JSON."""
    parser = argparse.ArgumentParser(description="Caption batch versus separate node runs.")
    parser.add_argument("--images", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--engines", default="transformers,mlx_vlm")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        _environment(Path(tmp))
        import numpy as np
        from comfy_llm_testworld import FakeHub
        from comfy_llm_testworld.checkpoints import build_checkpoint_files
        from comfy_llm_testworld.comfyui_standin import installed_standin

        images = np.random.default_rng(0).random((args.images, 32, 32, 3), dtype=np.float32)
        results: dict[str, Any] = {}
        with FakeHub() as hub, installed_standin():
            os.environ["HF_ENDPOINT"] = hub.endpoint
            hub.add_repo(REPOSITORY, build_checkpoint_files("qwen3_5"))
            for name in (n.strip() for n in args.engines.split(",") if n.strip()):
                results[name] = _engine(name, images, args.tokens)
    report = {
        "benchmark": "bench_batch",
        "python": sys.version.split()[0],
        "images": args.images,
        "max_new_tokens": args.tokens,
        "results": results,
    }
    text = json.dumps(report, indent=2, sort_keys=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
