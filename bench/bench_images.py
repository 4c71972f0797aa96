"""Benchmark: peak memory of one huge image file on its way into a request.

Writes a real 12000x12000 8-bit RGB PNG (row by row, so the writer itself
stays small), then measures two cases, each in its own fresh process (peak
RSS from ``os.wait4``'s ``ru_maxrss``, wall time from the parent)::

    uv run --frozen python bench/bench_images.py --out bench/results/images.json

* ``before``: the path ``comfy-llm run --image`` took before bounded decoding:
  Pillow opens and converts the whole image to RGB, then the ComfyUI IMAGE
  conversion (``images_from_comfy``) turns it into float arrays;
* ``after``: ``prepare_inputs(images=[path])``, which checks the header
  against ``ImageLimits.max_image_pixels``, decodes once and downscales to
  ``ImageLimits.max_image_side`` at once.

``--skip-before`` skips the old path (it needs ~7 GB of RAM).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SIDE = 12000
TARGET_AFTER_MB = 1500.0


def worker(case: str, image: str) -> dict[str, Any]:
    import warnings

    from comfy_llm_inputs import images_from_comfy, prepare_inputs
    from PIL import Image

    started = time.monotonic()
    if case == "before":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(image) as opened:
                rgb = opened.convert("RGB")
        result = images_from_comfy([rgb])
    else:
        result = prepare_inputs("describe", images=[image]).images_in_order()
    return {"seconds": round(time.monotonic() - started, 3), "size": list(result[0].size)}


def measure(case: str, image: Path) -> dict[str, Any]:
    started = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, __file__, "--worker", case, str(image)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    output = child.stdout.read()
    _pid, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"case {case} failed with exit code {child.returncode}")
    report = json.loads(output)
    report.update(
        process_wall_seconds=round(time.monotonic() - started, 3),
        peak_rss_mb=round(usage.ru_maxrss / 1024, 1),  # kilobytes on Linux
    )
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the JSON report here")
    parser.add_argument("--skip-before", action="store_true", help="skip the old path")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return

    from comfy_llm_testworld.media import write_large_png

    with tempfile.TemporaryDirectory() as workdir:
        image = write_large_png(Path(workdir) / "huge.png", SIDE, SIDE)
        cases = {"after": measure("after", image)}
        if not args.skip_before:
            cases["before"] = measure("before", image)
        report = {
            "image": {"width": SIDE, "height": SIDE, "file_bytes": image.stat().st_size},
            "machine": {"platform": platform.platform(), "python": platform.python_version()},
            "cases": cases,
            "checks": {"after_peak_rss_below_mb": TARGET_AFTER_MB},
            "passed": cases["after"]["peak_rss_mb"] < TARGET_AFTER_MB,
        }
    text = json.dumps(report, indent=2, sort_keys=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
