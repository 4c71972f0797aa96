"""Benchmark: how captioning on N Modal workers scales — the orchestration's own cost.

Run from the workspace root::

    uv run --frozen python bench/bench_fanout.py --out bench/results/fanout.json

Offline, through the Modal stand-in (``comfy_llm_testworld.modal_standin``:
the real ModelStager and RemoteEngine bodies, containers as worker threads,
every request and answer pickled across): each container serves its chunks
through ``run_batch`` on the real Transformers engine (the test world's tiny
scripted SmolVLM, ``--tokens`` tokens: a small share of the time) wrapped in
``comfy_llm_testworld.timed_gpu``, a "GPU" whose service time per batch is ``--batch-seconds`` plus
``--image-token-seconds`` * images * tokens (a sleep: the service time
dominates, as on a GPU where the dispatcher's machine does no engine work).

For N in ``--workers`` the same ``--images`` images (JPEG files of
``--image-side`` px) are captioned with ``--chunk-images`` per chunk:
images/s, ``scaling`` = images/s / (N * the N=1 figure) (target ≥ 0.9),
the mean per-chunk overhead (call span minus the worker's own time: the
spawn, the pickling, the polling, the collecting), GPU-seconds, and the
dispatcher thread's own CPU (encoding, sending, collecting, writing files).
``--small-chunks`` repeats the largest N with chunks of that size to show
where it stops scaling (overhead per chunk against service time per chunk).
Asserts nothing; the collector writes the caption files, as the node does.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPOSITORY = "bench/smolvlm-scripted"


def _images(folder: Path, count: int, side: int) -> list[Path]:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for index in range(count):
        path = folder / f"img{index:05d}.jpg"
        Image.new("RGB", (side, side), (index % 251, 120, 200)).save(path, quality=90)
        paths.append(path)
    return paths


def _run(
    workdir: Path, paths: list[Path], workers: int, chunk: int, args: argparse.Namespace
) -> dict[str, Any]:
    from comfy_llm_modal_remote import (
        Dispatcher,
        FanOutImage,
        FanOutJob,
        caption_fan_out,
        encode_image_file,
    )
    from comfy_llm_residency import GenerationSettings
    from comfy_llm_testworld import timed_gpu
    from comfy_llm_testworld.modal_standin import StandinTransport

    os.environ[timed_gpu.BATCH_SECONDS_ENV] = str(args.batch_seconds)
    os.environ[timed_gpu.IMAGE_TOKEN_SECONDS_ENV] = str(args.image_token_seconds)
    transport = StandinTransport(
        "comfy-llm-bench",
        workdir / "user",
        root=workdir / f"modal-{workers}-{chunk}",
        backend_factory=timed_gpu.factory,
        event_interval=0.2,
    )
    job = FanOutJob(
        model=REPOSITORY,
        prompt="Caption this image.",
        system_prompt=None,
        settings=GenerationSettings(temperature=0.0, max_new_tokens=args.tokens),
        gpu="H100",
        workers=workers,
        chunk_images=chunk,
        batch_size=chunk,
        reserve_gb=0.0,
    )
    written: list[int] = []

    class Writer:
        def captions(self, result: Any) -> None:
            for caption in result.captions:
                target = paths[caption.index].with_suffix(".txt")
                target.write_text(caption.response + "\n", encoding="utf-8")
                written.append(caption.index)

        def failed(self, indices: Any, message: str) -> None:
            raise RuntimeError(f"{list(indices)} failed: {message}")

    images = [
        FanOutImage(i, p.name, lambda p=p, i=i: encode_image_file(p, index=i))
        for i, p in enumerate(paths)
    ]
    dispatcher = Dispatcher(transport)
    # Warm: stage and load every worker's engine first (one chunk each), as a
    # warm Modal app would be; the measured run starts on warm containers.
    caption_fan_out(dispatcher, job, images[: workers * chunk], Writer())
    written.clear()
    cpu_before = time.thread_time()  # the dispatcher's own thread (workers are other threads)
    started = time.perf_counter()
    report = caption_fan_out(dispatcher, job, images, Writer(), poll_seconds=0.005)
    wall = time.perf_counter() - started
    cpu = time.thread_time() - cpu_before
    assert sorted(written) == list(range(len(paths))), "every image exactly once"
    record = report.to_dict()
    per_chunk_service = args.batch_seconds + args.image_token_seconds * chunk * args.tokens
    return {
        "workers": workers,
        "chunk_images": chunk,
        "chunks": record["modal_chunks"],
        "wall_seconds": round(wall, 3),
        "images_per_second": round(len(paths) / wall, 3),
        "service_seconds_per_chunk": round(per_chunk_service, 3),
        "chunk_overhead_seconds_mean": record["modal_chunk_overhead_seconds"],
        "gpu_seconds": record["modal_gpu_seconds"],
        "images_per_gpu_second": record["modal_images_per_gpu_second"],
        "bytes_per_image": record["modal_bytes_per_image"],
        "dispatcher_cpu_seconds": round(cpu, 3),
        "dispatcher_cpu_ms_per_chunk": round(1000 * cpu / max(1, record["modal_chunks"]), 2),
        "chunks_retried": record["modal_chunks_retried"],
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print (or write) the JSON."""
    parser = argparse.ArgumentParser(description="Caption fan-out scaling on the Modal stand-in.")
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--chunk-images", type=int, default=16)
    parser.add_argument("--workers", default="1,2,4,8")
    parser.add_argument("--tokens", type=int, default=2)
    parser.add_argument("--batch-seconds", type=float, default=0.2)
    parser.add_argument("--image-token-seconds", type=float, default=0.15)
    parser.add_argument("--image-side", type=int, default=64)
    parser.add_argument("--small-chunks", default="4,1")
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.workers.split(",") if n.strip()]
    with tempfile.TemporaryDirectory(prefix="bench-fanout-") as tmp:
        workdir = Path(tmp)
        os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
        os.environ["HF_HOME"] = str(workdir / "hf_home")
        for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
            os.environ.pop(name, None)
        import torch
        from comfy_llm_testworld import FakeHub
        from comfy_llm_testworld.checkpoints import build_checkpoint_files

        torch.set_num_threads(args.torch_threads)
        rows: list[dict[str, Any]] = []
        with FakeHub() as hub:
            os.environ["HF_ENDPOINT"] = hub.endpoint
            hub.add_repo(REPOSITORY, build_checkpoint_files("smolvlm", scripted=True))
            for workers in counts:
                paths = _images(workdir / f"data-{workers}", args.images, args.image_side)
                rows.append(_run(workdir, paths, workers, args.chunk_images, args))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            for chunk in [int(c) for c in args.small_chunks.split(",") if c.strip()]:
                paths = _images(workdir / f"data-small-{chunk}", args.images, args.image_side)
                rows.append(_run(workdir, paths, max(counts), chunk, args))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    base = next((r for r in rows if r["workers"] == 1), None)
    for row in rows:
        if base is not None and row["chunk_images"] == base["chunk_images"]:
            ideal = row["workers"] * base["images_per_second"]
            row["scaling"] = round(row["images_per_second"] / ideal, 3)
    report = {
        "benchmark": "bench_fanout",
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "images": args.images,
        "tokens": args.tokens,
        "gpu_model": {
            "batch_seconds": args.batch_seconds,
            "image_token_seconds": args.image_token_seconds,
        },
        "stand_in": "comfy_llm_testworld.modal_standin (thread containers, pickled wire)",
        "rows": rows,
    }
    text = json.dumps(report, indent=2, sort_keys=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
