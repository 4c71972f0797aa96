"""Evidence: does bitsandbytes' CPU backend run 4-bit NF4 and 8-bit with Transformers?

The workspace's dev environment carries the ``bitsandbytes`` extra
(bitsandbytes 0.50.2, accelerate), so::

    uv run python bench/bench_bnb_cpu.py --out bench/results/bnb.json

For each of none / 8-bit / 4-bit NF4 it loads the test world's tiny random
SmolVLM (``AutoModelForImageTextToText``, ``device_map="cpu"``), counts the
bitsandbytes layers that replaced ``nn.Linear``, reads the memory footprint,
and generates 16 greedy tokens from a text prompt and from an image, timing
the load and the decode. A case that fails records the exception instead.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

TOKENS = 16


def _case(kind: str, checkpoint: Path) -> dict[str, Any]:
    import torch
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor, BitsAndBytesConfig

    config = {
        "none": None,
        "8bit": BitsAndBytesConfig(load_in_8bit=True),
        "nf4": BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.float32
        ),
    }[kind]
    started = time.perf_counter()
    model = AutoModelForImageTextToText.from_pretrained(
        checkpoint, quantization_config=config, device_map="cpu", dtype=torch.float32
    )
    load_seconds = time.perf_counter() - started
    processor = AutoProcessor.from_pretrained(checkpoint)
    layers: dict[str, int] = {}
    for module in model.modules():
        name = type(module).__name__
        if name in ("Linear", "Linear8bitLt", "Linear4bit"):
            layers[name] = layers.get(name, 0) + 1
    result: dict[str, Any] = {
        "load_seconds": round(load_seconds, 3),
        "linear_layers": layers,
        "memory_footprint_bytes": int(model.get_memory_footprint()),
    }
    for label, content, images in (
        ("text", [{"type": "text", "text": "describe the image please"}], None),
        (
            "image",
            [{"type": "image"}, {"type": "text", "text": "describe"}],
            [Image.new("RGB", (48, 40), "red")],
        ),
    ):
        messages = [{"role": "user", "content": content}]
        prompt = processor.apply_chat_template(
            messages, add_generation_prompt=True, enable_thinking=False
        )
        inputs = processor(text=prompt, images=images, return_tensors="pt")
        started = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(**inputs, max_new_tokens=TOKENS, do_sample=False)
        seconds = time.perf_counter() - started
        new = out[0, inputs["input_ids"].shape[1] :].tolist()
        result[label] = {
            "generated_tokens": len(new),
            "token_ids": new,
            "seconds": round(seconds, 3),
            "tokens_per_second": round(len(new) / seconds, 1),
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    import bitsandbytes
    import torch
    import transformers
    from comfy_llm_testworld.checkpoints import write_checkpoint

    report: dict[str, Any] = {
        "machine": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "bitsandbytes": bitsandbytes.__version__,
        "cuda_available": torch.cuda.is_available(),
        "cases": {},
    }
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = write_checkpoint("smolvlm", Path(folder) / "smolvlm")
        for kind in ("none", "8bit", "nf4"):
            try:
                report["cases"][kind] = _case(kind, checkpoint)
            except Exception as error:
                report["cases"][kind] = {
                    "error": f"{type(error).__name__}: {error}",
                    "where": traceback.format_exc().splitlines()[-3:],
                }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
