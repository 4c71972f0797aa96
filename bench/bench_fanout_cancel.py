"""Benchmark: the fan-out's Cancel latency with uploads in flight, and its GPU-seconds.

Run from the workspace root::

    uv run --frozen python bench/bench_fanout_cancel.py --out bench/results/fanout-cancel.json

Offline, on the strict Modal stand-in (``comfy_llm_testworld.modal_strict``:
real ModelStager/RemoteEngine bodies, each container its own process), with
spawns that upload their arguments at ``--upload-mbps`` (a chunk over 8 KiB
goes to blob storage before ``spawn`` returns, as in the modal 1.6.4
client) and the ``timed_gpu`` "GPU" (``--batch-seconds`` per batch).

* **Cancel**: ``--workers`` workers (8), one one-image chunk each of noisy
  JPEGs (so every upload is in flight for seconds), Cancel raised
  ``--cancel-after`` seconds into the feeding (all uploads in flight), and
  again ``--cancel-running-after`` seconds in (the chunks running on their
  GPUs: the cancels go out and the settle wait applies). Measured per repeat: the
  longest gap between two ``check_interrupt`` calls while the job ran, and
  the time from the ``check_interrupt`` that raised to ``caption_fan_out``
  re-raising it (target ≤ 1 s; before this round the loop spawned serially
  and the review measured an 8 s gap).
* **GPU-seconds**: a full job of ``--images`` images; ``modal_gpu_seconds``
  against the sum of the stand-in's own busy time per call (each input's
  start to its answer in its container; target: within 5 %), with the call
  seconds (spawn return to answer here) beside it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPOSITORY = "bench/smolvlm-scripted"


class _Cancelled(BaseException):
    """The bench's Cancel (ComfyUI's interrupt)."""


class _Sink:
    def __init__(self) -> None:
        self.results: list[Any] = []

    def captions(self, result: Any) -> None:
        self.results.append(result)

    def failed(self, indices: Any, message: str) -> None:
        del indices, message


def _images(folder: Path, count: int, side: int) -> list[Any]:
    from comfy_llm_modal_remote import FanOutImage, encode_image_file
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    images = []
    for index in range(count):
        path = folder / f"noise{index:04d}.jpg"
        Image.effect_noise((side, side), 60 + index % 40).convert("RGB").save(path, quality=92)
        images.append(
            FanOutImage(index, path.name, lambda p=path, i=index: encode_image_file(p, index=i))
        )
    return images


def _job(workers: int, chunk: int) -> Any:
    from comfy_llm_modal_remote import FanOutJob
    from comfy_llm_residency.backend import GenerationSettings

    return FanOutJob(
        model=REPOSITORY,
        prompt="Caption this image.",
        system_prompt=None,
        settings=GenerationSettings(temperature=0.0, max_new_tokens=2),
        gpu="H100",
        workers=workers,
        chunk_images=chunk,
        batch_size=chunk,
        reserve_gb=0.0,
    )


def _transport(root: Path, args: argparse.Namespace) -> Any:
    from comfy_llm_testworld import timed_gpu
    from comfy_llm_testworld.modal_strict import StrictTransport

    return StrictTransport(
        "comfy-llm-bench",
        root / "user",
        root=root,
        backend_factory=timed_gpu.FACTORY,
        engine_env={**timed_gpu.env(args.batch_seconds, 0.0), "OMP_NUM_THREADS": "1"},
        event_interval=0.2,
        upload_bytes_per_second=args.upload_mbps * 1e6 / 8,
    )


def _cancel_once(
    workdir: Path, run: int, args: argparse.Namespace, cancel_after: float
) -> dict[str, Any]:
    from comfy_llm_modal_remote import Dispatcher, caption_fan_out

    transport = _transport(workdir / f"cancel-{run}", args)
    try:
        images = _images(workdir / f"cancel-data-{run}", args.workers, args.image_side)
        chunk_job = _job(args.workers, 1)
        polls: list[float] = []
        fired: list[float] = []
        feeding: list[float] = []

        def progress(event: Any) -> None:
            if event.unit == "images" and not feeding:
                feeding.append(time.monotonic())  # the loop's first sweep: chunks handed out

        in_flight: list[int] = []

        def check_interrupt() -> None:
            now = time.monotonic()
            polls.append(now)
            if feeding and now - feeding[0] >= cancel_after:
                fired.append(now)
                uploads = sum(1 for size in transport.uploads if size)
                in_flight.append(uploads - sum(1 for c in transport.calls if c[0] == "chunk"))
                raise _Cancelled

        try:
            caption_fan_out(
                Dispatcher(transport),
                chunk_job,
                images,
                _Sink(),
                progress=progress,
                check_interrupt=check_interrupt,
            )
        except _Cancelled:
            returned = time.monotonic()
        else:
            raise SystemExit("the job ended before Cancel: raise --image-side, lower --upload-mbps")
        in_job = [b - a for a, b in itertools.pairwise(polls) if a >= feeding[0]]
        return {
            "cancel_to_return_seconds": round(returned - fired[0], 4),
            "max_poll_gap_seconds": round(max(in_job or [0.0]), 4),
            "uploads_in_flight_at_cancel": in_flight[0],
            "chunk_bytes": max(transport.uploads),
        }
    finally:
        transport.close()


def _gpu_seconds(workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    from comfy_llm_modal_remote import Dispatcher, caption_fan_out

    transport = _transport(workdir / "gpu-seconds", args)
    try:
        images = _images(workdir / "gpu-data", args.images, args.image_side)
        report = caption_fan_out(
            Dispatcher(transport), _job(args.workers, args.chunk_images), images, _Sink()
        )
        busy = sum(call.busy_seconds for kind, _, call in transport.calls if kind == "chunk")
        return {
            "images": args.images,
            "captioned": report.captioned,
            "modal_gpu_seconds": round(report.gpu_seconds, 3),
            "workers_busy_seconds": round(busy, 3),
            "relative_error": round(abs(report.gpu_seconds - busy) / busy, 4) if busy else None,
            "modal_call_seconds": round(report.call_seconds, 3),
            "wall_seconds": round(report.wall_seconds, 3),
        }
    finally:
        transport.close()


def main(argv: list[str] | None = None) -> int:
    """Run both measurements; print and optionally write the JSON record."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--chunk-images", type=int, default=2)
    parser.add_argument("--images", type=int, default=16)
    parser.add_argument("--image-side", type=int, default=512)
    parser.add_argument("--upload-mbps", type=float, default=1.0)
    parser.add_argument("--batch-seconds", type=float, default=0.5)
    parser.add_argument("--cancel-after", type=float, default=0.5)
    parser.add_argument("--cancel-running-after", type=float, default=6.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-fanout-cancel-") as tmp:
        workdir = Path(tmp)
        os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
        os.environ["HF_HOME"] = str(workdir / "hf_home")
        for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
            os.environ.pop(name, None)
        from comfy_llm_testworld import FakeHub
        from comfy_llm_testworld.checkpoints import build_checkpoint_files

        with FakeHub() as hub:
            os.environ["HF_ENDPOINT"] = hub.endpoint
            hub.add_repo(REPOSITORY, build_checkpoint_files("smolvlm", scripted=True))
            cancels = [
                _cancel_once(workdir, run, args, args.cancel_after) for run in range(args.repeats)
            ]
            running = [
                _cancel_once(workdir, 100 + run, args, args.cancel_running_after)
                for run in range(args.repeats)
            ]
            gpu = _gpu_seconds(workdir, args)
    record = {
        "settings": vars(args) | {"out": str(args.out) if args.out else None},
        "cancel": cancels,
        "cancel_to_return_seconds_max": max(c["cancel_to_return_seconds"] for c in cancels),
        "max_poll_gap_seconds_max": max(c["max_poll_gap_seconds"] for c in cancels),
        "cancel_while_running": running,
        "cancel_while_running_to_return_seconds_max": max(
            c["cancel_to_return_seconds"] for c in running
        ),
        "gpu_seconds": gpu,
    }
    text = json.dumps(record, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
