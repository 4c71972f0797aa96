"""Where a CI run's time went: each step's seconds and the slowest tests of all tiers.

Usage: python3 scripts/ci-report.py CI_OUTPUT_DIR [--slowest N]

Reads ``steps.tsv`` (``name<TAB>seconds<TAB>status`` per step, written by
``.ci/run``) and every ``junit-*.xml`` pytest wrote there (``--junitxml``), and
prints the steps with their share of the run, each tier's test time, the N
slowest tests across the tiers (setup and teardown included, as pytest's
``--durations`` counts them: one line per test), how busy the cores were
(``cpu.tsv``: ``SECONDS`` and the ``cpu`` line of /proc/stat, sampled by
``.ci/run``), and a closing ``total: N passed, N failed, N skipped`` line.
Standard library only.
"""

from __future__ import annotations

import argparse
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def _steps(folder: Path) -> list[tuple[str, int, str]]:
    path = folder / "steps.tsv"
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        name, seconds, status = line.split("\t")
        rows.append((name, int(seconds), status))
    return rows


def _tests(folder: Path) -> tuple[list[tuple[float, str, str]], dict[str, dict[str, float]]]:
    """``(seconds, tier, test id)`` per test case, and per tier its counts and time."""
    cases: list[tuple[float, str, str]] = []
    tiers: dict[str, dict[str, float]] = {}
    for path in sorted(folder.glob("junit-*.xml")):
        tier = path.stem.removeprefix("junit-")
        counts = tiers.setdefault(tier, {"passed": 0, "failed": 0, "skipped": 0, "seconds": 0.0})
        for suite in ET.parse(path).getroot().iter("testsuite"):
            counts["seconds"] += float(suite.get("time", 0))
        for case in ET.parse(path).getroot().iter("testcase"):
            seconds = float(case.get("time", 0))
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            cases.append((seconds, tier, name))
            if case.find("failure") is not None or case.find("error") is not None:
                counts["failed"] += 1
            elif case.find("skipped") is not None:
                counts["skipped"] += 1
            else:
                counts["passed"] += 1
    return cases, tiers


def _busy_cores(folder: Path) -> tuple[float, list[float]] | None:
    """Busy cores on average over the run, and per minute, from ``cpu.tsv``.

    Each line is ``<seconds> cpu <user> <nice> <system> <idle> <iowait> ...`` (the
    jiffies /proc/stat counts since boot). Busy is everything but idle and iowait;
    the cores are the machine's (the report runs where the CI ran).
    """
    path = folder / "cpu.tsv"
    if not path.is_file():
        return None
    samples: list[tuple[int, int, int]] = []  # (second, busy jiffies, all jiffies)
    for line in path.read_text(encoding="utf-8").splitlines():
        fields = line.split()
        if len(fields) < 6 or fields[1] != "cpu":
            continue
        jiffies = [int(value) for value in fields[2:]]
        idle = jiffies[3] + (jiffies[4] if len(jiffies) > 4 else 0)
        samples.append((int(fields[0]), sum(jiffies) - idle, sum(jiffies)))
    if len(samples) < 2:
        return None
    cores = os.cpu_count() or 1

    def busy(first: tuple[int, int, int], last: tuple[int, int, int]) -> float:
        spent = last[2] - first[2]
        return cores * (last[1] - first[1]) / spent if spent else 0.0

    minutes: list[float] = []
    start = samples[0]
    for sample in samples[1:]:
        if sample[0] - start[0] >= 60:
            minutes.append(busy(start, sample))
            start = sample
    return busy(samples[0], samples[-1]), minutes


WALL_CLOCK = "wall clock"
"""The step name .ci/run gives the whole run's wall time."""


def report(folder: Path, slowest: int) -> str:
    """The whole report, as printed."""
    lines = []
    steps = _steps(folder)
    # Foreground steps run one after another; background steps (builds, the vLLM
    # tier) ran beside them, so the run's length is its wall clock (written last by
    # .ci/run), or the foreground's sum for a run that did not record it.
    walls = [seconds for name, seconds, _ in steps if name == WALL_CLOCK]
    steps = [step for step in steps if step[0] != WALL_CLOCK]
    foreground = sum(seconds for name, seconds, _ in steps if not name.startswith("background:"))
    total = (walls[-1] if walls else foreground) or 1
    if steps:
        lines.append("CI steps (wall seconds; background steps ran beside the others):")
        for name, seconds, status in steps:
            lines.append(f"  {name:<44} {seconds:>6} s  {100 * seconds / total:5.1f} %  {status}")
        label = "all steps (wall clock)" if walls else "all steps"
        lines.append(f"  {label:<44} {total:>6} s  ({total // 60} min {total % 60} s)")
    cpu = _busy_cores(folder)
    if cpu is not None:
        average, minutes = cpu
        lines.append(f"CPU: {average:.2f} of {os.cpu_count() or 1} cores busy on average")
        if minutes:
            lines.append("  busy cores, minute by minute: " + " ".join(f"{m:.1f}" for m in minutes))
    cases, tiers = _tests(folder)
    if tiers:
        lines.append("Test tiers (pytest's own time):")
        for tier, counts in tiers.items():
            lines.append(
                f"  {tier:<20} {counts['seconds']:8.1f} s  {int(counts['passed'])} passed, "
                f"{int(counts['failed'])} failed, {int(counts['skipped'])} skipped"
            )
    if cases:
        lines.append(f"The {slowest} slowest tests of the run:")
        for seconds, tier, name in sorted(cases, reverse=True)[:slowest]:
            lines.append(f"  {seconds:8.2f} s  {tier:<16} {name}")
        passed = sum(int(c["passed"]) for c in tiers.values())
        failed = sum(int(c["failed"]) for c in tiers.values())
        skipped = sum(int(c["skipped"]) for c in tiers.values())
        lines.append(f"total: {passed} passed, {failed} failed, {skipped} skipped")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the report of one CI output folder."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--slowest", type=int, default=25)
    args = parser.parse_args(argv)
    print(report(args.folder, args.slowest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
