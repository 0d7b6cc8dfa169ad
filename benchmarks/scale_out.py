"""Scale-out: modern-era calls/s through nginx round robin in front of K trio_mcp processes.

    python benchmarks/scale_out.py '{"backends": 3, "n": 3000, "warmup": 500, "concurrency": 16}'

The deployment is the one ``docs/deploy.md`` describes and the fleet tests check: K processes
(``trio-mcp demo --transport http --node-id nK``, one per port) behind nginx run from
``deploy/nginx.conf`` (the tests' harness, ``tests/deploy/_fleet.py``, starts and stops them).
A Node.js load generator (``peers/http_load.mjs``) sends ``tools/call echo`` with fresh ids
from ``concurrency`` keep-alive loops and checks every answer. Prints one JSON object: calls/s,
latency percentiles, the CPU the backends and nginx used per call, and the share of the calls
the busiest and the idlest backend took. ``run.py`` runs it for 1, 2 and 3 backends in one run
and reports the ratios.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # for the harness; trio_mcp may come from PYTHONPATH (--commit)

from tests.deploy._fleet import Fleet, fleet  # noqa: E402 - the checkout's own harness

TICKS = os.sysconf("SC_CLK_TCK")
LOAD = str(ROOT / "benchmarks" / "peers" / "http_load.mjs")


def group_cpu_seconds(group: int) -> float:
    """User plus system CPU of every live process in a process group (nginx has workers)."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == group:  # pgrp
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def cpu(running: Fleet) -> tuple[list[float], float]:
    backends = [group_cpu_seconds(b.pid) for b in running.backends]
    return backends, group_cpu_seconds(running.nginx.pid)


async def measure(spec: dict[str, Any]) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        raise SystemExit("scale_out.py: node is not on PATH (the load generator is Node.js)")
    with tempfile.TemporaryDirectory(prefix="trio-mcp-fleet-") as scratch:
        async with fleet(Path(scratch), int(spec["backends"])) as running:
            load_spec = {
                "url": running.url,
                "n": int(spec["n"]),
                "warmup": int(spec["warmup"]),
                "concurrency": int(spec["concurrency"]),
            }
            # The warmup is inside the load generator: CPU is counted over the whole of it, and
            # the figures per call divide by all the calls it made.
            before = cpu(running)
            done = await trio.run_process(
                [node, LOAD, json.dumps(load_spec)], capture_stdout=True, check=True
            )
            after = cpu(running)
    raw = json.loads(done.stdout.decode().strip().splitlines()[-1])
    if raw["bad"]:
        raise RuntimeError(f"{raw['bad']} calls failed, e.g. {raw['bad_example']}")
    calls = load_spec["n"] + load_spec["warmup"]
    used = [a - b for a, b in zip(after[0], before[0], strict=True)]
    latencies = raw["latencies_us"]
    return {
        "cps": len(latencies) / raw["elapsed"],
        "p50": percentile(latencies, 50),
        "p90": percentile(latencies, 90),
        "p99": percentile(latencies, 99),
        "backend_cpu_ms_per_call": sum(used) * 1000 / calls,
        "nginx_cpu_ms_per_call": (after[1] - before[1]) * 1000 / calls,
        "busiest_backend_cpu_share": max(used) / sum(used) if sum(used) else 0.0,
    }


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    result = trio.run(measure, spec)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
