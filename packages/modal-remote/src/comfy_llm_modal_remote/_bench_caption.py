"""``modal-bench --caption``: the billable run that measures captioning on N GPUs.

For each worker count in ``--workers`` (default ``1,8``) the same synthetic
dataset (``--images`` JPEG files of ``--image-size`` px, each a different
colour) is captioned through :func:`caption_fan_out` on the isolated bench
app, from cold (the app is stopped before each pass, so every worker starts
a new container: what a user's first run pays). The report records the
source, the workload, the plan and, per pass: wall time, GPU-seconds, images
per second and per GPU-second, each worker's own throughput, chunks retried,
the per-chunk overhead, bytes per image, and the scaling against the
one-worker pass. Captions go to the report's own temporary folder, never the
user's files.
"""

from __future__ import annotations

import dataclasses
import functools
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from comfy_llm_core import ProgressCallback, ignore_progress
from comfy_llm_residency.backend import GenerationSettings

from ._chunk_wire import ChunkImage, ChunkResult, encode_image_file
from ._dispatch import Dispatcher
from ._fanout import DEFAULT_CHUNK_IMAGES, FanOutImage, FanOutJob, caption_fan_out

__all__ = ["CaptionWorkload", "parse_workers", "run_caption_benchmark"]

CAPTION_PROMPT = "Describe this image in one detailed sentence, as a caption for training."


@dataclasses.dataclass(frozen=True, slots=True)
class CaptionWorkload:
    """What every pass captions.

    Attributes:
        model: The reference.
        gpu: The Modal GPU type.
        images: Images per pass.
        image_size: Side of each synthetic JPEG.
        max_new_tokens: Tokens per caption.
        chunk_images: Images per chunk.
        execution_mode: The vLLM execution mode deployed with the app.
        prompt: The captioning instruction.
    """

    model: str
    gpu: str
    images: int = 512
    image_size: int = 1024
    max_new_tokens: int = 128
    chunk_images: int = DEFAULT_CHUNK_IMAGES
    execution_mode: str = "throughput"
    prompt: str = CAPTION_PROMPT


def parse_workers(text: str) -> list[int]:
    """``"1,8"`` → ``[1, 8]``.

    Raises:
        ValueError: Not a comma-separated list of whole numbers >= 1.
    """
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise ValueError(f"--workers {text!r}: give worker counts like 1,8 (each >= 1)")
    return counts


class _Counter:
    """The benchmark's collector: counts, never writes the user's files."""

    def __init__(self) -> None:
        self.captioned = 0
        self.errors: list[str] = []

    def captions(self, result: ChunkResult) -> None:
        self.captioned += sum(1 for caption in result.captions if caption.error is None)
        self.errors.extend(c.error for c in result.captions if c.error is not None)

    def failed(self, indices: Sequence[int], message: str) -> None:
        self.errors.extend(message for _ in indices)


def _dataset(folder: Path, count: int, side: int) -> list[FanOutImage]:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    images = []
    for index in range(count):
        path = folder / f"bench-{index:05d}.jpg"
        colour = (index * 37 % 256, index * 91 % 256, index * 53 % 256)
        Image.new("RGB", (side, side), colour).save(path, quality=90)
        images.append(FanOutImage(index, path.name, functools.partial(_encode, path, index)))
    return images


def _encode(path: Path, index: int) -> ChunkImage:
    return encode_image_file(path, index=index)


def run_caption_benchmark(
    target: Any,
    workload: CaptionWorkload,
    workers: Sequence[int],
    *,
    source: dict[str, Any],
    progress: ProgressCallback = ignore_progress,
) -> dict[str, Any]:
    """Run one cold pass per worker count; return the JSON-ready report.

    Args:
        target: A ``TransportBenchTarget`` (its transport and ``stop_app``).
        workload: What every pass captions.
        workers: Worker counts, one pass each.
        source: What ran (commit, dirty flag, code fingerprint, image pins).
        progress: Every pass's bar and status text.
    """
    settings = GenerationSettings(temperature=0.0, max_new_tokens=workload.max_new_tokens)
    passes: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="comfy-llm-caption-bench-") as tmp:
        images = _dataset(Path(tmp), workload.images, workload.image_size)
        for count in workers:
            target.stop_app()  # every pass starts on new containers
            job = FanOutJob(
                model=workload.model,
                prompt=workload.prompt,
                system_prompt=None,
                settings=settings,
                gpu=workload.gpu,
                workers=count,
                chunk_images=workload.chunk_images,
            )
            counter = _Counter()
            report = caption_fan_out(
                Dispatcher(target.transport), job, images, counter, progress=progress
            )
            record = report.to_dict()
            per_worker = {
                key: {
                    **value,
                    "images_per_second": (
                        round(value["images"] / value["seconds"], 4) if value["seconds"] else 0.0
                    ),
                }
                for key, value in record.pop("modal_per_worker").items()
            }
            passes.append(
                {
                    "workers": count,
                    "captioned": counter.captioned,
                    "failed": len(counter.errors),
                    **{k.removeprefix("modal_"): v for k, v in record.items()},
                    "per_worker": per_worker,
                }
            )
    base = next((p for p in passes if p["workers"] == 1), None)
    for entry in passes:
        if base is not None and base["images_per_second"]:
            ideal = entry["workers"] * base["images_per_second"]
            entry["scaling"] = round(entry["images_per_second"] / ideal, 3)
    return {
        "source": source,
        "workload": {**dataclasses.asdict(workload), "settings": settings.to_dict()},
        "plan": {"workers": list(workers), "passes": "cold: the app is stopped before each"},
        "app_name": target.transport.app_name,
        "passes": passes,
        "summary": {
            f"workers_{p['workers']}": {
                "images_per_second": p["images_per_second"],
                "images_per_gpu_second": p["images_per_gpu_second"],
                "gpu_seconds": p["gpu_seconds"],
                "scaling": p.get("scaling"),
            }
            for p in passes
        },
    }
