"""The benchmark harness's planning and report, on the strict stand-in (container processes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from comfy_llm_inputs import PreparedInputs
from comfy_llm_modal_remote.bench import TransportBenchTarget
from comfy_llm_modal_remote.bench._requests import (
    BenchStep,
    Workload,
    classify,
    plan_benchmark,
    run_benchmark,
    source_revision,
)
from comfy_llm_residency.backend import GenerationSettings
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.modal_strict import StrictTransport

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
    compiled = {"cache_status": "cold", "vllm_execution_mode": "throughput"}
    fresh = {**compiled, "modal_compile_cache_warm": False}
    cached = {**compiled, "modal_compile_cache_warm": True}
    # The engine's compile-cache telemetry decides, whatever the cycle.
    assert classify(BenchStep(1, "request", True), fresh) == "first_compilation"
    assert classify(BenchStep(0, "request", True), cached) == "cached_compilation_new_container"
    # Without it, the first cycle is the first compilation.
    assert classify(BenchStep(0, "request", True), compiled) == "first_compilation"
    assert classify(BenchStep(1, "request", True), compiled) == "cached_compilation_new_container"
    eager = {"cache_status": "cold", "vllm_execution_mode": "eager"}
    assert classify(BenchStep(1, "request", True), eager) == "first_load_in_container"
    assert classify(BenchStep(1, "request"), {"cache_status": "warm"}) == "resident_reuse"


def test_source_names_the_commit_and_a_dirty_tree(tmp_path: Path) -> None:
    import subprocess

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "a.txt").write_text("one\n")
    git("add", "a.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    clean = source_revision(tmp_path)
    assert len(clean["commit"]) == 40 and clean["dirty"] is False
    assert clean["diff_sha256"] is None
    (tmp_path / "a.txt").write_text("two\n")
    dirty = source_revision(tmp_path)
    assert dirty["commit"] == clean["commit"] and dirty["dirty"] is True
    (tmp_path / "a.txt").write_text("three\n")
    assert len(dirty["diff_sha256"]) == 64
    assert source_revision(tmp_path)["diff_sha256"] != dirty["diff_sha256"]
    assert source_revision(tmp_path / "missing") == {
        "commit": None,
        "dirty": None,
        "diff_sha256": None,
    }


@pytest.mark.slow
def test_report_from_two_cold_cycles(model_hub: FakeHub, transport: StrictTransport) -> None:
    target = TransportBenchTarget(transport)
    workload = Workload(model=SCRIPTED, gpu="L4", image_size=0, max_new_tokens=8)
    settings = GenerationSettings(temperature=0.0, max_new_tokens=8)
    report = run_benchmark(
        target,
        workload,
        plan_benchmark(2, 1),
        prepare=lambda profile: PreparedInputs.text(workload.prompt),
        settings=settings,
        source=source_revision(ROOT),
    )
    json.dumps(report)  # JSON-ready
    assert (transport.stops, transport.deploys) == (2, 2)  # each cold cycle deploys anew
    assert report["workload"]["model"] == SCRIPTED
    assert report["workload"]["settings"] == settings.to_dict()
    assert report["plan"]["cycles"] == 2 and report["plan"]["resident_repeats"] == 1
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
    assert [s["modal_affinity_key"] for s in steps] == ["bench"] * 4
    assert report["summary"]["resident_reuse"]["count"] == 2
    assert set(report["summary"]) == {"first_load_in_container", "resident_reuse"}


def test_a_sample_that_is_not_what_was_planned_is_refused_with_its_reason() -> None:
    from comfy_llm_modal_remote.bench._requests import refusal

    cold, warm = BenchStep(0, "request", cold=True), BenchStep(0, "request")
    vllm_warm = {"cache_status": "warm", "backend": "vllm", "vllm_execution_mode": "throughput"}
    assert refusal(warm, vllm_warm, "throughput") is None
    assert "cache hit" in str(refusal(cold, vllm_warm, "throughput"))
    assert "not a warm figure" in str(refusal(warm, {"cache_status": "cold"}, "throughput"))
    eager = {**vllm_warm, "vllm_execution_mode": "eager"}
    assert "'eager'" in str(refusal(warm, eager, "throughput"))
    assert refusal(cold, {"cache_status": "cold", "backend": "transformers"}, "throughput") is None


def test_the_caption_bench_keeps_cold_chunks_out_of_the_warm_rate_and_counts_tokens() -> None:
    from comfy_llm_modal_remote import ChunkResult, ImageCaption
    from comfy_llm_modal_remote.bench._caption import _caption_figures, _Counter

    def chunk(chunk_id: int, status: str, seconds: float) -> ChunkResult:
        metadata = {
            "cache_status": status,
            "backend": "vllm",
            "vllm_execution_mode": "throughput",
            "output_tokens": 64,
            "vllm_engine_load": {"peak_running_requests": 96, "peak_kv_cache_usage": 0.41},
        }
        captions = tuple(ImageCaption(i, "a scene", None, metadata) for i in range(4))
        return ChunkResult(chunk_id, captions, seconds)

    counter = _Counter("throughput")
    counter.captions(chunk(0, "cold", 40.0))  # the container's load and compile
    counter.captions(chunk(1, "warm", 2.0))
    figures = _caption_figures(counter)
    assert figures["warm_images_per_gpu_second"] == 2.0  # 4 images in 2 s, the cold chunk out
    assert figures["tokens_per_caption"] == {"mean": 64.0, "min": 64, "max": 64}
    assert figures["peak_running_requests"] == 96 and figures["peak_kv_cache_usage"] == 0.41
    assert [(r["chunk"], "cold load" in r["refused"]) for r in figures["refused_chunks"]] == [
        (0, True)
    ]


def test_the_caption_bench_images_look_like_photographs_not_flat_colours() -> None:
    import io

    from comfy_llm_modal_remote.bench._caption import photo_like

    sizes = []
    for index in range(2):
        encoded = io.BytesIO()
        photo_like(index, 512).save(encoded, "JPEG", quality=90)
        sizes.append(len(encoded.getvalue()))
    assert min(sizes) > 60_000  # a flat 512² JPEG is ~3 KB
    assert photo_like(0, 64).tobytes() == photo_like(0, 64).tobytes() != photo_like(1, 64).tobytes()
