"""``python -m comfy_llm_modal_remote.bench``: the Modal benchmark (billable).

Deploys an isolated app (``comfy-llm-bench-<random>``, its own name so the
installation's warm workers are untouched), runs the cold cycles planned by
``_bench`` and writes the JSON report. Needs Modal credentials; the app is
stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

from ._bench import Workload, plan_benchmark, run_benchmark, source_revision
from ._dispatch import Dispatcher
from ._transport import ModalTransport, check_modal_available

__all__ = ["ModalBenchTarget", "main"]


class ModalBenchTarget:
    """The real target: an isolated app, stopped with ``modal app stop``."""

    def __init__(self, app_name: str, record_dir: Path) -> None:
        self.transport = ModalTransport(app_name, record_dir)
        self.dispatcher = Dispatcher(self.transport, affinity_key="bench")

    def stop_app(self) -> None:
        """Stop the app (a missing app is fine) and deploy it again on the next call."""
        subprocess.run(["modal", "app", "stop", "-y", self.transport.app_name], check=False)
        self.transport.forget_deployment()
        self.dispatcher.forget_staged()  # each cold cycle runs the real stager


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m comfy_llm_modal_remote.bench")
    parser.add_argument("--model", required=True, help="owner/model@revision or a curated id")
    parser.add_argument("--gpu", default="RTX-PRO-6000")
    parser.add_argument("--cycles", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2, help="resident repeats per cycle")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--image-size", type=int, default=512)
    parser.add_argument("--output", type=Path, default=Path("modal-bench.json"))
    args = parser.parse_args(argv)
    check_modal_available()
    from comfy_llm_inputs import PreparedInputs
    from comfy_llm_residency import GenerationSettings
    from PIL import Image

    workload = Workload(
        model=args.model,
        gpu=args.gpu,
        image_size=args.image_size,
        max_new_tokens=args.max_new_tokens,
    )
    images = (Image.new("RGB", (args.image_size,) * 2, (200, 30, 30)),) if args.image_size else ()
    name = f"comfy-llm-bench-{secrets.token_hex(4)}"
    target = ModalBenchTarget(name, Path(tempfile.mkdtemp(prefix="comfy-llm-bench-")))
    try:
        report = run_benchmark(
            target,
            workload,
            plan_benchmark(args.cycles, args.repeats),
            prepare=lambda profile: PreparedInputs(workload.prompt, images=images),
            settings=GenerationSettings(temperature=0.0, max_new_tokens=args.max_new_tokens),
            source=source_revision(Path(__file__).resolve().parent),
        )
    finally:
        target.stop_app()
    args.output.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
