"""The Modal benchmark (billable): ``comfy-llm modal-bench``, or ``python -m`` this module.

Deploys an isolated app (``comfy-llm-bench-<random>``, its own name so the
installation's warm workers are untouched) with the chosen vLLM execution
mode, runs the cold cycles planned by ``_bench`` and writes the JSON report.
Needs Modal credentials (checked before anything else); the app is stopped
and its progress queue deleted at the end. The transport is the only part a
test replaces (``use_transport``): the planning, the run and the report are
the same code either way.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, runtime_checkable

from comfy_llm_core import ProgressCallback, env_set, ignore_progress

from ..client._dispatch import Dispatcher
from ..client._transport import Transport, check_modal_available
from ..wire._fingerprint import code_fingerprint
from ..wire._plain import WireDict, as_items, as_mapping
from ._caption import CaptionWorkload, parse_workers, run_caption_benchmark
from ._requests import Workload, exact_gpu, plan_benchmark, run_benchmark, source_revision

__all__ = [
    "EXECUTION_MODES",
    "StoppableTransport",
    "TransportBenchTarget",
    "add_arguments",
    "main",
    "run_from_args",
]

EXECUTION_MODES = ("throughput", "eager", "auto")
_EXECUTION_MODE_ENV = "COMFY_MODAL_LLM_VLLM_EXECUTION_MODE"
BENCH_AFFINITY_KEY = "bench"


@runtime_checkable
class StoppableTransport(Transport, Protocol):
    """A transport whose app can be stopped (all containers go, Volumes stay)."""

    def stop_app(self) -> None:
        """Stop the app; the next call deploys it again on new containers."""
        ...


class TransportBenchTarget:
    """The benchmark's target: a dispatcher on its own affinity key, and the app's stop."""

    def __init__(self, transport: StoppableTransport) -> None:
        self.transport = transport
        self.dispatcher = Dispatcher(transport, affinity_key=BENCH_AFFINITY_KEY)

    def stop_app(self) -> None:
        """Stop the app; each cold cycle then runs the real stager again."""
        self.transport.stop_app()
        self.dispatcher.forget_staged()


def _count(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"give a whole number >= {minimum}, not {text!r}")
        return value

    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's options (shared by both entry points)."""
    parser.add_argument("--model", required=True, help="owner/model@revision or a curated id")
    parser.add_argument("--gpu", default="RTX-PRO-6000", help="the Modal GPU type")
    parser.add_argument(
        "--cycles", type=_count(1), default=2, help="cold cycles (each a new container)"
    )
    parser.add_argument("--repeats", type=_count(0), default=2, help="resident repeats per cycle")
    parser.add_argument(
        "--max-new-tokens",
        type=_count(1),
        default=None,
        help="tokens per request (default 128); with --caption, exactly this many per caption "
        "(default 64, the caption goal's workload)",
    )
    parser.add_argument(
        "--image-size", type=_count(0), default=512, help="side of the synthetic image, 0 for none"
    )
    parser.add_argument(
        "--execution-mode",
        choices=EXECUTION_MODES,
        default="throughput",
        help="the vLLM execution mode deployed with the bench app (throughput measures "
        "first and cached compilation, eager the plain load)",
    )
    parser.add_argument(
        "--output", type=Path, default=Path("modal-bench.json"), help="where the report goes"
    )
    parser.add_argument(
        "--caption",
        action="store_true",
        help="measure captioning on N GPUs instead (one cold pass per --workers count)",
    )
    parser.add_argument(
        "--workers", default="1,8", help="with --caption: worker counts, one pass each"
    )
    parser.add_argument(
        "--images", type=_count(1), default=512, help="with --caption: images per pass"
    )
    parser.add_argument(
        "--chunk-images", type=_count(1), default=None, help="with --caption: images per chunk"
    )


def _source() -> WireDict:
    from ..wire._image import _lock

    lock = _lock()
    pins = [pin for pin in lock["requirements"] if pin.split("==")[0].lower() in _STACK]
    return {
        **source_revision(Path(__file__).resolve().parent),
        "code_fingerprint": code_fingerprint(),
        "image": {
            "python_version": lock["python_version"],
            "uv_version": lock["uv_version"],
            "pins": sorted(pins),
        },
    }


_STACK = ("vllm", "torch", "transformers", "flashinfer-python")


def run_from_args(
    args: argparse.Namespace, *, progress: ProgressCallback = ignore_progress
) -> WireDict:
    """Run the benchmark the arguments describe; write and return the report.

    Raises:
        ModalUnavailableError: ``modal`` or its credentials are missing
            (checked first, with the real transport only).
        ValueError: ``--cycles`` < 1, ``--repeats`` < 0, or ``--workers`` not
            a list of counts >= 1.
    """
    from ..client._connect import transport_factory

    steps = plan_benchmark(args.cycles, args.repeats)
    counts = parse_workers(args.workers) if getattr(args, "caption", False) else []
    if args.max_new_tokens is None:
        args.max_new_tokens = 64 if counts else 128
    factory = transport_factory()
    if factory is None:
        check_modal_available()
    # Deployment-scoped: baked into the bench app's image when it deploys.
    env_set(_EXECUTION_MODE_ENV, args.execution_mode)
    from comfy_llm_inputs import ImagePart, PreparedInputs
    from comfy_llm_residency.backend import GenerationSettings
    from PIL import Image

    workload = Workload(
        model=args.model,
        gpu=exact_gpu(args.gpu),
        image_size=args.image_size,
        max_new_tokens=args.max_new_tokens,
        execution_mode=args.execution_mode,
    )
    size = args.image_size
    images = (Image.new("RGB", (size, size), (200, 30, 30)),) if size > 0 else ()
    name = f"comfy-llm-bench-{secrets.token_hex(4)}"
    record_dir = Path(tempfile.mkdtemp(prefix="comfy-llm-bench-"))
    if factory is not None:
        made = factory(name, record_dir)
        if not isinstance(made, StoppableTransport):
            raise TypeError(
                f"The installed transport {type(made).__name__} has no stop_app(); the "
                "benchmark stops the app before every cold pass"
            )
        transport: StoppableTransport = made
    else:
        from ..client._transport import ModalTransport

        transport = ModalTransport(name, record_dir)
    target = TransportBenchTarget(transport)
    try:
        if counts:
            report = run_caption_benchmark(
                target,
                CaptionWorkload(
                    model=args.model,
                    gpu=exact_gpu(args.gpu),
                    images=args.images,
                    image_size=args.image_size or 1024,
                    max_new_tokens=args.max_new_tokens,
                    chunk_images=args.chunk_images,
                    execution_mode=args.execution_mode,
                ),
                counts,
                source=_source(),
                progress=progress,
            )
        else:
            report = run_benchmark(
                target,
                workload,
                steps,
                prepare=lambda profile: PreparedInputs.text(
                    workload.prompt, *(ImagePart(image) for image in images)
                ),
                settings=GenerationSettings(temperature=0.0, max_new_tokens=args.max_new_tokens),
                source=_source(),
                progress=progress,
            )
    finally:
        target.stop_app()
        delete_queue = getattr(transport, "delete_progress_queue", None)
        if callable(delete_queue):
            delete_queue()
    args.output.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    report["output"] = str(args.output)
    return report


def main(argv: list[str] | None = None) -> int:
    """``python -m comfy_llm_modal_remote.bench``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m comfy_llm_modal_remote.bench")
    add_arguments(parser)
    report = run_from_args(parser.parse_args(argv))
    for key in ("steps", "refused_chunks"):
        for sample in map(as_mapping, as_items(report.get(key, []))):
            if "refused" in sample:  # not in the summary: say why
                print(f"refused: {sample['refused']!s}", file=sys.stderr)
    print(f"wrote {report['output']!s}")
    return 0
