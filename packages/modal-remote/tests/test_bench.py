"""The benchmark harness's planning and report, against the in-process stand-in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from comfy_llm_inputs import PreparedInputs
from comfy_llm_modal_remote import Dispatcher
from comfy_llm_modal_remote._bench import (
    BenchStep,
    Workload,
    classify,
    plan_benchmark,
    run_benchmark,
    source_revision,
)
from comfy_llm_residency import GenerationSettings
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.modal_standin import StandinTransport

from .conftest import SCRIPTED

ROOT = Path(__file__).resolve().parents[3]


def test_plan_is_cold_cycles_each_followed_by_resident_repeats() -> None:
    steps = plan_benchmark(2, 1)
    assert [(s.cycle, s.action, s.cold) for s in steps] == [
        (0, "stop_app", False),
        (0, "request", True),
        (0, "request", False),
        (1, "stop_app", False),
        (1, "request", True),
        (1, "request", False),
    ]
    with pytest.raises(ValueError, match="cycles"):
        plan_benchmark(0, 1)


def test_the_four_states_are_told_apart() -> None:
    throughput = {"cache_status": "cold", "vllm_execution_mode": "throughput"}
    assert classify(BenchStep(0, "request", True), throughput) == "first_compilation"
    assert classify(BenchStep(1, "request", True), throughput) == "cached_compilation_new_container"
    eager = {"cache_status": "cold", "vllm_execution_mode": "eager"}
    assert classify(BenchStep(1, "request", True), eager) == "first_load_in_container"
    assert classify(BenchStep(1, "request"), {"cache_status": "warm"}) == "resident_reuse"


class _StandinTarget:
    def __init__(self, transport: StandinTransport) -> None:
        self.transport = transport
        self.dispatcher = Dispatcher(transport)
        self.stops = 0

    def stop_app(self) -> None:
        self.stops += 1
        self.transport.containers.clear()  # every container goes with the app
        self.dispatcher.forget_staged()


@pytest.mark.slow
def test_report_from_two_cold_cycles(model_hub: FakeHub, transport: StandinTransport) -> None:
    target = _StandinTarget(transport)
    workload = Workload(model=SCRIPTED, gpu="L4", image_size=0, max_new_tokens=8)
    report = run_benchmark(
        target,
        workload,
        plan_benchmark(2, 1),
        prepare=lambda profile: PreparedInputs(workload.prompt),
        settings=GenerationSettings(temperature=0.0, max_new_tokens=8),
        source=source_revision(ROOT),
    )
    json.dumps(report)  # JSON-ready
    assert target.stops == 2
    assert report["workload"]["model"] == SCRIPTED
    assert len(report["source"]["commit"]) == 40
    steps = report["steps"]
    assert [(s["cycle"], s["state"]) for s in steps] == [
        (0, "first_load_in_container"),
        (0, "resident_reuse"),
        (1, "first_load_in_container"),
        (1, "resident_reuse"),
    ]
    # A new container loads again; the Volume keeps the weights across cycles.
    assert [s["modal_staging_downloaded"] for s in steps] == [True, False, False, False]
    assert steps[2]["cache_status"] == "cold" and steps[2]["load_seconds"] > 0
    assert report["summary"]["resident_reuse"]["count"] == 2
    assert set(report["summary"]) == {"first_load_in_container", "resident_reuse"}
