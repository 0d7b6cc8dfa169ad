"""Smoke test of the benchmark suite: each section runs once with tiny N, so none can rot.

The figures mean nothing here (and the benchmarks never decide pass or fail); what is checked is
that every peer program, driver and report path still runs end to end and produces numbers.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
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
    "throughput": ["ts->trio", "ts->ts", "ts->ts2", "ts->py", "trio->ts", "py->ts"],
    "floor": [
        "raw->floor",
        "raw->floor-tasks",
        "raw->trio",
        "raw->ts",
        "ts->floor",
        "ts->floor-tasks",
    ],
    "cancel": [
        "cancel ts->trio",
        "cancel ts->ts2",
        "cancel ts->floor",
        "cancel trio->ts",
        "cancel py->ts",
        "cancel raw->floor",
        "cancel raw->ts2",
    ],
    "scale": ["scale trio", "scale ts", "scale py"],
    "inprocess": ["inprocess"],
    "fleet": ["fleet 1", "fleet 2", "fleet 3", "fleet cost"],
    "tasks": ["tasks"],
    "proxy": ["proxy"],
    "otel": ["otel"],
    "growth": [
        "growth sessions http",
        "growth sessions sse",
        "growth sessions ws",
        "growth tools/list",
        "growth tools/call",
        "growth event store",
    ],
}

#: The HTTP section's jobs: run by test_http_figures alone (with the profiles), not once more by
#: test_section_runs, to keep the smoke test short.
HTTP_JOBS = [
    "http hs trio sse",
    "http hs trio json",
    "http hs floor sse",
    "http hs floor json",
    "http hs floor-tasks sse",
    "http hs floor-tasks json",
    "http hs ts sse",
    "http hs ts json",
    "http hs ts2 sse",
    "http hs ts2 json",
    "http hs py sse",
    "http hs py json",
    "http modern trio sse",
    "http modern trio json",
    "http modern floor sse",
    "http modern floor json",
    "http modern ts2 sse",
    "http modern ts2 json",
    "http modern py sse",
    "http modern py json",
    "http modern trio sse w2",
    "http legacy-sse trio",
    "http legacy-sse floor",
    "http ws trio",
    "http ws floor",
    "http ws floor-tasks",
    "http cancel hs trio",
    "http cancel hs floor",
    "http cancel hs ts",
    "http cancel hs ts2",
    "http cancel hs py",
    "http cancel modern trio",
    "http cancel modern floor",
    "http cancel modern ts2",
    "http cancel modern py",
    "http sessions trio",
    "http sessions ts",
    "http sessions ts2",
    "http sessions py",
]
#: The wrk jobs, when wrk is installed (without it, the report says they were skipped).
WRK_JOBS = [
    f"http {era} {server} {response} wrk"
    for era in ("hs", "modern")
    for server in ("trio", "floor", *(("floor-tasks",) if era == "hs" else ()))
    for response in ("sse", "json")
]

#: The figures each kind of HTTP job must have (their values are not checked).
HTTP_FIGURES = {
    "throughput": [
        "seq_cps",
        "seq_p50",
        "seq_p99",
        "con_cps",
        "con_p50",
        "con_p99",
        "cpu_us_per_call",
    ],
    "cancel": ["return_p50", "server_p50", "next_p50"],
    "sessions": ["bytes_per_session", "rss_before_mib", "rss_after_mib"],
    "wrk": ["con_cps", "con_p50", "con_p99", "cpu_us_per_call", "client_cpu_us_per_call"],
}
#: The ratios the HTTP section's goals read.
HTTP_RATIOS = [
    "http_hs_sse_vs_floor_con",
    "http_hs_json_vs_floor_con",
    "http_modern_sse_vs_floor_con",
    "http_modern_json_vs_floor_con",
    "http_hs_sse_vs_py_con",
    "http_hs_sse_vs_ts_seq",
    "http_modern_sse_vs_py_con",
    "http_workers_2_vs_1",
    "http_cancel_vs_best_peer",
    "http_cancel_vs_floor",
    "http_cancel_floor_vs_best_peer",
    "http_hs_json_floor_vs_py_con",
    "http_modern_sse_floor_vs_py_con",
    "http_legacy_sse_vs_floor_con",
    "http_legacy_sse_cpu_vs_floor",
    "http_ws_vs_floor_con",
    "http_ws_cpu_vs_floor",
    "http_cancel_hs_vs_post",
    "http_cancel_modern_vs_post",
    "http_cancel_hs_floor_vs_post",
    "http_hs_sse_vs_ts2_con",
    "http_modern_json_vs_ts2_con",
    "http_hs_sse_floor_tasks_vs_floor_con",
    "http_hs_json_vs_floor_tasks_con",
    "http_hs_json_cpu_vs_floor_tasks",
    "http_ws_floor_tasks_vs_floor_con",
    "http_ws_vs_floor_tasks_con",
    "http_ws_floor_tasks_cpu_vs_floor",
    "http_ws_cpu_vs_floor_tasks",
]
#: The ratios of the wrk jobs, when wrk is installed.
WRK_RATIOS = [
    "http_hs_sse_wrk_vs_floor_con",
    "http_modern_json_wrk_vs_floor_con",
    "http_hs_json_wrk_cpu_vs_floor",
    "http_modern_trio_sse_wrk_vs_driver",
    "http_hs_json_floor_tasks_wrk_vs_floor_con",
    "http_hs_sse_wrk_vs_floor_tasks_con",
]

#: Only so that a hang fails instead of blocking the suite.
HANG_GUARD = 180


def peers_installed() -> None:
    """Node and the official TypeScript SDK; a failure, never a skip: tox installs both."""
    if shutil.which("node") is None:
        pytest.fail("node is not on PATH: the benchmarks drive the TypeScript SDK")
    if not (ROOT / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json").exists():
        pytest.fail("the official TypeScript SDK is not installed: run `npm ci` at the repo root")


def run_benchmarks(out: Path, *options: str, parallel: int = 2) -> dict[str, Any]:
    """Run ``run.py --smoke``, ``parallel`` jobs at once, or fewer when other pytest-xdist
    workers share the machine: the jobs' load generators keep every core busy, and the other
    workers' tests would get next to none of it."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    parallel = max(1, parallel // workers)
    command = [sys.executable, str(RUN), "--smoke", "--no-install", "--parallel", str(parallel)]
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
    if section == "floor":
        # The floor with a task and a scope per request, held to the goals trio_mcp is held to.
        assert "floor_tasks_vs_floor_con" in summary["ratios"], sorted(summary["ratios"])
        assert "a task and a scope per request" in report
        # And behind the TypeScript client, beside ours.
        for name in ("floor_tasks_ts_seq", "server_vs_floor_tasks_seq"):
            assert name in summary["ratios"], sorted(summary["ratios"])
    if section == "proxy":
        # Proxied against direct, over stdio and HTTP, each a ratio of the report.
        for transport in ("stdio", "http"):
            assert f"{transport}_proxied_p50_us" in jobs["proxy"], sorted(jobs["proxy"])
            assert f"proxy_{transport}_vs_direct" in summary["ratios"], sorted(summary["ratios"])
        assert "A proxied call against a direct one" in report
    if section == "otel":
        # Each transport in each mode, the ratios to OpenTelemetry absent, the SDK's cost.
        for transport in ("stdio", "http"):
            for mode in ("absent", "api", "sdk"):
                assert f"{transport}_{mode}_cps" in jobs["otel"], sorted(jobs["otel"])
            assert f"{transport}_sdk_us_per_call" in jobs["otel"], sorted(jobs["otel"])
            for mode in ("api", "sdk"):
                assert f"otel_{transport}_{mode}_vs_absent" in summary["ratios"]
        assert "What OpenTelemetry costs" in report
    if section == "fleet":
        # CPU per call through nginx + Redis against standalone, both eras, with the ratio:
        # three backends at both loads, each also over the control (three processes alone) at
        # the same load, and the machinery with one backend.
        fleets = ("tagged", "any", "anymap", "connection")
        rows = [(f, load) for f in fleets for load in ("total", "per")]
        for era in ("hs", "modern"):
            assert f"{era}_standalone_us" in jobs["fleet cost"], sorted(jobs["fleet cost"])
            for fleet, load in [*rows, ("one", "total")]:
                key = f"{era}_{fleet}_{load}"
                for part in ("", "_backends", "_nginx", "_redis"):
                    assert f"{key}{part}_us" in jobs["fleet cost"], sorted(jobs["fleet cost"])
                assert f"fleet_cost_{key}" in summary["ratios"], sorted(summary["ratios"])
                if fleet != "one":
                    assert f"fleet_cost_{key}_vs_three" in summary["ratios"]
            for load in ("total", "per"):
                assert f"{era}_three_{load}_us" in jobs["fleet cost"], sorted(jobs["fleet cost"])
                assert f"fleet_cost_{era}_three_{load}" in summary["ratios"]
        assert "CPU per call: through nginx + Redis against one process alone" in report
        assert "| handshake | one backend | in all |" in report
        assert "| handshake | any worker, map | per process |" in report
        assert "| modern | tagged, by connection | per process |" in report
        assert "| modern | three alone | per process |" in report
    if section == "growth":
        # Each cost at its sizes, with how much it grew; the large results against the floor.
        for transport in ("http", "sse", "ws"):
            figures = jobs[f"growth sessions {transport}"]
            for metric in ("rss", "traced"):
                assert f"{metric}_large_bytes_per_session" in figures, sorted(figures)
            for metric in ("base_ms_per_s", "large_ms_per_s", "large_us_per_session_s"):
                assert f"idle_cpu_{metric}" in figures, sorted(figures)
        for metric in ("page_growth_2", "walk_growth_2", "whole_growth_2", "whole_paused_growth_2"):
            assert metric in jobs["growth tools/list"], sorted(jobs["growth tools/list"])
        assert "whole_paused_faults_2" in jobs["growth tools/list"]
        assert "| tools | one page µs |" in report and "| page faults |" in report
        for metric in ("vs_floor_2", "trio_growth_2", "floor_growth_2"):
            assert metric in jobs["growth tools/call"], sorted(jobs["growth tools/call"])
        for metric in ("one_stream_growth", "streams_growth", "replay_tail_growth"):
            assert metric in jobs["growth event store"], sorted(jobs["growth event store"])
        assert "## 9. Growth: how the cost grows with the work" in report
    if section == "inprocess":
        for mode in ("modern", "sse", "json"):
            assert f"http_{mode}_us" in jobs["inprocess"], sorted(jobs["inprocess"])
        assert "Streamable HTTP app alone (no ASGI server), modern era" in report
        assert jobs["inprocess"]["writer_us"]["median"] > 0, sorted(jobs["inprocess"])
        assert "a shared event store's writer, per request stream" in report
        for floor in ("parked_bytes_floor", "parked_bytes_floor_tool"):
            assert jobs["inprocess"][floor]["median"] > 0, sorted(jobs["inprocess"])
        for ratio in ("parked_vs_floor", "parked_vs_floor_tool"):
            assert ratio in summary["ratios"], sorted(summary["ratios"])
        assert "memory per parked request ≤ 1.05x the bare-Trio task" in report


def test_http_figures(tmp_path: Path) -> None:
    """The HTTP section has every figure and ratio of the report, and the profiles section."""
    peers_installed()
    # Four at once: the HTTP jobs mostly wait for their servers to start.
    summary = run_benchmarks(tmp_path, "--only", "http", "--no-chart", "--profile", parallel=4)
    jobs = summary["jobs"]
    report = (tmp_path / "report.md").read_text()
    # wrk (the Debian package) is used when installed, and its absence is said, not an error.
    wrk = shutil.which("wrk") is not None
    for job in HTTP_JOBS + (WRK_JOBS if wrk else []):
        assert job in jobs, f"{job} was not measured: {sorted(jobs)}"
        for metric, stat in jobs[job].items():
            assert math.isfinite(stat["median"]), (job, metric, stat)
        kind = job.split()[1] if job.split()[1] in ("cancel", "sessions") else "throughput"
        missing = set(HTTP_FIGURES["wrk" if job.endswith(" wrk") else kind]) - set(jobs[job])
        assert not missing, (job, missing)
    for era in ("hs", "modern"):
        # The floor's cancel job also times the bare POST round trip, the cancels' yardstick.
        assert "post_p50" in jobs[f"http cancel {era} floor"], sorted(
            jobs[f"http cancel {era} floor"]
        )
    missing_ratios = set(HTTP_RATIOS + (WRK_RATIOS if wrk else [])) - set(summary["ratios"])
    assert not missing_ratios, missing_ratios
    if wrk:
        assert "### Under wrk" in report and "Why the two load generators" in report
    else:
        assert "The wrk jobs were skipped: wrk is not installed" in report
        assert not any(job.endswith(" wrk") for job in jobs)
    # The jobs compared with each other ran back to back: each workload's peers together (and
    # wrk's jobs with the driver's).
    order = list(summary["runs"][0]["figures"])
    peers = r"(trio|floor(?:-tasks)?|ts2?|py)"
    for workload in (
        "http hs * sse",
        "http modern * json",
        "http cancel hs *",
        "http legacy-sse *",
        "http ws *",
    ):
        pattern = re.compile("^" + re.escape(workload).replace(r"\*", peers) + "( wrk)?$")
        at = [i for i, name in enumerate(order) if pattern.match(name)]
        assert len(at) > 1 and at == list(range(at[0], at[0] + len(at))), (workload, order)
    loads = summary["profiles"]["loads"]
    sampled = ("http", "http-modern", "ws", "legacy-sse", "stdio")
    assert set(loads) == {*sampled, "http-modern-floor", "sessions", "parked"}
    for name in sampled:
        assert loads[name]["samples"] > 0 and loads[name]["own"], name
    # The same calls on ours and on the floor: CPU per call by package, and where ours spends
    # beyond the floor (its own package, which the floor does not run, among them).
    against = loads["http-modern-floor"]
    assert list(against["servers"]) == ["trio_mcp", "bare-hypercorn floor"]
    for server in against["servers"].values():
        assert server["us_per_call"] > 0 and "trio" in server["by_package"], server
    assert "trio_mcp" in against["servers"]["trio_mcp"]["by_package"]
    assert "trio_mcp" not in against["servers"]["bare-hypercorn floor"]["by_package"]
    assert against["beyond_floor"], against
    for name in ("sessions", "parked"):
        assert loads[name]["top"], name
    report = (tmp_path / "report.md").read_text()
    for heading in (
        "## 8. Streamable HTTP",
        "### HTTP+SSE (2024-11-05) and WebSocket",
        "## Profiles",
        "### Profile: http (",
        "### Profile: ws (",
        "### Profile: http-modern-floor (",
    ):
        assert heading in report
    assert str(tmp_path) not in report, "the report must not name paths of this machine"
    assert (tmp_path / "profiles.md").read_text().startswith("# Profiles")


def test_chart(tmp_path: Path) -> None:
    """The report's chart is drawn (tox installs the bench extra, matplotlib included)."""
    peers_installed()
    run_benchmarks(tmp_path, "--only", "inprocess")
    assert (tmp_path / "chart.png").read_bytes().startswith(b"\x89PNG")


def _benchmark(name: str) -> Any:
    """A benchmark script of ``benchmarks/``, imported as a module."""
    found = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert found is not None and found.loader is not None
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return module


def test_otel_rounds_put_each_mode_in_each_place_once_in_three() -> None:
    """The OpenTelemetry benchmark measures every mode once per transport in each round, and
    over three rounds each mode first, second and last once: no mode always follows the SDK's
    measurement (a fixed order had the API's measured after the SDK's in two rounds of two)."""
    otel = _benchmark("otel")
    places: dict[str, set[int]] = {mode: set() for mode in otel.MODES}
    for index in range(3):
        order = otel.in_round_order(index)
        assert sorted(order) == sorted((t, m) for t in otel.TRANSPORTS for m in otel.MODES)
        modes = list(dict.fromkeys(mode for _, mode in order))
        for place, mode in enumerate(modes):
            places[mode].add(place)
    assert all(found == {0, 1, 2} for found in places.values()), places


def test_fleet_cost_control_splits_the_load_evenly() -> None:
    """The fleet's control splits the standalone's load over its three processes evenly: every
    session and call made once, the shares within one of each other, and every process given at
    least one session."""
    split = _benchmark("fleet_cost").split
    shares = split({"calls": 2000, "warmup": 300, "sessions": 8, "rounds": 2}, 3)
    assert [s["sessions"] for s in shares] == [3, 3, 2]
    assert [s["calls"] for s in shares] == [667, 667, 666]
    assert [s["warmup"] for s in shares] == [100, 100, 100]
    assert all(s["rounds"] == 2 for s in shares)
    assert [s["sessions"] for s in split({"calls": 4, "warmup": 0, "sessions": 2}, 3)] == [1, 1, 1]
