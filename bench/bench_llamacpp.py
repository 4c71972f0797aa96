"""Benchmark: llama.cpp versus Transformers on the same tiny model, prompt and image.

    uv run --frozen python bench/bench_llamacpp.py --out bench/results/llamacpp.json

The test world's tiny random SmolVLM runs as a Hugging Face checkpoint under
Transformers (``AutoModelForImageTextToText``, float32, the CPU) and as the
GGUF pair (model + mmproj, converted as llama.cpp's converter does; F32 and
Q8_0 text weights) under this project's llama.cpp backend. Each case runs in
its own fresh process (``--runs`` times) so that cold load and peak memory
are its own:

* ``cold_load_seconds``: from the start of the worker to a loaded model
  (imports included);
* per request (an image + text prompt, then text only), greedy,
  ``--tokens`` new tokens: ``ttft_seconds``, ``decode_tokens_per_second``
  (after the first token), ``end_to_end_seconds`` and
  ``end_to_end_tokens_per_second``;
* ``peak_rss_mb``: the worker's ``ru_maxrss`` (``os.wait4``).

Threads: both engines get ``--threads`` (torch ``set_num_threads``,
llama.cpp's default of half the cores is replaced). The model is tiny (64
wide, 2 layers), so the figures measure per-token engine overhead, not
matrix throughput.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROMPT = "describe the image please"
_WRITE = (
    "import sys; from pathlib import Path; "
    "from comfy_llm_testworld.checkpoints import write_checkpoint; "
    "from comfy_llm_testworld.gguf_checkpoints import write_gguf_pair; "
    "root = Path(sys.argv[1]); write_checkpoint('smolvlm', root / 'hf'); "
    "write_gguf_pair(root / 'gguf'); write_gguf_pair(root / 'gguf', quantization='Q8_0')"
)


def _image() -> Any:
    from PIL import Image

    image = Image.new("RGB", (48, 40), (200, 30, 30))
    image.paste((20, 20, 220), (0, 0, 24, 20))
    return image


class _Clock:
    """Token timestamps: a Transformers streamer (``put``/``end``) and a backend callback."""

    def __init__(self, stamps: list[float]) -> None:
        self.stamps = stamps

    def put(self, value: Any) -> None:
        self.stamps.append(time.perf_counter())

    def end(self) -> None:
        pass

    # the residency TokenSink the llama.cpp backend reports to
    def token(self, token_id: int, text: str) -> None:
        self.stamps.append(time.perf_counter())

    def step(self, token_ids: Any, text: str) -> None:
        self.stamps.extend(time.perf_counter() for _ in token_ids)

    def prompt_opened(self, opened: bool) -> None:
        pass

    def wait(self) -> None:
        pass


def _transformers(folder: Path, tokens: int, threads: int) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    torch.set_num_threads(threads)
    model = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32)
    processor = AutoProcessor.from_pretrained(folder)
    loaded_at = time.perf_counter()
    runs = {}
    for label, images in (("image", [_image()]), ("text", None)):
        content = ([{"type": "image"}] if images else []) + [{"type": "text", "text": PROMPT}]
        started = time.perf_counter()
        prompt = processor.apply_chat_template(
            [{"role": "user", "content": content}],
            add_generation_prompt=True,
            enable_thinking=False,
        )
        inputs = processor(text=prompt, images=images, return_tensors="pt")
        stamps: list[float] = []
        clock = _Clock(stamps)

        with torch.inference_mode():
            model.generate(
                **inputs,
                max_new_tokens=tokens,
                min_new_tokens=tokens,
                do_sample=False,
                streamer=clock,
            )
        runs[label] = _timing(started, stamps[1:], tokens)  # the first put() is the prompt
    return {"loaded_at": loaded_at, "runs": runs}


def _llamacpp(folder: Path, tokens: int, threads: int, quantization: str) -> dict[str, Any]:
    from comfy_llm_backend_llamacpp import LlamaCppBackend
    from comfy_llm_inputs import ImagePart, PreparedInputs
    from comfy_llm_residency.backend import GenerationSettings

    model = next(folder.glob(f"tiny-smolvlm-{quantization}.gguf"))
    projector = next(folder.glob("mmproj-*.gguf"))
    backend = LlamaCppBackend.open(model, projector, context_tokens=1024, threads=threads)
    loaded_at = time.perf_counter()
    runs = {}
    for label, images in (("image", (_image(),)), ("text", ())):
        inputs = PreparedInputs.text(PROMPT, *map(ImagePart, images))
        stamps: list[float] = []
        started = time.perf_counter()
        result = backend.generate(
            inputs,
            GenerationSettings(temperature=0, max_new_tokens=tokens, enable_reasoning=False),
            _Clock(stamps),
        )
        runs[label] = _timing(started, stamps, len(result.token_ids))
    backend.close()
    return {"loaded_at": loaded_at, "runs": runs}


def _timing(started: float, stamps: list[float], count: int) -> dict[str, Any]:
    end = stamps[-1] if stamps else time.perf_counter()
    decode = stamps[-1] - stamps[0] if len(stamps) >= 2 else 0.0
    return {
        "tokens": count,
        "ttft_seconds": round(stamps[0] - started, 4) if stamps else None,
        "decode_tokens_per_second": round((len(stamps) - 1) / decode, 1) if decode > 0 else None,
        "end_to_end_seconds": round(end - started, 4),
        "end_to_end_tokens_per_second": round(count / (end - started), 1),
    }


def worker(case: str, folder: str, tokens: int, threads: int, started: float) -> None:
    path = Path(folder)
    if case == "transformers-f32":
        result = _transformers(path / "hf", tokens, threads)
    else:
        result = _llamacpp(path / "gguf", tokens, threads, case.split("-")[1].upper())
    result["cold_load_seconds"] = round(result.pop("loaded_at") - started, 4)
    print(json.dumps(result))


def _run(case: str, folder: Path, tokens: int, threads: int) -> dict[str, Any]:
    code = (
        "import sys, time; started = time.perf_counter(); "
        "sys.path.insert(0, sys.argv[1]); import bench_llamacpp as b; "
        "b.worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), started)"
    )
    argv = [sys.executable, "-c", code, str(Path(__file__).parent), case, str(folder)]
    process = subprocess.Popen(
        [*argv, str(tokens), str(threads)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise RuntimeError(f"{case} failed ({status})")
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    result["peak_rss_mb"] = round(usage.ru_maxrss / 1024, 1)
    return result


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def median(values: list[Any]) -> Any:
        values = [v for v in values if v is not None]
        return round(statistics.median(values), 4) if values else None

    out: dict[str, Any] = {
        "cold_load_seconds": median([r["cold_load_seconds"] for r in runs]),
        "peak_rss_mb": median([r["peak_rss_mb"] for r in runs]),
    }
    for label in ("image", "text"):
        out[label] = {
            key: median([r["runs"][label][key] for r in runs]) for key in runs[0]["runs"][label]
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    cases = ("transformers-f32", "llamacpp-f32", "llamacpp-q8_0")
    report: dict[str, Any] = {
        "machine": platform.platform(),
        "cores": os.cpu_count(),
        "load_average": os.getloadavg(),
        "tokens": args.tokens,
        "threads": args.threads,
        "runs": args.runs,
        "cases": {},
    }
    with tempfile.TemporaryDirectory() as folder:
        # Written in a child: a parent holding torch would lend its RSS to every
        # worker's ru_maxrss (the high-water mark survives fork until exec).
        subprocess.run([sys.executable, "-c", _WRITE, folder], check=True)
        for case in cases:
            runs = [_run(case, Path(folder), args.tokens, args.threads) for _ in range(args.runs)]
            report["cases"][case] = _summary(runs)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
