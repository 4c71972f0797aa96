"""scripts/ci-report.py: the steps' times, each tier's counts and the slowest tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location("ci_report", REPO_ROOT / "scripts" / "ci-report.py")
assert _SPEC is not None and _SPEC.loader is not None
ci_report = importlib.util.module_from_spec(_SPEC)
sys.modules["ci_report"] = ci_report
_SPEC.loader.exec_module(ci_report)

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" time="{total}">{cases}</testsuite></testsuites>
"""


def _junit(path: Path, cases: list[tuple[str, float, str]]) -> None:
    rendered = "".join(
        f'<testcase classname="m" name="{name}" time="{seconds}">{outcome}</testcase>'
        for name, seconds, outcome in cases
    )
    total = sum(seconds for _, seconds, _ in cases)
    path.write_text(JUNIT.format(total=total, cases=rendered), encoding="utf-8")


def test_the_report_names_steps_tiers_and_the_slowest_tests(tmp_path: Path) -> None:
    steps = "lint\t30\tok\nbackground: dist\t50\tok\nmain suite\t90\tFAILED (1)\n"
    (tmp_path / "steps.tsv").write_text(steps)
    _junit(tmp_path / "junit-main.xml", [("a", 1.5, ""), ("b", 9.0, '<failure message="x"/>')])
    _junit(tmp_path / "junit-vllm.xml", [(f"v{i}", float(i), "") for i in range(30)])
    _junit(tmp_path / "junit-install.xml", [("s", 0.1, '<skipped message="y"/>')])
    lines = ci_report.report(tmp_path, slowest=3).splitlines()
    assert "  main suite" in "\n".join(lines) and " 75.0 %  FAILED (1)" in "\n".join(lines)
    assert any(line.startswith("  all steps") and "120 s" in line for line in lines)
    slow = lines[lines.index("The 3 slowest tests of the run:") + 1 :][:3]
    assert [line.split()[-1] for line in slow] == ["m::v29", "m::v28", "m::v27"]
    assert lines[-1] == "total: 31 passed, 1 failed, 1 skipped"
    assert any("main" in line and "1 passed, 1 failed" in line for line in lines)


def test_a_background_tier_counts_in_the_wall_clock_not_the_sum(tmp_path: Path) -> None:
    """The vLLM tier runs beside the main suite: the run is its wall clock, not a sum."""
    steps = (
        "lint\t30\tok\nbackground: vllm-tier\t100\tok\nmain suite\t90\tok\nwall clock\t125\tok\n"
    )
    (tmp_path / "steps.tsv").write_text(steps)
    text = ci_report.report(tmp_path, slowest=3)
    assert "  all steps (wall clock)" in text and "125 s  (2 min 5 s)" in text
    assert "background: vllm-tier" in text and " 80.0 %  ok" in text  # 100 of 125
    assert "wall clock  " not in text.replace("all steps (wall clock)", "")


def test_an_empty_folder_reports_nothing(tmp_path: Path) -> None:
    assert ci_report.report(tmp_path, slowest=25) == ""


def test_the_report_says_how_busy_the_cores_were(tmp_path: Path, monkeypatch) -> None:
    """cpu.tsv: /proc/stat's cpu line every few seconds; busy is all but idle and iowait."""
    monkeypatch.setattr(ci_report.os, "cpu_count", lambda: 2)
    lines = []
    for minute in range(3):
        # user nice system idle iowait irq softirq: per 60 s, 100 jiffies of 200 busy
        # in the first two minutes (one core of two), 200 of 200 in the third
        busy = [0, 100, 200, 400][minute]
        idle = [0, 100, 200, 200][minute]
        lines.append(f"{60 * minute} cpu {busy} 0 0 {idle} 0 0 0 0 0 0")
    lines.append("180 cpu 400 0 0 200 0 0 0 0 0 0")
    (tmp_path / "cpu.tsv").write_text("\n".join(lines) + "\nnot a sample\n")
    text = ci_report.report(tmp_path, slowest=3)
    assert "CPU: 1.33 of 2 cores busy on average" in text
    assert "busy cores, minute by minute: 1.0 1.0 2.0" in text
