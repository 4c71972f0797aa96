"""Benchmark: how captioning on N Modal workers scales — the orchestration's own cost.

Run from the workspace root::

    uv run --frozen python bench/bench_fanout.py --out bench/results/fanout.json
    uv run --frozen python bench/bench_fanout.py --resume-kill --out bench/results/fanout-rk.json

Offline, through the strict Modal stand-in (``comfy_llm_testworld.modal_strict``:
the real ModelStager and RemoteEngine bodies, each container its own process
started with the image's environment only, every request and answer crossing
a process line): each container serves its chunks through ``run_batch`` on the
real Transformers engine (the test world's tiny scripted SmolVLM, ``--tokens``
tokens: a small share of the time) wrapped in ``comfy_llm_testworld.timed_gpu``,
a "GPU" whose service time per batch is ``--batch-seconds`` plus
``--image-token-seconds`` * images * tokens (a sleep: the service time
dominates, as on a GPU where the dispatcher's machine does no engine work).
The service times reach the containers through the stand-in's explicit
``engine_env`` (``timed_gpu.env``), with ``OMP_NUM_THREADS=--torch-threads``.

Scaling (the default): for N in ``--workers`` the same ``--images`` images
(JPEG files of ``--image-side`` px) are captioned with ``--chunk-images`` per
chunk on warm containers: images/s, ``scaling`` = images/s / (N * the N=1
figure) (target ≥ 0.9), the mean per-chunk overhead (call span minus the
worker's own time: the spawn, the process line, the polling, the collecting),
GPU-seconds, the dispatcher thread's own CPU (encoding, sending, collecting,
writing files), the stand-in platform's CPU (this process's other threads),
the containers' CPU (the real engine's share, from /proc) and the load
average before and after. ``--small-chunks`` repeats the largest N with
chunks of that size to show where it stops scaling.

``--resume-kill``: ``--images`` images on ``--workers``' largest N, twice:
Cancel once half the caption files exist, then a rerun that captions only
the missing ones (files and engine answers counted: each image exactly once);
and a run in which one worker's container is killed mid-chunk (its chunk is
redone once on another key; nothing lost or written twice). The collector
writes the caption files and refuses to write one twice, as a check.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPOSITORY = "bench/smolvlm-scripted"


class _Cancelled(BaseException):
    """The bench's Cancel (what ComfyUI's interrupt is to the node)."""


def _images(folder: Path, count: int, side: int) -> list[Path]:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for index in range(count):
        path = folder / f"img{index:05d}.jpg"
        Image.new("RGB", (side, side), (index % 251, 120, 200)).save(path, quality=90)
        paths.append(path)
    return paths


class _Writer:
    """Writes caption files as chunks return; a second write of one image is an error."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = paths
        self.written: list[int] = []

    def captions(self, result: Any) -> None:
        for caption in result.captions:
            target = self.paths[caption.index].with_suffix(".txt")
            if target.exists():
                raise RuntimeError(f"{target.name} written twice")
            target.write_text(caption.response + "\n", encoding="utf-8")
            self.written.append(caption.index)

    def failed(self, indices: Sequence[int], message: str) -> None:
        raise RuntimeError(f"{list(indices)} failed: {message}")


def _transport(workdir: Path, name: str, args: argparse.Namespace) -> Any:
    from comfy_llm_testworld import timed_gpu
    from comfy_llm_testworld.modal_strict import StrictTransport

    return StrictTransport(
        "comfy-llm-bench",
        workdir / "user",
        root=workdir / name,
        backend_factory=timed_gpu.FACTORY,
        engine_env={
            **timed_gpu.env(args.batch_seconds, args.image_token_seconds),
            "OMP_NUM_THREADS": str(args.torch_threads),
        },
        event_interval=0.2,
    )


def _job(workers: int, chunk: int, args: argparse.Namespace) -> Any:
    from comfy_llm_modal_remote import FanOutJob
    from comfy_llm_residency.backend import GenerationSettings

    return FanOutJob(
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


def _fan_out_images(paths: Sequence[Path], skip_existing: bool = False) -> list[Any]:
    from comfy_llm_modal_remote import FanOutImage, encode_image_file

    return [
        FanOutImage(i, p.name, lambda p=p, i=i: encode_image_file(p, index=i))
        for i, p in enumerate(paths)
        if not (skip_existing and p.with_suffix(".txt").exists())
    ]


def _container_cpu(transport: Any) -> float:
    """User + system CPU seconds of the transport's live container processes (Linux)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for container in list(transport.containers.values()):
        try:
            fields = Path(f"/proc/{container.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return total


def _chunk_answers(transport: Any) -> tuple[int, int]:
    """(images answered by an engine, images of chunk calls that did not answer)."""
    answered = lost = 0
    for kind, info, call in transport.calls:
        if kind != "chunk":
            continue
        call.join()
        images = len(info["request"]["images"])
        if call.raised is None and call.answer is not None and call.answer.get("ok"):
            answered += images
        else:
            lost += images
    return answered, lost


def _run(
    workdir: Path, paths: list[Path], workers: int, chunk: int, args: argparse.Namespace
) -> dict[str, Any]:
    from comfy_llm_modal_remote import Dispatcher, caption_fan_out

    transport = _transport(workdir, f"modal-{workers}-{chunk}", args)
    try:
        job = _job(workers, chunk, args)
        images = _fan_out_images(paths)
        dispatcher = Dispatcher(transport)
        # Warm: start every worker's process and load its engine first (one chunk
        # each), as a warm Modal app would be; the measured run starts warm.
        warm = _Writer(paths)
        caption_fan_out(dispatcher, job, images[: workers * chunk], warm)
        for index in warm.written:
            paths[index].with_suffix(".txt").unlink()
        writer = _Writer(paths)
        load_before = os.getloadavg()
        containers_before = _container_cpu(transport)
        process_before = time.process_time()
        cpu_before = time.thread_time()  # the dispatcher's own thread
        started = time.perf_counter()
        report = caption_fan_out(dispatcher, job, images, writer, poll_seconds=0.005)
        wall = time.perf_counter() - started
        cpu = time.thread_time() - cpu_before
        platform_cpu = time.process_time() - process_before - cpu
        containers_cpu = _container_cpu(transport) - containers_before
        load_after = os.getloadavg()
    finally:
        transport.close()
    assert sorted(writer.written) == list(range(len(paths))), "every image exactly once"
    record = report.to_dict()
    chunks = max(1, record["modal_chunks"])
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
        "worker_seconds": record["modal_worker_seconds"],
        "images_per_gpu_second": record["modal_images_per_gpu_second"],
        "bytes_per_image": record["modal_bytes_per_image"],
        "dispatcher_cpu_seconds": round(cpu, 3),
        "dispatcher_cpu_ms_per_chunk": round(1000 * cpu / chunks, 2),
        "platform_cpu_seconds": round(platform_cpu, 3),
        "containers_cpu_seconds": round(containers_cpu, 3),
        "containers_cpu_ms_per_chunk": round(1000 * containers_cpu / chunks, 1),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        "chunks_retried": record["modal_chunks_retried"],
    }


def _resume(workdir: Path, workers: int, chunk: int, args: argparse.Namespace) -> dict[str, Any]:
    """Cancel once half the files exist, then rerun for the missing ones."""
    from comfy_llm_modal_remote import Dispatcher, caption_fan_out

    paths = _images(workdir / "data-resume", args.images, args.image_side)
    half = len(paths) // 2
    first, second = _Writer(paths), _Writer(paths)

    def cancel_at_half() -> None:
        if len(first.written) >= half:
            raise _Cancelled

    transport = _transport(workdir, "modal-resume", args)
    try:
        job = _job(workers, chunk, args)
        with contextlib.suppress(_Cancelled):
            caption_fan_out(
                Dispatcher(transport),
                job,
                _fan_out_images(paths),
                first,
                check_interrupt=cancel_at_half,
            )
        files_first = sum(1 for p in paths if p.with_suffix(".txt").exists())
        answered_first, lost_first = _chunk_answers(transport)
        calls_first = len([c for c in transport.calls if c[0] == "chunk"])
        rerun = _fan_out_images(paths, skip_existing=True)
        report = caption_fan_out(Dispatcher(transport), job, rerun, second)
        answered_total, lost_total = _chunk_answers(transport)
    finally:
        transport.close()
    written = first.written + second.written
    files = sum(1 for p in paths if p.with_suffix(".txt").exists())
    return {
        "images": len(paths),
        "workers": workers,
        "chunk_images": chunk,
        "cancel_after_files": half,
        "files_after_cancel": files_first,
        "written_first_run": len(first.written),
        "rerun_images": len(rerun),
        "written_second_run": len(second.written),
        "files_total": files,
        "distinct_images_written": len(set(written)),
        "writes_total": len(written),
        "engine_answers_first_run": answered_first,
        "engine_answers_total": answered_total,
        "images_in_cancelled_calls": lost_first,
        "images_in_calls_without_answer_total": lost_total,
        "chunk_calls_first_run": calls_first,
        "rerun_chunks_retried": report.chunks_retried,
        "each_image_exactly_once": sorted(written) == list(range(len(paths)))
        and files == len(paths),
    }


def _kill(workdir: Path, workers: int, chunk: int, args: argparse.Namespace) -> dict[str, Any]:
    """Kill one worker's container mid-chunk; its chunk is redone once elsewhere."""
    from comfy_llm_modal_remote import Dispatcher, caption_fan_out

    paths = _images(workdir / "data-kill", args.images, args.image_side)
    writer = _Writer(paths)
    killed: list[tuple[str, int]] = []
    transport = _transport(workdir, "modal-kill", args)

    def kill_one_busy_worker(event: Any) -> None:
        # Once a quarter is written, kill the first worker whose chunk is running.
        if killed or len(writer.written) < len(paths) // 4:
            return
        for kind, info, call in transport.calls:
            if kind == "chunk" and call.started.is_set() and not call.done():
                killed.append((info["affinity_key"], info["request"]["chunk_id"]))
                transport.kill(info["affinity_key"])
                return

    try:
        job = _job(workers, chunk, args)
        report = caption_fan_out(
            Dispatcher(transport),
            job,
            _fan_out_images(paths),
            writer,
            progress=kill_one_busy_worker,
        )
        answered, lost = _chunk_answers(transport)
        chunk_calls = [info for kind, info, _ in transport.calls if kind == "chunk"]
    finally:
        transport.close()
    key, chunk_id = killed[0] if killed else ("", -1)
    redone = [
        i
        for i in chunk_calls
        if i["request"]["chunk_id"] == chunk_id and i["request"]["attempt"] == 1
    ]
    files = sum(1 for p in paths if p.with_suffix(".txt").exists())
    return {
        "images": len(paths),
        "workers": workers,
        "chunk_images": chunk,
        "killed_key": key,
        "killed_chunk": chunk_id,
        "chunk_redone_on": [i["affinity_key"] for i in redone],
        "chunks_retried": report.chunks_retried,
        "failed_chunks": report.failed_chunks,
        "files": files,
        "writes": len(writer.written),
        "distinct_images_written": len(set(writer.written)),
        "engine_answers": answered,
        "images_in_calls_without_answer": lost,
        "nothing_lost_or_doubled": sorted(writer.written) == list(range(len(paths))),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print (or write) the JSON."""
    parser = argparse.ArgumentParser(description="Caption fan-out on the strict Modal stand-in.")
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--chunk-images", type=int, default=16)
    parser.add_argument("--workers", default="1,2,4,8")
    parser.add_argument("--tokens", type=int, default=2)
    parser.add_argument("--batch-seconds", type=float, default=0.2)
    parser.add_argument("--image-token-seconds", type=float, default=0.15)
    parser.add_argument("--image-side", type=int, default=64)
    parser.add_argument("--small-chunks", default="4,1")
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument(
        "--resume-kill", action="store_true", help="the Cancel/resume and kill runs"
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.workers.split(",") if n.strip()]
    rows: list[dict[str, Any]] = []
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-fanout-") as tmp:
        workdir = Path(tmp)
        os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
        os.environ["HF_HOME"] = str(workdir / "hf_home")
        for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
            os.environ.pop(name, None)
        from comfy_llm_testworld import FakeHub
        from comfy_llm_testworld.checkpoints import build_checkpoint_files

        with FakeHub() as hub:
            os.environ["HF_ENDPOINT"] = hub.endpoint  # the stager's secret carries HF_*
            hub.add_repo(REPOSITORY, build_checkpoint_files("smolvlm", scripted=True))
            if args.resume_kill:
                for name, measure in (("resume", _resume), ("kill", _kill)):
                    runs[name] = measure(workdir, max(counts), args.chunk_images, args)
                    print(json.dumps(runs[name]), file=sys.stderr, flush=True)
            else:
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
        "stand_in": "comfy_llm_testworld.modal_strict (container processes, image env only)",
        "rows": rows,
        **runs,
    }
    text = json.dumps(report, indent=2, sort_keys=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
