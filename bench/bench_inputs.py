"""Benchmark comfy-llm-inputs: video sampling vs. decode-everything, and PDFs.

One command builds the media, measures each case in its own process (wall
time from the parent, peak RSS from ``os.wait4``), and writes JSON::

    uv run --frozen python bench/bench_inputs.py --out bench/results/inputs.json

Cases:

* 5-second and 60-second 1920x1080 30 fps H.264 clips (libx264, preset
  veryfast, B-frames, 2-second keyframe interval), 12 frames sampled by
  ``comfy_llm_inputs.sample_video_frames``;
* the 5-second clip through a baseline shaped like ComfyUI's
  ``VideoFromFile.get_components()``: every frame decoded to a float32
  ``[N, H, W, 3]`` tensor, then 12 frames taken;
* (informative, no target) the 60-second clip re-encoded with libx264's
  default 250-frame keyframe interval, the worst case for seeking;
* a generated 200-page text PDF: extraction time and peak RSS, and the time
  to refuse a 201-page PDF over the 200-page bound.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FRAMES = 12
WIDTH, HEIGHT, FPS = 1920, 1080, 30
TARGETS = {
    "clip_5s_speedup_min": 30.0,
    "clip_5s_memory_ratio_min": 30.0,
    "clip_60s_seconds_max": 1.0,
    "clip_60s_peak_rss_mb_max": 300.0,
}


# --------------------------------------------------------------------------- media
def encoder_name() -> str:
    import av

    for name in ("libx264", "h264"):
        if name in av.codecs_available:
            return name
    raise SystemExit("no H.264 encoder in this PyAV build")


def build_clip(path: Path, seconds: int, keyint: int | None) -> dict[str, Any]:
    """Encode a panning 1080p test pattern with a moving block."""
    import av
    import numpy as np

    codec = encoder_name()
    rng = np.random.default_rng(7)
    texture = np.empty((HEIGHT + 400, WIDTH + 800, 3), np.uint8)
    yy, xx = np.mgrid[0 : texture.shape[0], 0 : texture.shape[1]]
    texture[..., 0] = (xx // 6 + yy // 9) % 256
    texture[..., 1] = (np.sin(xx / 37.0) * 60 + np.cos(yy / 23.0) * 60 + 128).astype(np.uint8)
    texture[..., 2] = ((xx * yy) // 997) % 256
    texture = np.clip(texture + rng.integers(0, 12, texture.shape, dtype=np.uint8), 0, 255)
    started = time.perf_counter()
    with av.open(str(path), "w") as out:
        stream = out.add_stream(codec, rate=FPS)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        options = {"preset": "veryfast"}
        if keyint is not None:
            options["x264-params"] = f"keyint={keyint}:scenecut=0"
        stream.options = options
        for index in range(seconds * FPS):
            x = (index * 3) % 800
            y = (index * 2) % 400
            pixels = np.ascontiguousarray(texture[y : y + HEIGHT, x : x + WIDTH])
            bx, by = (index * 17) % (WIDTH - 240), (index * 11) % (HEIGHT - 240)
            pixels[by : by + 240, bx : bx + 240] = (index * 5 % 256, 255 - index % 256, 90)
            frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    with av.open(str(path)) as probe:
        keyframes = sum(1 for packet in probe.demux(video=0) if packet.is_keyframe)
    return {
        "seconds": seconds,
        "size": f"{WIDTH}x{HEIGHT}",
        "fps": FPS,
        "encoder": codec,
        "preset": "veryfast",
        "keyframe_interval_frames": keyint or 250,
        "keyframes": keyframes,
        "bytes": path.stat().st_size,
        "encode_seconds": round(time.perf_counter() - started, 2),
    }


def build_pdf(path: Path, pages: int, lines_per_page: int = 40) -> int:
    """Write a PDF with ``pages`` pages of Helvetica text; return its size."""
    from comfy_llm_testworld.media import build_text_pdf

    data = build_text_pdf(
        [
            "\n".join(
                f"Page {n + 1}, line {row + 1}: the quick brown fox (jumps) over"
                for row in range(lines_per_page)
            )
            for n in range(pages)
        ]
    )
    path.write_bytes(data)
    return len(data)


# --------------------------------------------------------------------------- workers
def _self_peak_mb() -> float:
    """This process's own high-water RSS (VmHWM; ru_maxrss as a fallback)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker_build(workdir: str, skip_default_gop: bool) -> dict[str, Any]:
    """Build every clip and PDF (in a worker, so the parent stays small)."""
    import av

    root = Path(workdir)
    clips = {
        "5s": build_clip(root / "clip5.mp4", 5, keyint=2 * FPS),
        "60s": build_clip(root / "clip60.mp4", 60, keyint=2 * FPS),
    }
    if not skip_default_gop:
        clips["60s_default_gop"] = build_clip(root / "clip60g.mp4", 60, keyint=None)
    return {
        "clips": clips,
        "pdf_bytes": build_pdf(root / "doc200.pdf", 200),
        "pdf_over_bytes": build_pdf(root / "doc201.pdf", 201),
        "pyav": av.__version__,
        "libavcodec": ".".join(map(str, av.library_versions["libavcodec"])),
        "in_process_seconds": 0.0,
        "self_peak_rss_mb": _self_peak_mb(),
    }


def worker_sample(video: str, frames: int) -> dict[str, Any]:
    from comfy_llm_core import VideoLimits
    from comfy_llm_inputs import FileSamplerStats, sample_video_frames

    stats = FileSamplerStats()
    started = time.perf_counter()
    sampled = sample_video_frames(video, frames, limits=VideoLimits(), stats=stats)
    seconds = time.perf_counter() - started
    return {
        "in_process_seconds": seconds,
        "frames": len(sampled),
        "timestamps": [round(frame.timestamp_seconds, 3) for frame in sampled],
        "frame_size": list(sampled[0].image.size),
        "decoder": {
            "packets_decoded": stats.packets_decoded,
            "packets_skipped_nonref": stats.packets_skipped,
            "frames_decoded": stats.frames_decoded,
            "seeks": stats.seeks,
        },
        "self_peak_rss_mb": _self_peak_mb(),
    }


def worker_baseline(video: str, frames: int) -> dict[str, Any]:
    """Decode every frame to float32 like ComfyUI's get_components(), then pick."""
    import av
    import numpy as np

    try:
        import torch
    except ImportError:  # pragma: no cover - the dev environment has torch
        torch = None
    started = time.perf_counter()
    decoded = []
    with av.open(video) as container:
        for frame in container.decode(video=0):
            pixels = frame.to_ndarray(format="rgb24")
            if torch is not None:
                decoded.append(torch.from_numpy(pixels) / 255.0)
            else:
                decoded.append(pixels.astype(np.float32) / 255.0)
    images = torch.stack(decoded) if torch is not None else np.stack(decoded)
    del decoded
    count = int(images.shape[0])
    picks = [round(k * (count - 1) / (frames - 1)) for k in range(frames)]
    chosen = [images[index] for index in picks]
    seconds = time.perf_counter() - started
    return {
        "in_process_seconds": seconds,
        "frames": len(chosen),
        "decoded_frames": count,
        "tensor_gb": round(
            images.numel() * 4 / 1e9 if torch is not None else images.nbytes / 1e9, 2
        ),
        "array_library": "torch" if torch is not None else "numpy",
        "self_peak_rss_mb": _self_peak_mb(),
    }


def worker_pdf(pdf: str, pages_limit: int) -> dict[str, Any]:
    from comfy_llm_core import FileLimits
    from comfy_llm_inputs import FileInputError, read_input_files

    limits = FileLimits(
        max_pdf_pages=pages_limit, max_file_characters=10**7, max_total_characters=10**7
    )
    started = time.perf_counter()
    try:
        (extracted,) = read_input_files([pdf], limits=limits)
    except FileInputError as error:
        return {
            "in_process_seconds": time.perf_counter() - started,
            "refused": str(error),
            "self_peak_rss_mb": _self_peak_mb(),
        }
    return {
        "in_process_seconds": time.perf_counter() - started,
        "pages": extracted.page_count,
        "characters": len(extracted.text),
        "self_peak_rss_mb": _self_peak_mb(),
    }


# --------------------------------------------------------------------------- runner
def run_worker(*args: str) -> dict[str, Any]:
    """Run this script as a worker; return its JSON plus wall time and peak RSS.

    Peak RSS comes from ``os.wait4`` (the child's ru_maxrss). Linux carries
    the parent's RSS at spawn time into it, so the parent stays small (no
    numpy, no av); the child's own VmHWM is reported as ``self_peak_rss_mb``.
    """
    command = [sys.executable, __file__, "--worker", *args]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE)
    assert process.stdout is not None
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"worker {args} failed with exit code {process.returncode}")
    result = json.loads(output)
    result["process_wall_seconds"] = round(wall, 3)
    result["peak_rss_mb"] = round(usage.ru_maxrss / 1024, 1)
    result["in_process_seconds"] = round(result["in_process_seconds"], 3)
    result["self_peak_rss_mb"] = round(result["self_peak_rss_mb"], 1)
    return result


def _ratio(slow: float, fast: float) -> float:
    return round(slow / fast, 1) if fast > 0 else float("inf")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", default="bench/results/inputs.json")
    parser.add_argument("--skip-baseline", action="store_true", help="skip the ~11 GB baseline")
    parser.add_argument("--skip-default-gop", action="store_true", help="skip the 250-GOP clip")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.worker:
        kind, *rest = options.worker
        if kind == "build":
            result = worker_build(rest[0], rest[1] == "1")
        elif kind == "sample":
            result = worker_sample(rest[0], int(rest[1]))
        elif kind == "baseline":
            result = worker_baseline(rest[0], int(rest[1]))
        else:
            result = worker_pdf(rest[0], int(rest[1]))
        print(json.dumps(result))
        return

    workdir = Path(tempfile.mkdtemp(prefix="bench-inputs-"))
    try:
        print("building clips and PDFs ...", flush=True)
        built = run_worker("build", str(workdir), "1" if options.skip_default_gop else "0")
        clips = built["clips"]
        pdf_bytes = built["pdf_bytes"]

        video: dict[str, Any] = {}
        for name, file in (
            ("5s", "clip5.mp4"),
            ("60s", "clip60.mp4"),
            ("60s_default_gop", "clip60g.mp4"),
        ):
            if name not in clips:
                continue
            print(f"sampling {FRAMES} frames of the {name} clip ...", flush=True)
            video[name] = {
                "clip": clips[name],
                "inputs": run_worker("sample", str(workdir / file), str(FRAMES)),
            }
        if not options.skip_baseline:
            print("baseline: decode every frame of the 5s clip to float32 ...", flush=True)
            base = run_worker("baseline", str(workdir / "clip5.mp4"), str(FRAMES))
            ours = video["5s"]["inputs"]
            video["5s"]["baseline"] = base
            video["5s"]["ratios"] = {
                "process_wall": _ratio(base["process_wall_seconds"], ours["process_wall_seconds"]),
                "in_process": _ratio(base["in_process_seconds"], ours["in_process_seconds"]),
                "peak_rss": _ratio(base["peak_rss_mb"], ours["peak_rss_mb"]),
            }
        print("PDF extraction and refusal ...", flush=True)
        pdf = {
            "extract_200_pages": {
                "bytes": pdf_bytes,
                **run_worker("pdf", str(workdir / "doc200.pdf"), "200"),
            },
            "refuse_201_pages": run_worker("pdf", str(workdir / "doc201.pdf"), "200"),
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    checks = {}
    if "ratios" in video.get("5s", {}):
        ratios = video["5s"]["ratios"]
        checks["clip_5s_speedup"] = {
            "process_wall": ratios["process_wall"],
            "in_process": ratios["in_process"],
            "target_min": TARGETS["clip_5s_speedup_min"],
            "met": min(ratios["process_wall"], ratios["in_process"])
            >= TARGETS["clip_5s_speedup_min"],
        }
        checks["clip_5s_memory_ratio"] = {
            "value": ratios["peak_rss"],
            "target_min": TARGETS["clip_5s_memory_ratio_min"],
            "met": ratios["peak_rss"] >= TARGETS["clip_5s_memory_ratio_min"],
        }
    sixty = video["60s"]["inputs"]
    checks["clip_60s_seconds"] = {
        "process_wall": sixty["process_wall_seconds"],
        "in_process": sixty["in_process_seconds"],
        "target_max": TARGETS["clip_60s_seconds_max"],
        "met_in_process": sixty["in_process_seconds"] < TARGETS["clip_60s_seconds_max"],
        "met_process_wall": sixty["process_wall_seconds"] < TARGETS["clip_60s_seconds_max"],
    }
    checks["clip_60s_peak_rss_mb"] = {
        "value": sixty["peak_rss_mb"],
        "target_max": TARGETS["clip_60s_peak_rss_mb_max"],
        "met": sixty["peak_rss_mb"] < TARGETS["clip_60s_peak_rss_mb_max"],
    }
    result = {
        "benchmark": "comfy-llm-inputs",
        "frames_sampled": FRAMES,
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_at_end": [round(v, 2) for v in os.getloadavg()],
            "python": platform.python_version(),
            "platform": platform.platform(),
            "pyav": built["pyav"],
            "libavcodec": built["libavcodec"],
        },
        "video": video,
        "pdf": pdf,
        "checks": checks,
    }
    out = Path(options.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(checks, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
