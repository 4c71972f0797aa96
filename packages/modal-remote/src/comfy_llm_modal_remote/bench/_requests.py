"""The Modal benchmark harness: planning, running and the JSON report.

A *cold cycle* stops the (isolated, billable) app, so the next call deploys
it again and lands on a new container, stages, and serves one request; the
same cycle then repeats the request on the resident engine. Several cycles
share the persistent Volumes (weights, compile caches), so the report
separates four states:

* ``first_compilation``: a cold request on a compiling (throughput) engine
  whose compile-cache namespace held no compiled artifacts yet;
* ``cached_compilation_new_container``: a cold request on a compiling engine
  in a new container that found them (the engine's ``modal_compile_cache_warm``);
* ``first_load_in_container``: a cold request on an engine that does not compile
  (eager vLLM, Transformers);
* ``resident_reuse``: a warm repeat on the resident engine.

Image deployment is in ``wall_seconds`` only; the node-reported figures come
from the metadata.

A sample that is not what was planned is refused, kept in ``steps`` with
its ``refused`` reason and left out of the summary (:func:`refusal`): a
planned cold request that hit a resident engine, a planned warm repeat that
paid a load or a compile, a vLLM request served in another execution mode
than the benchmark deployed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from comfy_llm_core import ProgressCallback, ProgressEvent, ProgressStage, ignore_progress
from comfy_llm_inputs import PreparedInputs
from comfy_llm_profiles import ModelProfile
from comfy_llm_residency.backend import GenerationSettings

from ..client._dispatch import Dispatcher, RemoteRun
from ..wire._plain import WireDict, WireValue

__all__ = [
    "STATES",
    "BenchStep",
    "BenchTarget",
    "Workload",
    "classify",
    "exact_gpu",
    "plan_benchmark",
    "refusal",
    "run_benchmark",
    "source_revision",
]

STATES = (
    "first_compilation",
    "cached_compilation_new_container",
    "first_load_in_container",
    "resident_reuse",
)
_STEP_FIELDS = (
    "cache_status",
    "load_seconds",
    "generation_seconds",
    "time_to_first_token_seconds",
    "tokens_per_second",
    "output_tokens",
    "backend",
    "modal_remote_seconds",
    "modal_transfer_seconds",
    "modal_stage_seconds",
    "modal_staging_downloaded",
    "modal_affinity_key",
    "modal_retry_count",
    "modal_compile_cache_warm",
    "gpu_total_gib",
    "gpu_free_before_gib",
    "gpu_free_after_gib",
)


_UPGRADABLE_GPUS = frozenset({"H100"})
"""GPU types Modal may serve on a faster model (an ``H100`` request can land on
an H200); ``"<type>!"`` asks for exactly that type (modal.com/docs/guide/gpu)."""


def exact_gpu(gpu: str) -> str:
    """The GPU string a benchmark requests: pinned where Modal could upgrade it.

    An upgraded run would land in another compile-cache namespace and measure
    another card.
    """
    value = gpu.strip()
    return f"{value}!" if value.upper() in _UPGRADABLE_GPUS else value


@dataclasses.dataclass(frozen=True, slots=True)
class Workload:
    """What every request of the benchmark asks.

    Attributes:
        model: The reference (``owner/model@revision`` or a curated id).
        gpu: The Modal GPU type.
        prompt: The prompt.
        image_size: Side of the one synthetic image, or 0 for none.
        max_new_tokens: Tokens to generate.
        execution_mode: The vLLM execution setting deployed with the app
            (``COMFY_MODAL_LLM_VLLM_EXECUTION_MODE``): ``throughput`` measures
            compilation, ``eager`` the plain load, ``auto`` what users get.
    """

    model: str
    gpu: str
    prompt: str = "Describe the image in detail."
    image_size: int = 512
    max_new_tokens: int = 128
    execution_mode: str = "throughput"


@dataclasses.dataclass(frozen=True, slots=True)
class BenchStep:
    """One planned action: ``stop_app`` or ``request`` (``cold`` for the first of a cycle)."""

    cycle: int
    action: str
    cold: bool = False


class BenchTarget(Protocol):
    """Where the benchmark runs: a dispatcher and a way to stop its app."""

    dispatcher: Dispatcher

    def stop_app(self) -> None:
        """Stop the app and its containers (the next call deploys anew)."""
        ...


def plan_benchmark(cycles: int, resident_repeats: int) -> list[BenchStep]:
    """The steps of ``cycles`` cold cycles, each followed by resident repeats.

    Raises:
        ValueError: ``cycles`` < 1 or ``resident_repeats`` < 0.
    """
    if cycles < 1 or resident_repeats < 0:
        raise ValueError(
            f"cycles must be >= 1 and resident_repeats >= 0, got {cycles} and {resident_repeats}"
        )
    steps: list[BenchStep] = []
    for cycle in range(cycles):
        steps.append(BenchStep(cycle, "stop_app"))
        steps.append(BenchStep(cycle, "request", cold=True))
        steps.extend(BenchStep(cycle, "request") for _ in range(resident_repeats))
    return steps


def classify(step: BenchStep, metadata: WireDict) -> str:
    """Which of :data:`STATES` one request measured.

    A compiling cold load is *cached* when the engine found compiled artifacts
    in its namespace before loading (``modal_compile_cache_warm``); an engine
    that does not report it counts the first cycle as the first compilation.
    """
    if metadata.get("cache_status") == "warm":
        return "resident_reuse"
    compiles = metadata.get("vllm_execution_mode") == "throughput"
    if not compiles:
        return "first_load_in_container"
    warm = metadata.get("modal_compile_cache_warm")
    if not isinstance(warm, bool):
        warm = step.cycle > 0
    return "cached_compilation_new_container" if warm else "first_compilation"


def refusal(step: BenchStep, metadata: WireDict, execution_mode: str) -> str | None:
    """Why one sample is not the figure the plan asked for, or None when it is."""
    warm = metadata.get("cache_status") == "warm"
    if step.cold and warm:
        return "planned cold, but the engine was already resident (a cache hit)"
    if not step.cold and not warm:
        return (
            f"planned warm, but it paid a {metadata.get('cache_status') or 'cold'} load "
            "or compile: not a warm figure"
        )
    mode = metadata.get("vllm_execution_mode")
    if metadata.get("backend") == "vllm" and mode != execution_mode:
        return f"served in vLLM mode {mode!r}, the benchmark deployed {execution_mode!r}"
    return None


def _git(repository: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repository, capture_output=True, text=True, check=True
    ).stdout


def source_revision(repository: Path) -> WireDict:
    """The exact source the benchmark ran.

    The git commit, whether the tree was dirty and, if so, a digest of the
    uncommitted diff (``git diff HEAD``), so two dirty runs can be told apart.
    Outside a git checkout (an installed wheel) all three are None; the
    report's ``code_fingerprint`` still names the code the image carried.
    """
    try:
        commit = _git(repository, "rev-parse", "HEAD").strip()
        dirty = bool(_git(repository, "status", "--porcelain").strip())
        diff = _git(repository, "diff", "HEAD") if dirty else ""
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None, "diff_sha256": None}
    digest = hashlib.sha256(diff.encode()).hexdigest() if dirty else None
    return {"commit": commit, "dirty": dirty, "diff_sha256": digest}


def run_benchmark(
    target: BenchTarget,
    workload: Workload,
    steps: Sequence[BenchStep],
    *,
    prepare: Callable[[ModelProfile], PreparedInputs],
    settings: GenerationSettings,
    source: WireDict,
    progress: ProgressCallback = ignore_progress,
    clock: Callable[[], float] = time.monotonic,
) -> WireDict:
    """Run the planned steps and build the JSON-ready report.

    Args:
        target: The dispatcher and the app it can stop.
        workload: What every request asks.
        steps: From :func:`plan_benchmark`.
        prepare: Builds each request's inputs from the modal profile.
        settings: The ``GenerationSettings`` of every request.
        source: What ran (:func:`source_revision` plus the code fingerprint).
        progress: Receives every request's progress events.
        clock: Measures ``wall_seconds``.
    """
    records: list[WireDict] = []
    for step in steps:
        if step.action == "stop_app":
            target.stop_app()
            continue
        started = clock()
        result = target.dispatcher.run(
            RemoteRun(
                model=workload.model,
                prepare=prepare,
                settings=settings,
                gpu=workload.gpu,
                prompt_id=f"bench-cycle-{step.cycle}",
            ),
            progress=progress,
        )
        metadata = result.metadata.to_dict()
        record: WireDict = {
            "cycle": step.cycle,
            "cold": step.cold,
            "state": classify(step, metadata),
        }
        record["wall_seconds"] = round(clock() - started, 3)
        refused = refusal(step, metadata, workload.execution_mode)
        if refused is not None:
            record["refused"] = refused
            progress(
                ProgressEvent(
                    stage=ProgressStage.DONE,
                    message=f"Refused the sample of cycle {step.cycle}: {refused}",
                )
            )
        record.update({name: metadata.get(name) for name in _STEP_FIELDS})
        record.update({k: v for k, v in metadata.items() if k.startswith("vllm_")})
        records.append(record)
    cycles = sorted({step.cycle for step in steps})
    return {
        "source": source,
        "workload": {**dataclasses.asdict(workload), "settings": settings.to_dict()},
        "plan": {
            "cycles": len(cycles),
            "resident_repeats": sum(1 for s in steps if s.action == "request" and not s.cold)
            // max(1, len(cycles)),
            "steps": [dataclasses.asdict(step) for step in steps],
        },
        "app_name": target.dispatcher.transport.app_name,
        "steps": records,
        "summary": _summary(records),
    }


def _median(values: list[WireValue]) -> float | None:
    numbers = [float(v) for v in values if isinstance(v, int | float)]
    return round(statistics.median(numbers), 4) if numbers else None


def _summary(records: list[WireDict]) -> WireDict:
    summary: WireDict = {}
    for state in STATES:
        chosen = [r for r in records if r["state"] == state and "refused" not in r]
        if not chosen:
            continue
        summary[state] = {
            "count": len(chosen),
            "median_load_seconds": _median([r["load_seconds"] for r in chosen]),
            "median_wall_seconds": _median([r["wall_seconds"] for r in chosen]),
            "median_time_to_first_token_seconds": _median(
                [r["time_to_first_token_seconds"] for r in chosen]
            ),
            "median_tokens_per_second": _median([r["tokens_per_second"] for r in chosen]),
        }
    return summary
