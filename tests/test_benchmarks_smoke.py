"""Smoke test of the benchmark suite: each section runs once with tiny N, so none can rot.

The figures mean nothing here (and the benchmarks never decide pass or fail); what is checked is
that every peer program, driver and report path still runs end to end and produces numbers.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "benchmarks" / "run.py"

#: Each section, and jobs it must have measured.
SECTIONS = {
    "throughput": ["ts->trio", "ts->ts", "ts->py", "trio->ts", "py->ts"],
    "floor": ["raw->floor", "raw->trio", "raw->ts", "ts->floor"],
    "cancel": ["cancel ts->trio", "cancel trio->ts", "cancel py->ts", "cancel raw->floor"],
    "scale": ["scale trio", "scale ts", "scale py"],
    "inprocess": ["inprocess"],
    "fleet": ["fleet 1", "fleet 2", "fleet 3"],
    "tasks": ["tasks"],
}

#: Only so that a hang fails instead of blocking the suite.
HANG_GUARD = 120


def peers_installed() -> None:
    """Node and the official TypeScript SDK; a failure, never a skip: tox installs both."""
    if shutil.which("node") is None:
        pytest.fail("node is not on PATH: the benchmarks drive the TypeScript SDK")
    if not (ROOT / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json").exists():
        pytest.fail("the official TypeScript SDK is not installed: run `npm ci` at the repo root")


def run_benchmarks(out: Path, *options: str) -> dict[str, Any]:
    command = [sys.executable, str(RUN), "--smoke", "--no-install", "--parallel", "2"]
    command += ["--out", str(out), *options]
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD, check=False
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    summary: dict[str, Any] = json.loads((out / "results.json").read_text())
    return summary


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_section_runs(section: str, tmp_path: Path) -> None:
    peers_installed()
    summary = run_benchmarks(tmp_path, "--only", section, "--no-chart")
    jobs = summary["jobs"]
    for job in SECTIONS[section]:
        assert job in jobs, f"{job} was not measured: {sorted(jobs)}"
        for metric, stat in jobs[job].items():
            assert math.isfinite(stat["median"]), (job, metric, stat)
    report = (tmp_path / "report.md").read_text()
    assert "## Machine" in report
    assert str(tmp_path) not in report, "the report must not name paths of this machine"


def test_chart(tmp_path: Path) -> None:
    """The report's chart is drawn (tox installs the bench extra, matplotlib included)."""
    peers_installed()
    run_benchmarks(tmp_path, "--only", "inprocess")
    assert (tmp_path / "chart.png").read_bytes().startswith(b"\x89PNG")
