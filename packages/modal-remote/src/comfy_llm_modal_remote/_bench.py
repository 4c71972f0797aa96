"""The Modal benchmark harness: planning, running and the JSON report.

A *cold cycle* stops the (isolated, billable) app, so the next call deploys
it again and lands on a new container, stages, and serves one request; the
same cycle then repeats the request on the resident engine. Several cycles
share the persistent Volumes, so the report separates four states:

* ``first_compilation``: cycle 0's cold request on a compiling (throughput) engine;
* ``cached_compilation_new_container``: a later cycle's cold request on a
  compiling engine (the compile-cache Volume is warm, the container is new);
* ``first_load_in_container``: a cold request on an engine that does not compile
  (eager vLLM, Transformers);
* ``resident_reuse``: a warm repeat on the resident engine.

Image deployment is in ``wall_seconds`` only; the node-reported figures come
from the metadata.
"""

from __future__ import annotations

import dataclasses
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from ._dispatch import Dispatcher, RemoteRun

__all__ = [
    "STATES",
    "BenchStep",
    "BenchTarget",
    "Workload",
    "classify",
    "plan_benchmark",
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
    "gpu_total_gib",
    "gpu_free_before_gib",
    "gpu_free_after_gib",
)


@dataclasses.dataclass(frozen=True, slots=True)
class Workload:
    """What every request of the benchmark asks.

    Attributes:
        model: The reference (``owner/model@revision`` or a curated id).
        gpu: The Modal GPU type.
        prompt: The prompt.
        image_size: Side of the one synthetic image, or 0 for none.
        max_new_tokens: Tokens to generate.
    """

    model: str
    gpu: str
    prompt: str = "Describe the image in detail."
    image_size: int = 512
    max_new_tokens: int = 128


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


def classify(step: BenchStep, metadata: dict[str, Any]) -> str:
    """Which of :data:`STATES` one request measured."""
    if metadata.get("cache_status") == "warm":
        return "resident_reuse"
    compiles = metadata.get("vllm_execution_mode") == "throughput"
    if not compiles:
        return "first_load_in_container"
    return "first_compilation" if step.cycle == 0 else "cached_compilation_new_container"


def source_revision(repository: Path) -> dict[str, Any]:
    """The exact source the benchmark ran: git commit and whether the tree was dirty."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=repository, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain"],
                cwd=repository,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": dirty}


def run_benchmark(
    target: BenchTarget,
    workload: Workload,
    steps: Sequence[BenchStep],
    *,
    prepare: Callable[[Any], Any],
    settings: Any,
    source: dict[str, Any],
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Run the planned steps and build the JSON-ready report."""
    records: list[dict[str, Any]] = []
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
            )
        )
        metadata = dict(result.metadata)
        record = {"cycle": step.cycle, "cold": step.cold, "state": classify(step, metadata)}
        record["wall_seconds"] = round(clock() - started, 3)
        record.update({name: metadata.get(name) for name in _STEP_FIELDS})
        record.update({k: v for k, v in metadata.items() if k.startswith("vllm_")})
        records.append(record)
    return {
        "source": source,
        "workload": dataclasses.asdict(workload),
        "app_name": target.dispatcher.transport.app_name,
        "steps": records,
        "summary": _summary(records),
    }


def _median(values: list[Any]) -> float | None:
    numbers = [float(v) for v in values if isinstance(v, int | float)]
    return round(statistics.median(numbers), 4) if numbers else None


def _summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for state in STATES:
        chosen = [r for r in records if r["state"] == state]
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
