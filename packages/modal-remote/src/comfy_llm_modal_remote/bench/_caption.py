"""``modal-bench --caption``: the billable run that measures captioning on N GPUs.

For each worker count in ``--workers`` (default ``1,8``) the same synthetic
dataset (``--images`` JPEG files of ``--image-size`` px that look like
photographs to the encoder: a lit gradient, shapes and sensor noise, each
image different, so nothing compresses away and no caption ends early on a
flat colour, the vLLM review r2's F12) is captioned with exactly
``max_new_tokens`` tokens each (``min_new_tokens`` forces it; the goal's
workload is 64) through :func:`caption_fan_out` on the isolated bench
app, from cold (the app is stopped before each pass, so every worker starts
a new container: what a user's first run pays). The report records the
source, the workload, the plan and, per pass: wall time, GPU-seconds, images
per second and per GPU-second, each worker's own throughput, chunks retried,
the per-chunk overhead, bytes per image, the scaling against the
one-worker pass, tokens per caption, and the engine's load (vLLM's peak
running requests and KV cache usage). A chunk that paid its container's
cold load or compile, or that vLLM served in another execution mode than
the one deployed, is not a warm figure: it is refused from the warm rate
(``warm_images_per_gpu_second``) and listed with its reason. Captions go
to the report's own temporary folder, never the user's files.
"""

from __future__ import annotations

import dataclasses
import functools
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from comfy_llm_core import ProgressCallback, ignore_progress
from comfy_llm_residency.backend import GenerationSettings

from ..client._dispatch import Dispatcher
from ..client._fanout import FanOutImage, FanOutJob, caption_fan_out
from ..client._transport import Transport
from ..wire._chunk_wire import ChunkImage, ChunkResult, encode_image_file
from ..wire._plain import WireDict

if TYPE_CHECKING:
    from PIL.Image import Image as PILImage

__all__ = [
    "CaptionTarget",
    "CaptionWorkload",
    "parse_workers",
    "photo_like",
    "run_caption_benchmark",
]

CAPTION_PROMPT = "Describe this image in one detailed sentence, as a caption for training."


class CaptionTarget(Protocol):
    """What a caption pass needs of its target (``_cli.TransportBenchTarget`` is one)."""

    @property
    def transport(self) -> Transport:
        """The transport the passes' dispatchers use."""
        ...

    def stop_app(self) -> None:
        """Stop the app: the next pass starts on new containers."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class CaptionWorkload:
    """What every pass captions.

    Attributes:
        model: The reference.
        gpu: The Modal GPU type.
        images: Images per pass.
        image_size: Side of each synthetic JPEG.
        max_new_tokens: Tokens per caption.
        chunk_images: Images per chunk; None: the fan-out's default for the
            profile's engine (each pass records the size as ``modal_chunk_images``).
        execution_mode: The vLLM execution mode deployed with the app.
        prompt: The captioning instruction.
    """

    model: str
    gpu: str
    images: int = 512
    image_size: int = 1024
    max_new_tokens: int = 64
    chunk_images: int | None = None
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
    """The benchmark's collector: counts, never writes the user's files.

    Each chunk's captions carry their run's metadata: tokens, the cache
    status (``cold`` for the chunk that loaded the model) and vLLM's engine
    load; a chunk is a warm sample only when every caption says ``warm`` in
    the planned execution mode.
    """

    def __init__(self, execution_mode: str) -> None:
        self.execution_mode = execution_mode
        self.captioned = 0
        self.errors: list[str] = []
        self.tokens: list[int] = []
        self.peak_running = 0
        self.peak_kv_usage = 0.0
        self.warm_images = 0
        self.warm_seconds = 0.0
        self.refused: list[WireDict] = []

    def captions(self, result: ChunkResult) -> None:
        good = [c for c in result.captions if c.error is None]
        self.captioned += len(good)
        self.errors.extend(c.error for c in result.captions if c.error is not None)
        reasons: set[str] = set()
        for caption in good:
            metadata = caption.metadata or {}
            tokens = metadata.get("output_tokens")
            if isinstance(tokens, int):
                self.tokens.append(tokens)
            load = metadata.get("vllm_engine_load")
            if isinstance(load, dict):
                self.peak_running = max(
                    self.peak_running, int(load.get("peak_running_requests") or 0)
                )
                kv = float(load.get("peak_kv_cache_usage") or 0.0)
                self.peak_kv_usage = max(self.peak_kv_usage, kv)
            if metadata.get("cache_status") != "warm":
                reasons.add("it paid the container's cold load or compile: not a warm figure")
            mode = metadata.get("vllm_execution_mode")
            if metadata.get("backend") == "vllm" and mode != self.execution_mode:
                reasons.add(f"served in vLLM mode {mode!r}, {self.execution_mode!r} was deployed")
        if reasons:
            self.refused.append(
                {
                    "chunk": result.chunk_id,
                    "images": len(good),
                    "refused": "; ".join(sorted(reasons)),
                }
            )
        else:
            self.warm_images += len(good)
            self.warm_seconds += result.worker_seconds

    def failed(self, indices: Sequence[int], message: str) -> None:
        self.errors.extend(message for _ in indices)


_SUMMARY_FIGURES = ("warm_images_per_gpu_second", "tokens_per_caption", "peak_kv_cache_usage")


@dataclasses.dataclass
class _Pass:
    """One pass's headline figures (typed) beside its JSON record."""

    workers: int
    images_per_second: float
    images_per_gpu_second: float
    gpu_seconds: float
    figures: WireDict
    refused: list[WireDict]
    record: WireDict
    scaling: float | None = None


def _caption_figures(counter: _Counter) -> WireDict:
    tokens = sorted(counter.tokens)
    return {
        "tokens_per_caption": {
            "mean": round(sum(tokens) / len(tokens), 2) if tokens else None,
            "min": tokens[0] if tokens else None,
            "max": tokens[-1] if tokens else None,
        },
        "peak_running_requests": counter.peak_running,
        "peak_kv_cache_usage": round(counter.peak_kv_usage, 4),
        "warm_images": counter.warm_images,
        "warm_images_per_gpu_second": (
            round(counter.warm_images / counter.warm_seconds, 4) if counter.warm_seconds else None
        ),
        "refused_chunks": counter.refused,
    }


def photo_like(index: int, side: int) -> PILImage:
    """A synthetic photograph: a lit gradient, a few shapes, sensor noise (PIL only).

    Deterministic per ``index``; each image differs in light, shapes and
    noise, so JPEG keeps real detail and the vision tower and the caption
    see a scene, not a flat colour.
    """
    import random

    from PIL import Image, ImageDraw, ImageFilter

    rng = random.Random(index)
    light = Image.radial_gradient("L").resize((side, side))
    tint = tuple(rng.randrange(60, 256) for _ in range(3))
    scene = Image.merge("RGB", [light.point(lambda v, t=t: 255 - v * t // 255) for t in tint])
    draw = ImageDraw.Draw(scene)
    for _ in range(rng.randrange(3, 9)):
        x, y = rng.randrange(side), rng.randrange(side)
        size = rng.randrange(side // 16, side // 3)
        box = (x - size, y - size, x + size, y + size)
        fill = tuple(rng.randrange(256) for _ in range(3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)(box, fill=fill)
    scene = scene.filter(ImageFilter.GaussianBlur(side / 256))
    grain = Image.frombytes("RGB", (side, side), rng.randbytes(side * side * 3))
    return Image.blend(scene, grain, 0.12 + (index % 8) / 100)  # sensor noise, seeded


def _dataset(folder: Path, count: int, side: int) -> list[FanOutImage]:
    folder.mkdir(parents=True, exist_ok=True)
    images = []
    for index in range(count):
        path = folder / f"bench-{index:05d}.jpg"
        photo_like(index, side).save(path, quality=90)
        images.append(FanOutImage(index, path.name, functools.partial(_encode, path, index)))
    return images


def _encode(path: Path, index: int) -> ChunkImage:
    return encode_image_file(path, index=index)


def run_caption_benchmark(
    target: CaptionTarget,
    workload: CaptionWorkload,
    workers: Sequence[int],
    *,
    source: WireDict,
    progress: ProgressCallback = ignore_progress,
) -> WireDict:
    """Run one cold pass per worker count; return the JSON-ready report.

    Args:
        target: A ``TransportBenchTarget`` (its transport and ``stop_app``).
        workload: What every pass captions.
        workers: Worker counts, one pass each.
        source: What ran (commit, dirty flag, code fingerprint, image pins).
        progress: Every pass's bar and status text.
    """
    settings = GenerationSettings(
        temperature=0.0,
        max_new_tokens=workload.max_new_tokens,
        min_new_tokens=workload.max_new_tokens,  # every caption as long: no early EOS
    )
    passes: list[_Pass] = []
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
            counter = _Counter(workload.execution_mode)
            report = caption_fan_out(
                Dispatcher(target.transport), job, images, counter, progress=progress
            )
            record = report.to_dict()
            del record["modal_per_worker"]  # shown below, with each worker's rate
            per_worker: WireDict = {
                key: {
                    **value,
                    "images_per_second": (
                        round(value["images"] / value["seconds"], 4) if value["seconds"] else 0.0
                    ),
                }
                for key, value in report.per_worker.items()
            }
            figures = _caption_figures(counter)
            passes.append(
                _Pass(
                    workers=count,
                    images_per_second=report.images_per_second,
                    images_per_gpu_second=report.images_per_gpu_second,
                    gpu_seconds=round(report.gpu_seconds, 3),
                    figures=figures,
                    refused=counter.refused,
                    record={
                        "workers": count,
                        "captioned": counter.captioned,
                        "failed": len(counter.errors),
                        **{k.removeprefix("modal_"): v for k, v in record.items()},
                        "per_worker": per_worker,
                        **figures,
                    },
                )
            )
    base = next((p for p in passes if p.workers == 1), None)
    for entry in passes:
        if base is not None and base.images_per_second:
            ideal = entry.workers * base.images_per_second
            entry.scaling = round(entry.images_per_second / ideal, 3)
            entry.record["scaling"] = entry.scaling
    return {
        "source": source,
        "workload": {**dataclasses.asdict(workload), "settings": settings.to_dict()},
        "plan": {"workers": list(workers), "passes": "cold: the app is stopped before each"},
        "refused_chunks": [{"workers": p.workers, **chunk} for p in passes for chunk in p.refused],
        "app_name": target.transport.app_name,
        "passes": [p.record for p in passes],
        "summary": {
            f"workers_{p.workers}": {
                "images_per_second": p.images_per_second,
                "images_per_gpu_second": p.images_per_gpu_second,
                "gpu_seconds": p.gpu_seconds,
                "scaling": p.scaling,
                **{name: p.figures[name] for name in _SUMMARY_FIGURES},
            }
            for p in passes
        },
    }
