"""Benchmark: warm requests through the whole node path versus the raw backend.

Run from the workspace root::

    uv run --frozen python bench/bench_node.py --out bench/results/node.json

Everything is offline: a fake Hugging Face Hub (the test world's) serves a
tiny random Qwen3.5 checkpoint, and each backend runs on the CPU
(Transformers through target ``local_cpu``; MLX-VLM through ``local_apple``,
i.e. ``mlx[cpu]`` on Linux). Per backend, in one process:

1. one cold request through ``ModalLLMNode.execute`` with the ComfyUI
   stand-in (progress bar, interrupt checks, live text included), its time
   split into stages from the ProgressEvent stream;
2. ``--runs`` warm requests through the same node path, interleaved with
3. ``--runs`` raw ``backend.generate`` calls on a backend created directly
   from the same snapshot, with the same prepared inputs and settings and a
   token sink that only measures;
4. medians of decode tokens/s (metadata vs that sink) and of
   end-to-end tokens/s (tokens / wall time), their ratios, the warm-hit
   overhead in milliseconds and where the per-token callback time goes.

This is a benchmark, not a test: it asserts nothing, it reports. See
bench/README.md for how to read the figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPOSITORY = "bench/qwen35"
CHECKPOINT_KIND = "qwen3_5"
NODE_ID = "bench-1"

# backend name -> (execution target, backend package)
BACKENDS: dict[str, tuple[str, str]] = {
    "transformers": ("local_cpu", "comfy_llm_backend_cuda"),
    "mlx_vlm": ("local_apple", "comfy_llm_backend_mlx"),
    "llama_cpp": ("local_cpu", "comfy_llm_backend_llamacpp"),
}

# llama.cpp runs GGUF files from disk: the test world's tiny SmolVLM as a Q8_0 model +
# mmproj pair in the stand-in's models/LLM (a local reference, used in place).
GGUF_FOLDER = "bench-gguf"
GGUF_REFERENCE = f"models/LLM/{GGUF_FOLDER}/tiny-smolvlm-Q8_0.gguf"
# ``--gguf wide``: a random GGUF pair 1024 wide with 8 layers (bench/wide_gguf.py), whose
# per-token engine time (about 20 ms on one core) is a real model's, not a toy's.
WIDE_FOLDER = "bench-gguf-wide"


def reference_for(name: str, gguf: str = "tiny") -> str:
    """What the node is given for ``name``: the Hub repository, or the GGUF file on disk."""
    if name != "llama_cpp":
        return REPOSITORY
    if gguf == "wide":
        from wide_gguf import WIDE_NAME

        return f"models/LLM/{WIDE_FOLDER}/{WIDE_NAME}"
    return GGUF_REFERENCE


# A random model may stop early on its end token; the first candidate whose
# greedy generation fills the whole token budget is used for the warm runs.
PROMPTS = (
    "Describe the image in detail.",
    "What is in this picture? Answer at length.",
    "Write a long story about the colours you see.",
    "List every object in the image, one per line.",
    "Explain step by step what the image shows.",
)

VERSIONED_DISTRIBUTIONS = (
    "comfy-llm",
    "comfy-llm-residency",
    "comfy-llm-backend-cuda",
    "comfy-llm-backend-mlx",
    "comfy-llm-backend-llamacpp",
    "comfy-llm-profiles",
    "comfy-llm-staging",
    "comfy-llm-inputs",
    "comfy-llm-reasoning",
    "torch",
    "transformers",
    "mlx",
    "mlx-vlm",
    "llama-cpp-python",
    "huggingface-hub",
    "numpy",
)


# ---------------------------------------------------------------------------
# set-up
# ---------------------------------------------------------------------------
def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/node.json"))
    parser.add_argument("--runs", type=int, default=20, help="warm node runs and raw runs each")
    parser.add_argument("--tokens", type=int, default=128, help="max_new_tokens")
    parser.add_argument(
        "--backends",
        default=",".join(BACKENDS),
        help=f"comma-separated subset of {','.join(BACKENDS)}",
    )
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="torch intra-op threads (default 1: on a shared CPU, 2+ threads spin in "
        "OpenMP barriers whenever another process takes a core; 0 keeps torch's default)",
    )
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="Transformers' device: cpu (target local_cpu) or cuda (target local_cuda)",
    )
    parser.add_argument(
        "--gguf",
        choices=("tiny", "wide"),
        default="tiny",
        help="llama.cpp's model: the test world's tiny SmolVLM pair, or the same pair with a "
        "wider random text model (per-token time of a real model)",
    )
    parser.add_argument(
        "--no-reasoning",
        action="store_true",
        help="enable_reasoning=False (default True, the node's default)",
    )
    args = parser.parse_args(argv)
    args.backends = [name.strip() for name in args.backends.split(",") if name.strip()]
    unknown = sorted(set(args.backends) - set(BACKENDS))
    if unknown:
        parser.error(f"unknown backend(s) {unknown}; choose from {sorted(BACKENDS)}")
    if args.runs < 1 or args.tokens < 2:
        parser.error("--runs must be >= 1 and --tokens >= 2")
    return args


def _prepare_environment(workdir: Path) -> None:
    """Point every Hub- and storage-reading module at throwaway places.

    Must run before anything imports huggingface_hub.
    """
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    os.environ["HF_HOME"] = str(workdir / "hf_home")
    os.environ["COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT"] = str(workdir / "storage")
    os.environ["COMFYUI_STANDIN_BASE"] = str(workdir / "ComfyUI")
    # the models come from the loopback fake Hub: an offline switch would refuse them
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.pop(name, None)


def _versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in VERSIONED_DISTRIBUTIONS:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def _machine() -> dict[str, Any]:
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "python": sys.version.split()[0],
        "cpu_count": os.cpu_count(),
    }
    if hasattr(os, "sched_getaffinity"):
        info["usable_cpus"] = len(os.sched_getaffinity(0))
    try:
        import psutil

        memory = psutil.virtual_memory()
        info["memory_total_gb"] = round(memory.total / 2**30, 1)
        info["memory_available_gb"] = round(memory.available / 2**30, 1)
    except ImportError:
        pass
    try:
        import torch

        info["torch_threads"] = torch.get_num_threads()
    except ImportError:
        pass
    return info


# ---------------------------------------------------------------------------
# instrumentation of the node path
# ---------------------------------------------------------------------------
@dataclasses.dataclass
class CpuStamps:
    """This thread's CPU time at the first and the last token (``time.thread_time``).

    llama.cpp decodes on the calling thread at one thread (the backend's
    default on this 2-core box), so the CPU seconds between the first and the
    last token are the decode's own plus the caller's per-token work, and do
    not grow when other processes take the cores (wall time does).
    """

    first: float | None = None
    last: float | None = None
    tokens: int = 0

    def record(self) -> None:
        now = time.thread_time()
        if self.first is None:
            self.first = now
        self.last = now
        self.tokens += 1

    @property
    def us_per_token(self) -> float | None:
        if self.first is None or self.last is None or self.tokens < 2:
            return None
        return 1e6 * (self.last - self.first) / (self.tokens - 1)


@dataclasses.dataclass
class RequestRecord:
    """What the hooks saw during one node request (times relative to its start)."""

    started: float = 0.0
    events: list[tuple[str, str, float]] = dataclasses.field(default_factory=list)
    tokens: int = 0
    last_stage: str | None = None
    last_token_at: float | None = None
    relay_seconds: float = 0.0
    glue_progress_seconds: float = 0.0
    glue_token_seconds: float = 0.0
    cpu: CpuStamps = dataclasses.field(default_factory=CpuStamps)


class NodeHooks:
    """Time-stamps ProgressEvents and measures per-token callback cost.

    Wraps, for the duration of the benchmark, ``ComfyGlue.progress`` and
    ``ComfyGlue.on_token`` (the node's ComfyUI glue) and the resident
    manager's ``TokenRelay.__call__`` (ProgressEvent per token + glue). Each
    wrapper adds two ``perf_counter`` calls (well under a microsecond).
    """

    def __init__(self) -> None:
        self.record = RequestRecord()
        self._undo: list[Callable[[], None]] = []

    def start(self) -> RequestRecord:
        self.record = RequestRecord(started=time.perf_counter())
        return self.record

    @contextmanager
    def installed(self) -> Iterator[NodeHooks]:
        from comfy_llm import ComfyGlue
        from comfy_llm_core import ProgressStage
        from comfy_llm_residency import TokenRelay

        generate = ProgressStage.GENERATE
        hooks = self
        clock = time.perf_counter

        original_progress = ComfyGlue.progress
        original_on_token = ComfyGlue.on_token
        original_relay = TokenRelay.token

        def progress(glue: Any, event: Any) -> None:
            began = clock()
            record = hooks.record
            stage = event.stage
            if stage is generate and event.token_id is None:
                # An engine's prefill cancel point (``TokenSink.wait``: one per
                # llama.cpp prompt batch or libmtmd chunk) is a GENERATE event without
                # a token: part of the prefill span, neither a token nor a stage change
                # (counted as tokens, it made 64 requested tokens read 75).
                pass
            elif stage is generate:
                record.last_token_at = began - record.started
                if record.last_stage != "generate":
                    record.events.append(("generate", event.message, began - record.started))
                record.last_stage = stage.value
            else:
                record.events.append((stage.value, event.message, began - record.started))
                record.last_stage = stage.value
            try:
                original_progress(glue, event)
            finally:
                if stage is generate:
                    record.glue_progress_seconds += clock() - began

        def on_token(glue: Any, token_id: int, text: str) -> None:
            began = clock()
            record = hooks.record
            record.cpu.record()
            record.tokens += 1  # once per token, step-wise engines included
            # GENERATE events come at most 20 a second: the last token is seen here
            record.last_token_at = began - record.started
            try:
                original_on_token(glue, token_id, text)
            finally:
                record.glue_token_seconds += clock() - began

        def relay(self_: Any, token_id: int, text: str) -> None:
            began = clock()
            try:
                original_relay(self_, token_id, text)
            finally:
                hooks.record.relay_seconds += clock() - began

        ComfyGlue.progress = progress  # type: ignore[method-assign]
        ComfyGlue.on_token = on_token  # type: ignore[method-assign]
        TokenRelay.token = relay  # type: ignore[method-assign]
        try:
            yield self
        finally:
            ComfyGlue.progress = original_progress  # type: ignore[method-assign]
            ComfyGlue.on_token = original_on_token  # type: ignore[method-assign]
            TokenRelay.token = original_relay  # type: ignore[method-assign]


def stage_split(
    events: list[tuple[str, str, float]], last_token_at: float | None, total: float
) -> tuple[dict[str, float], dict[str, float]]:
    """Seconds per stage from stage-transition timestamps, and each stage's tail.

    A stage runs from its first event to the first event of the next stage.
    Two spans are cut out where the stream says more: ``prefill`` runs from
    the last LOAD event to the first token (prompt rendering, processor,
    vision tower, prompt forward pass; on a warm hit LOAD is one "Using
    resident" event), and ``finish`` from the last token to the DONE event
    (reasoning parse, metadata, memory reading). ``startup`` is execute()
    start to the first event, ``done`` the DONE event to execute() returning.

    The tails (last event of a stage to the next stage's first event) show
    work done after a stage's last report, e.g. the first import of
    ``comfy_llm_inputs`` shows up as the download stage's tail.
    """
    runs: list[list[Any]] = []  # [stage, first at, last at]
    for stage, _message, at in events:
        if runs and runs[-1][0] == stage:
            runs[-1][2] = at
        else:
            runs.append([stage, at, at])
    for run in runs:  # only the first GENERATE event is kept; the hooks saw the last
        if run[0] == "generate" and last_token_at is not None:
            run[2] = max(run[2], last_token_at)
    marks: list[tuple[str, float]] = [("startup", 0.0)]
    tails: dict[str, float] = {}
    for index, (stage, first, last) in enumerate(runs):
        following = runs[index + 1] if index + 1 < len(runs) else None
        marks.append((stage, first))
        if following is not None:
            tails[stage] = tails.get(stage, 0.0) + max(0.0, following[1] - last)
        if stage == "load" and following is not None and following[0] == "generate":
            marks.append(("prefill", last))
        if stage == "generate" and last_token_at is not None:
            marks.append(("finish", last_token_at))
    split: dict[str, float] = {}
    for (stage, at), (_next, until) in zip(marks, [*marks[1:], ("end", total)], strict=True):
        split[stage] = split.get(stage, 0.0) + max(0.0, until - at)
    return split, tails


# ---------------------------------------------------------------------------
# the two paths
# ---------------------------------------------------------------------------
class GcMeter:
    """Counts Python garbage collections and the time they take (``gc.callbacks``).

    A full (generation 2) collection walks every tracked object of the
    process; one landing inside a decode loop shows up as a slow run.
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self.counts = [0, 0, 0]
        self._began: float | None = None

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        elif self._began is not None:
            self.seconds += time.perf_counter() - self._began
            self.counts[int(info.get("generation", 0))] += 1
            self._began = None

    def reading(self) -> tuple[float, tuple[int, ...]]:
        return self.seconds, tuple(self.counts)

    @contextmanager
    def installed(self) -> Iterator[GcMeter]:
        gc.callbacks.append(self)
        try:
            yield self
        finally:
            gc.callbacks.remove(self)


GC = GcMeter()


@dataclasses.dataclass
class GcDelta:
    seconds: float = 0.0
    full_collections: int = 0

    @classmethod
    def since(cls, before: tuple[float, tuple[int, ...]]) -> GcDelta:
        seconds, counts = GC.reading()
        return cls(seconds - before[0], counts[2] - before[1][2])


@dataclasses.dataclass
class NodeRun:
    wall_seconds: float
    tokens: int
    metadata: dict[str, Any]
    record: RequestRecord
    stages: dict[str, float]
    tails: dict[str, float]
    bar_updates: int
    live_texts: int
    gc: GcDelta


@dataclasses.dataclass
class RawRun:
    wall_seconds: float
    tokens: int
    tokens_per_second: float | None
    time_to_first_token_seconds: float | None
    finish_reason: str
    gc: GcDelta
    callback_seconds: float | None = None
    cpu_us_per_token: float | None = None


def run_node(
    node: Any,
    hooks: NodeHooks,
    prompt: str,
    image: Any,
    args: argparse.Namespace,
    reference: str = REPOSITORY,
) -> NodeRun:
    import comfy.utils
    from server import PromptServer

    comfy.utils.updates.clear()
    PromptServer.instance.progress_texts.clear()
    gc_before = GC.reading()
    record = hooks.start()
    output = node.execute(
        prompt=prompt,
        model_profile=reference,
        images=image,
        max_new_tokens=args.tokens,
        enable_reasoning=not args.no_reasoning,
        temperature=0.0,
        top_p=0.95,
        seed=0,
        local_reserve_free_memory_gb=1.0,
        keep_model_loaded=True,
    )
    wall = time.perf_counter() - record.started
    gc_delta = GcDelta.since(gc_before)
    metadata = json.loads(output.args[1])
    stages, tails = stage_split(record.events, record.last_token_at, wall)
    return NodeRun(
        wall,
        record.tokens,
        metadata,
        record,
        stages,
        tails,
        bar_updates=len(comfy.utils.updates),
        live_texts=len(PromptServer.instance.progress_texts),
        gc=gc_delta,
    )


class TimingSink:
    """A token sink that only measures (the same ``DecodeTiming`` the manager's relay keeps)."""

    def __init__(self) -> None:
        from comfy_llm_residency import DecodeTiming

        self.timing = DecodeTiming(time.monotonic())
        self.cpu = CpuStamps()

    def prompt_opened(self, opened: bool) -> None:
        del opened

    def token(self, token_id: int, text: str) -> None:
        self.timing.record(time.monotonic(), 1)
        self.cpu.record()

    def step(self, token_ids: Any, text: str) -> None:
        self.timing.record(time.monotonic(), len(token_ids))

    def wait(self) -> None:
        return None


def run_raw(backend: Any, prepared: Any, settings: Any, sink: Any = None) -> RawRun:
    """One ``backend.generate``; ``sink`` (one with a ``timing``) measures its tokens."""
    sink = TimingSink() if sink is None else sink
    gc_before = GC.reading()
    started = time.perf_counter()
    result = backend.generate(prepared, settings, sink)
    wall = time.perf_counter() - started
    return RawRun(
        wall_seconds=wall,
        tokens=len(result.token_ids),
        tokens_per_second=sink.timing.tokens_per_second,
        time_to_first_token_seconds=sink.timing.time_to_first_token_seconds,
        finish_reason=result.finish_reason,
        gc=GcDelta.since(gc_before),
        cpu_us_per_token=sink.cpu.us_per_token if hasattr(sink, "cpu") else None,
    )


def run_raw_with_node_callbacks(
    backend: Any, prepared: Any, settings: Any, hooks: NodeHooks
) -> RawRun:
    """The raw call, with the node's per-token chain as its token sink.

    The chain is the resident manager's TokenRelay (a GENERATE ProgressEvent
    per token) feeding the node's ComfyGlue (interrupt check, progress bar,
    live text), exactly as in a node request, minus everything before and
    after generation (Hub inspection, staging, inputs, metadata).
    """
    import comfy.utils
    from comfy_llm import ComfyGlue
    from comfy_llm_residency import TokenRelay
    from server import PromptServer

    comfy.utils.updates.clear()
    PromptServer.instance.progress_texts.clear()
    glue = ComfyGlue(NODE_ID, reasoning_enabled=settings.enable_reasoning)
    relay = TokenRelay(settings.max_new_tokens, glue.progress, glue.on_token, time.monotonic)
    record = hooks.start()
    relay.start()
    run = run_raw(backend, prepared, settings, sink=relay)
    run.callback_seconds = record.relay_seconds
    run.cpu_us_per_token = record.cpu.us_per_token
    return run


def run_library(backend: Any, prompt: str, max_tokens: int) -> RawRun:
    """llama-cpp-python's own loop (``Llama.generate``, greedy) on the backend's loaded model.

    The library's per-token cost without this project: its sampler and
    ``eval`` per token, the same weights and context, a text-only prompt (the
    decode rate after the first token does not depend on it), ``max_tokens``
    tokens whatever they are.
    """
    import llama_cpp
    from comfy_llm_residency import DecodeTiming

    llama = backend._loaded.llama  # the bench's look inside: the same Llama object
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(llama.ctx), True)
    llama.reset()
    tokens = llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
    gc_before = GC.reading()
    timing = DecodeTiming(time.monotonic())
    started = time.perf_counter()
    count = 0
    cpu = CpuStamps()
    for _token in llama.generate(tokens, temp=0.0, reset=True):
        count += 1
        timing.record(time.monotonic(), 1)
        cpu.record()
        if count >= max_tokens:
            break
    return RawRun(
        wall_seconds=time.perf_counter() - started,
        tokens=count,
        tokens_per_second=timing.tokens_per_second,
        time_to_first_token_seconds=timing.time_to_first_token_seconds,
        finish_reason="length",
        gc=GcDelta.since(gc_before),
        cpu_us_per_token=cpu.us_per_token,
    )


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else round(a / b, 4)


# ---------------------------------------------------------------------------
# one backend
# ---------------------------------------------------------------------------
def bench_backend(
    name: str, node: Any, hooks: NodeHooks, image: Any, args: argparse.Namespace
) -> dict[str, Any]:
    import importlib

    from comfy_llm_profiles import resolve_profile
    from comfy_llm_residency import reset_managers
    from comfy_llm_residency.backend import GenerationSettings
    from comfy_llm_staging import stage_snapshot

    target, module_name = BACKENDS[name]
    if name == "transformers" and args.device == "cuda":
        target = "local_cuda"  # the same checkpoint on the GPU (scripts/gpu-check.sh)
    os.environ["COMFY_LLM_EXECUTION_TARGET"] = target
    reset_managers()
    print(f"[{name}] cold request through the node (target {target}) ...", flush=True)

    # 1. cold load through the node's whole path
    reference = reference_for(name, args.gguf)
    cold = run_node(node, hooks, PROMPTS[0], image, args, reference)
    if cold.metadata.get("cache_status") != "cold":
        raise RuntimeError(f"{name}: the first request was not a cold load: {cold.metadata}")

    # 3 (set-up). the raw backend on the same snapshot
    root = Path(os.environ["COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT"])
    if name == "llama_cpp":
        from comfy_llm import model_folders
        from comfy_llm_profiles import gguf_file_names
        from comfy_llm_staging import stage_local_folder

        profile = resolve_profile(
            reference, target, storage_root=root, model_folders=model_folders()
        ).profile
        snapshot = stage_local_folder(
            Path(str(profile.local_path)),
            repository=profile.repository,
            content_pin=profile.revision,
            storage_root=root,
            files=gguf_file_names(dict(profile.backend_options)),
        )
    else:
        profile = resolve_profile(REPOSITORY, target, storage_root=root).profile
        snapshot = stage_snapshot(
            profile.repository, profile.revision, storage_root=root, profile_id=profile.profile_id
        )
    from comfy_llm_core import ignore_progress
    from comfy_llm_inputs import prepare_inputs

    module = importlib.import_module(module_name)
    load_started = time.perf_counter()
    backend = module.create_backend(profile, snapshot.path, ignore_progress)
    raw_load_seconds = time.perf_counter() - load_started
    settings = GenerationSettings(
        max_new_tokens=args.tokens,
        temperature=0.0,
        top_p=0.95,
        seed=0,
        enable_reasoning=not args.no_reasoning,
    )
    limits = profile.limits.media

    def prepared_for(prompt: str) -> Any:
        return prepare_inputs(prompt, images=image, limits=limits)

    # pick a prompt whose greedy generation fills the budget (equal token counts)
    prompt, prepared, calibration = PROMPTS[0], prepared_for(PROMPTS[0]), []
    for candidate in PROMPTS:
        candidate_inputs = prepared_for(candidate)
        probe = run_raw(backend, candidate_inputs, settings)
        calibration.append({"prompt": candidate, "tokens": probe.tokens})
        if probe.tokens >= max(c["tokens"] for c in calibration):
            prompt, prepared = candidate, candidate_inputs
        if probe.tokens >= args.tokens:
            break

    # 2 + 3. warm node requests, raw calls, and raw calls carrying the node's
    # per-token callbacks, interleaved (order rotated every round), after one
    # warm-up of each
    print(f"[{name}] {args.runs} rounds of node / raw / raw+callbacks, prompt {prompt!r} ...")
    variants: list[tuple[str, Callable[[], Any]]] = [
        ("node", lambda: run_node(node, hooks, prompt, image, args, reference)),
        ("raw", lambda: run_raw(backend, prepared, settings)),
        ("raw_cb", lambda: run_raw_with_node_callbacks(backend, prepared, settings, hooks)),
    ]
    if name == "llama_cpp":  # the library's own loop, interleaved with the others
        variants.append(("library", lambda: run_library(backend, prompt, args.tokens)))
    runs: dict[str, list[Any]] = {key: [] for key, _ in variants}
    for _key, call in variants:
        call()
    for round_index in range(args.runs):
        shift = round_index % len(variants)
        for key, call in variants[shift:] + variants[:shift]:
            gc.collect()
            runs[key].append(call())
    backend.unload()
    variants.clear()
    reset_managers()
    gc.collect()
    return summarize(
        name,
        target,
        args,
        cold,
        raw_load_seconds,
        calibration,
        prompt,
        runs["node"],
        runs["raw"],
        runs["raw_cb"],
        runs.get("library", []),
    )


def summarize(
    name: str,
    target: str,
    args: argparse.Namespace,
    cold: NodeRun,
    raw_load_seconds: float,
    calibration: list[dict[str, Any]],
    prompt: str,
    nodes: list[NodeRun],
    raws: list[RawRun],
    raw_cbs: list[RawRun],
    libraries: list[RawRun],
) -> dict[str, Any]:
    warm_status = sorted({run.metadata.get("cache_status") for run in nodes})
    node_tokens = sorted({run.tokens for run in nodes})
    raw_tokens = sorted({run.tokens for run in raws})
    equal = node_tokens == raw_tokens and len(node_tokens) == 1
    tokens = node_tokens[0] if equal else None

    node_decode = _median([run.metadata.get("tokens_per_second") for run in nodes])
    raw_decode = _median([run.tokens_per_second for run in raws])
    raw_cb_decode = _median([run.tokens_per_second for run in raw_cbs])
    node_e2e = _median([run.tokens / run.wall_seconds for run in nodes])
    raw_e2e = _median([run.tokens / run.wall_seconds for run in raws])
    node_wall = _median([run.wall_seconds for run in nodes])
    raw_wall = _median([run.wall_seconds for run in raws])
    paired = [
        (n.wall_seconds - r.wall_seconds) * 1000
        for n, r in zip(nodes, raws, strict=True)
        if n.tokens == r.tokens
    ]
    paired_ratio = _median(
        [
            n.metadata["tokens_per_second"] / r.tokens_per_second
            for n, r in zip(nodes, raws, strict=True)
            if n.metadata.get("tokens_per_second") and r.tokens_per_second
        ]
    )
    gen_seconds = _median([run.metadata.get("generation_seconds") for run in nodes])
    cpu_per_token: dict[str, list[float | None]] = {
        "node": [run.record.cpu.us_per_token for run in nodes],
        "raw": [run.cpu_us_per_token for run in raws],
        "raw_cb": [run.cpu_us_per_token for run in raw_cbs],
        "library": [run.cpu_us_per_token for run in libraries],
    }

    stage_names = list(dict.fromkeys(stage for run in nodes for stage in run.stages))
    warm_stages = {
        stage: _round(_median([run.stages.get(stage, 0.0) for run in nodes]))
        for stage in stage_names
    }

    per_token_us = {
        "relay_total": _median([1e6 * r.record.relay_seconds / r.tokens for r in nodes]),
        "glue_progress": _median([1e6 * r.record.glue_progress_seconds / r.tokens for r in nodes]),
        "glue_on_token": _median([1e6 * r.record.glue_token_seconds / r.tokens for r in nodes]),
    }
    relay = per_token_us["relay_total"]
    glue = (per_token_us["glue_progress"] or 0.0) + (per_token_us["glue_on_token"] or 0.0)
    per_token_us["relay_own"] = None if relay is None else relay - glue
    raw_per_token_ms = None if raw_decode is None else 1000 / raw_decode
    callback_share = (
        None
        if relay is None or raw_per_token_ms is None
        else round(relay / 1000 / raw_per_token_ms, 4)
    )

    return {
        "backend": name,
        "execution_target": target,
        "device": cold.metadata.get("device"),
        "profile_id": cold.metadata.get("profile_id"),
        "prompt": prompt,
        "prompt_calibration": calibration,
        "prompt_tokens": nodes[0].metadata.get("prompt_tokens") if nodes else None,
        "finish_reason": nodes[0].metadata.get("finish_reason") if nodes else None,
        "tokens": tokens,
        "token_counts_equal": equal,
        "node_token_counts": node_tokens,
        "raw_token_counts": raw_tokens,
        "warm_cache_status": warm_status,
        "cold": {
            "wall_seconds": _round(cold.wall_seconds),
            "tokens": cold.tokens,
            "load_seconds_metadata": cold.metadata.get("load_seconds"),
            "time_to_first_token_seconds": cold.metadata.get("time_to_first_token_seconds"),
            "snapshot_downloaded": cold.metadata.get("snapshot_downloaded"),
            "manifest_created": cold.metadata.get("manifest_created"),
            "stages_seconds": {k: round(v, 4) for k, v in cold.stages.items()},
            "stage_tails_seconds": {k: round(v, 4) for k, v in cold.tails.items()},
            "events": [
                {"stage": stage, "message": message, "at_seconds": round(at, 4)}
                for stage, message, at in cold.record.events
            ],
            "raw_create_backend_seconds": _round(raw_load_seconds),
        },
        "warm": {
            "runs": len(nodes),
            "node_decode_tokens_per_second": _round(node_decode, 2),
            "raw_decode_tokens_per_second": _round(raw_decode, 2),
            "decode_ratio_node_over_raw": _ratio(node_decode, raw_decode),
            "decode_ratio_paired_median": _round(paired_ratio),
            "node_end_to_end_tokens_per_second": _round(node_e2e, 2),
            "raw_end_to_end_tokens_per_second": _round(raw_e2e, 2),
            "end_to_end_ratio_node_over_raw": _ratio(node_e2e, raw_e2e),
            "within_5_percent_decode": (
                None
                if node_decode is None or raw_decode is None
                else node_decode >= 0.95 * raw_decode
            ),
            "library_decode_tokens_per_second": _round(
                _median([r.tokens_per_second for r in libraries]), 2
            ),
            "decode_ratio_node_over_library": _ratio(
                node_decode, _median([r.tokens_per_second for r in libraries])
            ),
            "decode_ratio_raw_over_library": _ratio(
                raw_decode, _median([r.tokens_per_second for r in libraries])
            ),
            "library_decode_tokens_per_second_runs": [
                _round(r.tokens_per_second, 2) for r in libraries
            ],
            "decode_cpu_us_per_token_median": {
                key: _round(_median(values), 2) for key, values in cpu_per_token.items()
            },
            "decode_cpu_ratio_raw_over_node": _ratio(
                _median(cpu_per_token["raw"]), _median(cpu_per_token["node"])
            ),
            "decode_cpu_ratio_paired_median": _round(
                _median(
                    [
                        r.cpu_us_per_token / n.record.cpu.us_per_token
                        for n, r in zip(nodes, raws, strict=True)
                        if r.cpu_us_per_token and n.record.cpu.us_per_token
                    ]
                )
            ),
            "decode_cpu_us_per_token_runs": {
                key: [_round(v, 1) for v in values] for key, values in cpu_per_token.items()
            },
            "per_token_overhead_us_of_medians": _round(
                None if not node_decode or not raw_decode else 1e6 / node_decode - 1e6 / raw_decode,
                2,
            ),
            "node_wall_seconds_median": _round(node_wall),
            "raw_wall_seconds_median": _round(raw_wall),
            "node_generation_seconds_median": _round(gen_seconds),
            "warm_hit_overhead_ms_median": _round(_median(paired), 2),
            "warm_hit_overhead_ms_of_medians": _round(
                None if node_wall is None or raw_wall is None else (node_wall - raw_wall) * 1000,
                2,
            ),
            "node_ttft_seconds_median": _round(
                _median([r.metadata.get("time_to_first_token_seconds") for r in nodes])
            ),
            "raw_ttft_seconds_median": _round(
                _median([r.time_to_first_token_seconds for r in raws])
            ),
            "raw_with_node_callbacks_decode_tokens_per_second": _round(raw_cb_decode, 2),
            "decode_ratio_raw_with_node_callbacks_over_raw": _ratio(raw_cb_decode, raw_decode),
            "raw_with_node_callbacks_wall_seconds_median": _round(
                _median([r.wall_seconds for r in raw_cbs])
            ),
            "raw_with_node_callbacks_per_token_us_median": _round(
                _median([1e6 * (r.callback_seconds or 0.0) / r.tokens for r in raw_cbs]), 2
            ),
            "gc_ms_per_run_median": {
                key: _round(_median([1000 * r.gc.seconds for r in group]), 2)
                for key, group in (("node", nodes), ("raw", raws), ("raw_cb", raw_cbs))
            },
            "gc_full_collections_total": {
                key: sum(r.gc.full_collections for r in group)
                for key, group in (("node", nodes), ("raw", raws), ("raw_cb", raw_cbs))
            },
            "node_stages_seconds_median": warm_stages,
            "per_token_callback_us_median": {k: _round(v, 2) for k, v in per_token_us.items()},
            "callback_share_of_raw_token_time": callback_share,
            "progress_bar_updates_median": _median([r.bar_updates for r in nodes]),
            "live_text_messages_median": _median([r.live_texts for r in nodes]),
            "node_wall_seconds": [round(r.wall_seconds, 4) for r in nodes],
            "raw_wall_seconds": [round(r.wall_seconds, 4) for r in raws],
            "node_decode_tokens_per_second_runs": [
                _round(r.metadata.get("tokens_per_second"), 2) for r in nodes
            ],
            "raw_decode_tokens_per_second_runs": [_round(r.tokens_per_second, 2) for r in raws],
            "raw_with_node_callbacks_decode_tokens_per_second_runs": [
                _round(r.tokens_per_second, 2) for r in raw_cbs
            ],
        },
    }


# ---------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------
def _fmt(value: Any, spec: str = ".1f") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    return format(value, spec)


def print_summary(report: dict[str, Any]) -> None:
    print()
    print(
        f"comfy-llm node benchmark: {report['tokens_requested']} new tokens, "
        f"{report['runs']} warm runs, reasoning "
        f"{'on' if report['enable_reasoning'] else 'off'}, temperature 0"
    )
    header = (
        f"{'backend':<13}{'tokens':>7}{'node tok/s':>12}{'raw tok/s':>11}{'ratio':>8}"
        f"{'e2e node':>10}{'e2e raw':>9}{'e2e ratio':>10}{'overhead ms':>13}{'<=5%':>6}"
    )
    print(header)
    print("-" * len(header))
    for result in report["results"].values():
        if "error" in result:
            print(f"{result['backend']:<13} ERROR: {result['error']}")
            continue
        warm = result["warm"]
        print(
            f"{result['backend']:<13}{_fmt(result['tokens'], 'd'):>7}"
            f"{_fmt(warm['node_decode_tokens_per_second']):>12}"
            f"{_fmt(warm['raw_decode_tokens_per_second']):>11}"
            f"{_fmt(warm['decode_ratio_node_over_raw'], '.3f'):>8}"
            f"{_fmt(warm['node_end_to_end_tokens_per_second']):>10}"
            f"{_fmt(warm['raw_end_to_end_tokens_per_second']):>9}"
            f"{_fmt(warm['end_to_end_ratio_node_over_raw'], '.3f'):>10}"
            f"{_fmt(warm['warm_hit_overhead_ms_median'], '.1f'):>13}"
            f"{_fmt(warm['within_5_percent_decode']):>6}"
        )
    print()
    for result in report["results"].values():
        if "error" in result:
            continue
        cold, warm = result["cold"], result["warm"]
        cold_split = "  ".join(f"{k} {v * 1000:.0f}" for k, v in cold["stages_seconds"].items())
        warm_split = "  ".join(
            f"{k} {v * 1000:.1f}"
            for k, v in warm["node_stages_seconds_median"].items()
            if v is not None and v >= 0.00005
        )
        per_token = warm["per_token_callback_us_median"]
        print(f"[{result['backend']}]")
        print(
            f"  cold: {cold['wall_seconds']:.2f} s wall, load_seconds (metadata) "
            f"{_fmt(cold['load_seconds_metadata'], '.3f')} s; "
            f"raw create_backend {cold['raw_create_backend_seconds']:.3f} s"
        )
        print(f"  cold stages (ms): {cold_split}")
        print(
            f"  decode ratio node/raw: medians {_fmt(warm['decode_ratio_node_over_raw'], '.3f')},"
            f" paired per round {_fmt(warm['decode_ratio_paired_median'], '.3f')}"
            f" ({_fmt(warm['per_token_overhead_us_of_medians'])} us a token);"
            f" wall median node {warm['node_wall_seconds_median']:.4f} s,"
            f" raw {warm['raw_wall_seconds_median']:.4f} s"
        )
        print(f"  warm stages (ms, median): {warm_split}")
        print(
            f"  per-token callbacks (us, median): relay total {_fmt(per_token['relay_total'])}"
            f" = glue progress {_fmt(per_token['glue_progress'])}"
            f" + glue on_token {_fmt(per_token['glue_on_token'])}"
            f" + relay own {_fmt(per_token['relay_own'])};"
            f" share of a raw token's time {_fmt(warm['callback_share_of_raw_token_time'], '.2%')}"
        )
        cb_rate = warm["raw_with_node_callbacks_decode_tokens_per_second"]
        cb_ratio = warm["decode_ratio_raw_with_node_callbacks_over_raw"]
        print(
            f"  raw + node callbacks: {_fmt(cb_rate)} tok/s (ratio to raw {_fmt(cb_ratio, '.3f')});"
            f" gc ms/run median {warm['gc_ms_per_run_median']},"
            f" full collections {warm['gc_full_collections_total']}"
        )
        cpu = warm["decode_cpu_us_per_token_median"]
        print(
            f"  decode CPU per token (us, this thread, median): node {_fmt(cpu['node'])},"
            f" raw {_fmt(cpu['raw'])}, raw+callbacks {_fmt(cpu['raw_cb'])},"
            f" library {_fmt(cpu['library'])}; raw/node"
            f" {_fmt(warm['decode_cpu_ratio_raw_over_node'], '.3f')}"
            f" (paired {_fmt(warm['decode_cpu_ratio_paired_median'], '.3f')})"
        )
        if warm["library_decode_tokens_per_second"] is not None:
            print(
                f"  llama-cpp-python's own loop (Llama.generate): "
                f"{_fmt(warm['library_decode_tokens_per_second'])} tok/s; node/library "
                f"{_fmt(warm['decode_ratio_node_over_library'], '.3f')}, raw/library "
                f"{_fmt(warm['decode_ratio_raw_over_library'], '.3f')}"
            )
        print(
            f"  ttft (s, median): node {_fmt(warm['node_ttft_seconds_median'], '.4f')}"
            f" raw {_fmt(warm['raw_ttft_seconds_median'], '.4f')}"
        )
    print()


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="comfy-llm-bench-") as tmp:
        workdir = Path(tmp)
        _prepare_environment(workdir)

        import numpy as np
        from comfy_llm_testworld import FakeHub
        from comfy_llm_testworld.checkpoints import build_checkpoint_files
        from comfy_llm_testworld.comfyui_standin import installed_standin

        files = build_checkpoint_files(CHECKPOINT_KIND)  # imports torch
        if "llama_cpp" in args.backends:
            from comfy_llm_testworld.gguf_checkpoints import write_gguf_pair

            models_llm = Path(os.environ["COMFYUI_STANDIN_BASE"]) / "models" / "LLM"
            if args.gguf == "wide":
                from wide_gguf import write_wide_gguf

                write_wide_gguf(models_llm / WIDE_FOLDER)
            else:
                write_gguf_pair(models_llm / GGUF_FOLDER, quantization="Q8_0")
        if args.torch_threads > 0:
            import torch

            torch.set_num_threads(args.torch_threads)
        image = np.random.default_rng(0).random((1, 32, 32, 3), dtype=np.float32)
        report: dict[str, Any] = {
            "benchmark": "node_vs_raw_backend",
            "command": " ".join(["python", *sys.argv]),
            "machine": _machine(),
            "versions": _versions(),
            "repository": REPOSITORY,
            "checkpoint": f"testworld tiny {CHECKPOINT_KIND} (random weights, "
            f"{len(files['model.safetensors'])} bytes of safetensors)",
            "image_shape": list(image.shape),
            "runs": args.runs,
            "llama_cpp_gguf": args.gguf,
            "tokens_requested": args.tokens,
            "enable_reasoning": not args.no_reasoning,
            "temperature": 0.0,
            "torch_threads_requested": args.torch_threads,
            "results": {},
        }
        with FakeHub() as hub:
            os.environ["HF_ENDPOINT"] = hub.endpoint
            hub.add_repo(REPOSITORY, files)
            with installed_standin():
                import comfy.model_management
                from comfy_api.latest import io
                from comfy_llm import ModalLLMNode

                comfy.model_management.reset()
                ModalLLMNode.hidden = io.HiddenHolder(unique_id=NODE_ID)
                hooks = NodeHooks()
                with hooks.installed(), GC.installed():
                    for name in args.backends:
                        try:
                            result = bench_backend(name, ModalLLMNode, hooks, image, args)
                        except Exception as error:  # report and carry on with the next
                            import traceback

                            traceback.print_exc()
                            result = {"backend": name, "error": f"{type(error).__name__}: {error}"}
                        report["results"][name] = result
            report["hub_requests"] = len(hub.requests)
            report["hub_internal_errors"] = hub.internal_errors
    report["total_seconds"] = round(time.perf_counter() - started, 2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")
    print_summary(report)
    print(f"wrote {args.out} ({report['total_seconds']} s)")
    return 0 if all("error" not in r for r in report["results"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
