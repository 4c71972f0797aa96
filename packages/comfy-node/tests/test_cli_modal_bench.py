"""``comfy-llm modal-bench``: the CLI, the harness's plan and report, on the strict stand-in.

The transport is the only part replaced: the real stager and engine bodies
run in the stand-in's container processes (Transformers here; the vLLM tier runs the same
command against vLLM and sees the compilation states). No Modal credentials.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.modal_strict import StrictTransport

ROOT = Path(__file__).resolve().parents[3]
SCRIPTED = "tiny/smolvlm-scripted"


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[list[StrictTransport]]:
    from comfy_llm_modal_remote import use_transport

    made: list[StrictTransport] = []

    def factory(name: str, directory: Path) -> StrictTransport:
        made.append(StrictTransport(name, directory, root=tmp_path / "modal"))
        return made[-1]

    use_transport(factory)
    yield made
    use_transport(None)
    for transport in made:
        transport.close()


@pytest.mark.slow
def test_modal_bench_runs_cold_cycles_and_writes_the_report(
    model_hub: FakeHub,
    standin: list[StrictTransport],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from comfy_llm._cli import main
    from comfy_llm_modal_remote.wire._fingerprint import code_fingerprint

    monkeypatch.setenv("COMFY_MODAL_LLM_VLLM_EXECUTION_MODE", "auto")  # restored afterwards
    output = tmp_path / "bench.json"
    argv = ["modal-bench", "--model", SCRIPTED, "--gpu", "L4", "--cycles", "2", "--repeats", "1"]
    code = main([*argv, "--max-new-tokens", "8", "--image-size", "16", "--output", str(output)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads(output.read_text(encoding="utf-8"))

    # An isolated app, deployed once per cold cycle and stopped at the end.
    (transport,) = standin
    assert report["app_name"] == transport.app_name
    assert transport.app_name.startswith("comfy-llm-bench-")
    assert (transport.deploys, transport.stops) == (2, 3)
    # The exact source: this checkout's commit, and the code the image carries.
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    source = report["source"]
    assert source["commit"] == head
    assert source["code_fingerprint"] == code_fingerprint()
    assert source["image"]["uv_version"] == "0.13.9"
    assert any(pin.startswith("vllm==") for pin in source["image"]["pins"])
    # The workload as run.
    workload = report["workload"]
    assert (workload["model"], workload["gpu"], workload["image_size"]) == (SCRIPTED, "L4", 16)
    assert workload["execution_mode"] == "throughput"
    assert workload["settings"]["max_new_tokens"] == 8
    # Cold cycles: a new container loads, then the resident engine is reused.
    steps = report["steps"]
    assert [(s["cycle"], s["cold"], s["state"]) for s in steps] == [
        (0, True, "first_load_in_container"),
        (0, False, "resident_reuse"),
        (1, True, "first_load_in_container"),
        (1, False, "resident_reuse"),
    ]
    assert [s["cache_status"] for s in steps] == ["cold", "warm", "cold", "warm"]
    assert all(s["backend"] == "transformers" for s in steps)
    assert {"first_load_in_container", "resident_reuse"} == set(report["summary"])
    # The summary and where the report went; progress went to stderr.
    assert "resident_reuse: count 2" in captured.out
    assert f"report: {output}" in captured.out
    assert "Deploying the Modal app" in captured.err


def test_modal_bench_options_are_checked_before_modal(capsys: pytest.CaptureFixture[str]) -> None:
    from comfy_llm._cli import main

    with pytest.raises(SystemExit) as raised:
        main(["modal-bench", "--model", SCRIPTED, "--cycles", "0"])
    assert raised.value.code == 2
    assert "--cycles: give a whole number >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as raised:
        main(["modal-bench", "--help"])
    assert raised.value.code == 0
    assert "--execution-mode {throughput,eager,auto}" in capsys.readouterr().out


def test_modal_bench_without_credentials_is_one_clear_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from comfy_llm._cli import main
    from comfy_llm_modal_remote import use_transport

    use_transport(None)
    output = tmp_path / "never.json"
    code = main(["modal-bench", "--model", SCRIPTED, "--output", str(output)])
    err = capsys.readouterr().err
    assert code == 2  # fix the setup, then run again
    assert err.count("\n") == 1 and "modal token new" in err
    assert not output.exists()


@pytest.mark.slow
def test_modal_bench_caption_plans_cold_passes_per_worker_count_and_reports_the_cost(
    model_hub: FakeHub,
    standin: list[StrictTransport],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from comfy_llm._cli import main

    monkeypatch.setenv("COMFY_MODAL_LLM_VLLM_EXECUTION_MODE", "auto")  # the bench sets it
    output = tmp_path / "caption-bench.json"
    argv = ["modal-bench", "--caption", "--workers", "1,2", "--model", SCRIPTED, "--gpu", "H100"]
    argv += ["--images", "6", "--chunk-images", "2", "--image-size", "64"]
    code = main([*argv, "--max-new-tokens", "4", "--output", str(output)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads(output.read_text(encoding="utf-8"))
    (transport,) = standin
    # One cold pass per worker count (the app stopped before each), stopped at the end.
    assert (transport.deploys, transport.stops) == (2, 3)
    assert report["source"]["code_fingerprint"]
    workload = report["workload"]
    assert (workload["model"], workload["gpu"], workload["images"]) == (
        SCRIPTED,
        "H100!",
        6,
    )  # pinned: no upgrade to H200
    assert (workload["image_size"], workload["chunk_images"]) == (64, 2)
    assert report["plan"]["workers"] == [1, 2]
    one, two = report["passes"]
    assert (one["workers"], two["workers"]) == (1, 2)
    for entry in (one, two):
        assert entry["captioned"] == 6 and entry["failed"] == 0
        assert entry["gpu"] == "H100!" and entry["chunks"] == 3
        assert entry["gpu_seconds"] > 0 and entry["images_per_gpu_second"] > 0
        assert entry["bytes_per_image"] > 0
        assert sum(w["images"] for w in entry["per_worker"].values()) == 6
        assert all(w["images_per_second"] > 0 for w in entry["per_worker"].values())
    assert len(two["per_worker"]) == 2 and "scaling" in two
    assert set(report["summary"]) == {"workers_1", "workers_2"}
    chunk_keys = {info["affinity_key"] for kind, info, _ in transport.calls if kind == "chunk"}
    assert chunk_keys == {"caption-h100-0", "caption-h100-1"}
