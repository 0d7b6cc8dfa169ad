"""Run every trio_mcp benchmark against the official SDKs and write the report.

    python3 benchmarks/run.py            # the full run: about 8 minutes on 2 cores
    python3 benchmarks/run.py --quick    # fewer, shorter runs, for a look while iterating
    python3 benchmarks/run.py --smoke --only cancel --out /tmp/x   # what the smoke test runs
    python3 benchmarks/run.py --profile  # and py-spy profiles of our server, for the report

What is missing is installed first: the Python extras (``pip install -e '.[interop,bench]'``, into
the running interpreter) and the TypeScript SDK (``npm ci``, when ``node_modules`` has no SDK).
The report (``report.md``), the chart (``chart.png``) and every figure per run
(``results.json``) go to ``benchmarks/results/`` unless ``--out`` says otherwise.

Every figure is measured once per run, in a shuffled order that keeps the jobs compared with each
other together (:func:`comparison_group`), and reported as the median and the range (min-max)
over the runs; every ratio is computed within one run (both sides measured back to back, seconds
apart, on the same machine load) and then summarised the same way. See
``docs/benchmarks.md`` for what each benchmark measures and why.
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import importlib.util
import io
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any

from _report import FLEET_COST_ROWS, build_report, draw_chart
from profiles import PYTHON as PROFILE_PYTHON
from profiles import free_port, group_pids
from profiles import record_all as record_profiles
from profiles import write as write_profiles

ROOT = Path(__file__).resolve().parent.parent
PEERS = Path("benchmarks") / "peers"  # relative to ROOT, so no absolute path reaches a report
DEFAULT_OUT = ROOT / "benchmarks" / "results"

PROFILES: dict[str, dict[str, int]] = {
    "full": {
        "runs": 5,
        "n": 3000,
        "k": 10,
        "warmup": 1000,
        "cancels": 20,
        "cancel_warmup": 50,
        "warmup_cancels": 3,
        "parked": 10000,
        "settle_ms": 500,
        "scale_n": 1000,
        "messages": 20000,
        "parked_inprocess": 5000,
        "clock_rounds": 500,
        "fleet_n": 5000,
        "fleet_warmup": 1000,
        "fleet_concurrency": 16,
        "fleet_cost_calls": 5000,
        "fleet_cost_warmup": 500,
        "fleet_cost_sessions": 8,
        "task_calls": 2000,
        "proxy_calls": 200,
        "proxy_warmup": 100,
        "proxy_rounds": 5,
        "task_warmup": 300,
        "task_parked": 5000,
        "otel_calls": 1000,
        "otel_warmup": 100,
        "otel_rounds": 6,
        "http_runs": 5,
        "http_n": 1200,
        "http_warmup": 300,
        "http_cancels": 20,
        "http_sessions": 500,
        "http_session_warmup": 50,
        "wrk_seconds": 10,
        "wrk_warmup_seconds": 2,
        "growth_runs": 2,
        "growth_sessions": 10000,
        "growth_session_warmup": 50,
        "growth_idle_ms": 3000,
        "growth_quiet_ms": 6000,
        "growth_tools": 10000,
        "growth_tools_listed": 20000,
        "growth_page_calls": 200,
        "growth_call_bytes": 10_000_000,
        "growth_calls": 300,
        "growth_call_budget": 100_000_000,
        "growth_rounds": 5,
        "growth_events": 10000,
        "growth_replays": 1000,
    },
    "quick": {
        "runs": 2,
        "n": 500,
        "k": 10,
        "warmup": 300,
        "cancels": 30,
        "cancel_warmup": 20,
        "warmup_cancels": 2,
        "parked": 2000,
        "settle_ms": 300,
        "scale_n": 300,
        "messages": 5000,
        "parked_inprocess": 1000,
        "clock_rounds": 100,
        "fleet_n": 1500,
        "fleet_warmup": 300,
        "fleet_concurrency": 16,
        "fleet_cost_calls": 2000,
        "fleet_cost_warmup": 300,
        "fleet_cost_sessions": 8,
        "task_calls": 500,
        "proxy_calls": 100,
        "proxy_warmup": 50,
        "proxy_rounds": 3,
        "task_warmup": 100,
        "task_parked": 1000,
        "otel_calls": 500,
        "otel_warmup": 50,
        "otel_rounds": 3,
        "http_runs": 2,
        "http_n": 500,
        "http_warmup": 100,
        "http_cancels": 8,
        "http_sessions": 300,
        "http_session_warmup": 20,
        "wrk_seconds": 5,
        "wrk_warmup_seconds": 1,
        "growth_runs": 1,
        "growth_sessions": 10000,
        "growth_session_warmup": 20,
        "growth_idle_ms": 2000,
        "growth_quiet_ms": 6000,
        "growth_tools": 10000,
        "growth_tools_listed": 10000,
        "growth_page_calls": 100,
        "growth_call_bytes": 10_000_000,
        "growth_calls": 100,
        "growth_call_budget": 30_000_000,
        "growth_rounds": 3,
        "growth_events": 10000,
        "growth_replays": 300,
    },
    "smoke": {
        "runs": 1,
        "n": 20,
        "k": 4,
        "warmup": 5,
        "cancels": 2,
        "cancel_warmup": 2,
        "warmup_cancels": 0,
        "parked": 50,
        "settle_ms": 50,
        "scale_n": 20,
        "messages": 200,
        "parked_inprocess": 50,
        "clock_rounds": 10,
        "fleet_n": 30,
        "fleet_warmup": 5,
        "fleet_concurrency": 4,
        "fleet_cost_calls": 30,
        "fleet_cost_warmup": 6,
        "fleet_cost_sessions": 3,
        "task_calls": 20,
        "proxy_calls": 20,
        "proxy_warmup": 5,
        "proxy_rounds": 1,
        "task_warmup": 5,
        "task_parked": 50,
        "otel_calls": 20,
        "otel_warmup": 5,
        "otel_rounds": 1,
        "http_runs": 1,
        "http_n": 20,
        "http_warmup": 5,
        "http_cancels": 2,
        "http_sessions": 10,
        "http_session_warmup": 2,
        "wrk_seconds": 1,
        "wrk_warmup_seconds": 0,
        "growth_runs": 1,
        "growth_sessions": 200,
        "growth_session_warmup": 5,
        "growth_idle_ms": 200,
        "growth_quiet_ms": 0,
        "growth_tools": 1000,
        "growth_tools_listed": 2000,
        "growth_page_calls": 10,
        "growth_call_bytes": 1_000_000,
        "growth_calls": 10,
        "growth_call_budget": 2_000_000,
        "growth_rounds": 1,
        "growth_events": 1000,
        "growth_replays": 20,
    },
}
SECTIONS = (
    "throughput",
    "floor",
    "cancel",
    "scale",
    "inprocess",
    "fleet",
    "tasks",
    "proxy",
    "otel",
    "http",
    "growth",
)
#: The growth section's transports of idle sessions (``benchmarks/growth.py``).
GROWTH_TRANSPORTS = ("http", "sse", "ws")
#: How many backends the fleet section puts behind nginx.
FLEET_SIZES = (1, 2, 3)

SERVERS = ("trio", "ts", "py")
CLIENTS = ("trio", "ts", "py")
#: The peer servers beside trio_mcp in the throughput, cancel and HTTP sections: the Python SDK,
#: the TypeScript SDK 1.x (``ts``) and its v2 server package (``ts2``,
#: ``@modelcontextprotocol/server``).
PEER_SERVERS = ("ts", "ts2", "py")

#: The HTTP section: the eras (``hs``: the handshake era, ``modern``: 2026-07-28), the servers
#: that speak each (the TypeScript SDK 1.x has no modern era; its v2 server package speaks both),
#: the two response kinds.
HTTP_ERAS = {"hs": "handshake", "modern": "modern"}
HTTP_SERVERS = {
    "hs": ("trio", "floor", "ts", "ts2", "py"),
    "modern": ("trio", "floor", "ts2", "py"),
}
HTTP_RESPONSES = ("sse", "json")
#: The handshake era's second floor: the bare-hypercorn floor answering each request in a task of
#: its own, under a cancel scope of its own, in a nursery that outlives the POST (a session's),
#: as trio_mcp runs every request of a session (``BENCH_TASKS=1``; the stdio floor's
#: ``--tasks``). Driven and put under wrk as the floor is, in that era only; and WebSocket's,
#: each request in a task of the socket's nursery.
HTTP_TASK_FLOOR = "floor-tasks"
#: The HTTP servers that run under hypercorn (whose workers say when they are ready).
HYPERCORN_SERVERS = ("trio", "floor", HTTP_TASK_FLOOR)
#: The two other transports of trio_mcp's HTTP app, each against its own floor (the
#: bare-hypercorn floor speaking its framing): the job's name for it -> the driver's, the path.
HTTP_TRANSPORTS = {"legacy-sse": ("sse", "/sse"), "ws": ("ws", "/ws")}
#: Connections of the "concurrent" half of an HTTP throughput job.
HTTP_CONNECTIONS = 10
#: Bare POST round trips timed per cancel, after the cancels of the floor's HTTP cancel job.
HTTP_POST_ROUNDS = 10
#: How long an HTTP server may take to accept connections.
HTTP_START_TIMEOUT = 30.0

#: A bound on one benchmark process, only so that a hang fails instead of blocking forever.
JOB_TIMEOUT = 600

#: The HTTP section's second load generator: wrk (the Debian package), one thread and
#: HTTP_CONNECTIONS connections, each sending its next request as soon as an answer is in, for
#: a fixed time. It runs trio_mcp's server and the bare-hypercorn floor, in both eras and both
#: response kinds; job ``http hs trio sse wrk`` sits beside the driver's ``http hs trio sse``.
WRK_SERVERS = ("trio", "floor")
WRK_SCRIPT = PEERS / "wrk_echo.lua"


# -- commands -----------------------------------------------------------------------------------


def node() -> str:
    path = shutil.which("node")
    if path is None:
        raise SystemExit("run.py: node is not on PATH; the TypeScript peers need Node.js 20+")
    return path


#: How to run Python: this interpreter, behind ``env PYTHONPATH=...`` when ``--commit`` exported
#: a snapshot of trio_mcp (the TypeScript client passes servers only a minimal environment, so
#: the variable has to be on the command line).
PYTHON: list[str] = [sys.executable]


def use_snapshot(commit: str, scratch: Path) -> str:
    """Export ``trio_mcp/`` at ``commit`` into ``scratch`` and run every Python peer on it."""
    short = _first_line(["git", "rev-parse", "--short", f"{commit}^{{commit}}"])
    if short == "?":
        raise SystemExit(f"run.py: {commit!r} is not a commit of this repository")
    archive = subprocess.run(
        ["git", "archive", "--format=tar", short, "trio_mcp"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(scratch, filter="data")
    env = shutil.which("env") or "/usr/bin/env"
    PYTHON[:] = [env, f"PYTHONPATH={scratch}", sys.executable]
    return short


def server_command(name: str, stamps: str | None = None) -> list[str]:
    program = {
        "trio": [*PYTHON, str(PEERS / "trio_server.py")],
        "py": [*PYTHON, str(PEERS / "py_server.py")],
        "ts": [node(), str(PEERS / "ts_server.mjs")],
        "ts2": [node(), str(PEERS / "ts2_server.mjs")],
        "floor": [*PYTHON, str(PEERS / "floor_server.py")],
        "floor-tasks": [*PYTHON, str(PEERS / "floor_server.py"), "--tasks"],
    }[name]
    return [*program, "--stamps", stamps] if stamps else program


def client_command(name: str, spec: dict[str, Any], server: list[str]) -> list[str]:
    program = {
        "trio": [*PYTHON, str(PEERS / "trio_client.py")],
        "py": [*PYTHON, str(PEERS / "py_client.py")],
        "ts": [node(), str(PEERS / "ts_client.mjs")],
        "raw": [node(), str(PEERS / "raw_driver.mjs")],
    }[name]
    return [*program, json.dumps(spec), "--", *server]


def http_server_command(
    name: str, port: int, *, json_response: bool, stamps: str | None = None, workers: int = 1
) -> tuple[list[str], dict[str, str]]:
    """The command line and extra environment of one HTTP benchmark server on ``port``.

    trio_mcp's server and the floor run under ``hypercorn --worker-class trio`` (its default
    of one worker process, or ``workers``); the TypeScript SDK's (1.x and the v2 server package)
    under Node's ``http``; the Python
    SDK's as ``MCPServer.run("streamable-http")`` runs it, under uvicorn.
    """
    env: dict[str, str] = {}
    if name in HYPERCORN_SERVERS:
        module = "trio_http_server.py" if name == "trio" else "floor_http_server.py"
        command = [*PYTHON, "-m", "hypercorn", "--worker-class", "trio"]
        command += ["--workers", str(workers), "--bind", f"127.0.0.1:{port}"]
        command.append(f"{PEERS / module}:app")
        if name == "trio":
            env["BENCH_JSON_RESPONSE"] = "1" if json_response else "0"
            env["BENCH_MAX_SESSIONS_PER_CLIENT"] = "100000"
            if stamps:
                env["BENCH_STAMPS"] = stamps
        else:
            env["BENCH_SSE"] = "0" if json_response else "1"
            env["BENCH_TASKS"] = "1" if name == HTTP_TASK_FLOOR else "0"
            if stamps:
                env["BENCH_STAMPS"] = stamps
        return command, env
    if workers != 1:
        raise ValueError(f"only hypercorn servers run with several workers, not {name}")
    program = {
        "ts": [node(), str(PEERS / "ts_http_server.mjs")],
        "ts2": [node(), str(PEERS / "ts2_http_server.mjs")],
        "py": [*PYTHON, str(PEERS / "py_http_server.py")],
    }[name]
    command = [*program, "--port", str(port)] + (["--json"] if json_response else [])
    return [*command, "--stamps", stamps] if stamps else command, env


def group_cpu_seconds(group: int) -> float:
    """User plus system CPU of a process group's live processes and of their reaped children."""
    ticks = 0
    for pid in group_pids(group):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        ticks += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


class HttpServer:
    """One HTTP benchmark server, in a process group of its own, for the length of a job."""

    def __init__(
        self, command: list[str], env: dict[str, str], port: int, log: Path, ready: Path | None
    ) -> None:
        self.port = port
        self.log = log
        self.ready = ready  # where hypercorn's workers write their pids (None: not hypercorn)
        if ready is not None:
            ready.write_text("")
            env = {**env, "BENCH_READY": str(ready)}
        with log.open("ab") as err:
            err.write(f"\n--- {' '.join(Path(c).name for c in command[:4])}\n".encode())
            self.process = subprocess.Popen(
                command,
                cwd=ROOT,
                env={**os.environ, **env},
                stdin=subprocess.DEVNULL,
                stdout=err,
                stderr=err,
                start_new_session=True,
            )

    def wait_ready(self, workers: int = 1) -> None:
        deadline = time.monotonic() + HTTP_START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log.read_text(errors="replace")[-3000:]
                raise RuntimeError(
                    f"the HTTP server exited with {self.process.returncode}:\n{tail}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    pass
            except OSError:
                time.sleep(0.05)
                continue
            # hypercorn binds before it spawns its workers: wait for each to have its app.
            if self.ready is None or len(self.ready.read_text().split()) >= workers:
                return
            time.sleep(0.05)
        raise RuntimeError(f"the HTTP server did not accept connections in {HTTP_START_TIMEOUT} s")

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # its workers, if any are left
        except ProcessLookupError:
            pass
        self.process.wait()


def run_json(command: Sequence[str], log: Path) -> Any:
    """Run one benchmark process from the repository root; return the JSON it printed last."""
    with log.open("ab") as err:
        err.write(f"\n--- {' '.join(Path(c).name for c in command[:2])}\n".encode())
        err.flush()
        done = subprocess.run(
            list(command),
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            timeout=JOB_TIMEOUT,
            check=False,
        )
    lines = done.stdout.decode(errors="replace").strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{command[:2]!r} exited with {done.returncode}; stderr:\n{tail}")
    return json.loads(lines[-1])


def open_http_session(port: int) -> tuple[str, str]:
    """A handshake-era session on ``port``, opened as http_driver.mjs opens its own
    (``initialize``, then ``notifications/initialized``): its Mcp-Session-Id and the protocol
    version the server chose."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "run.py", "version": "0.0.0"},
        },
    }
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=HTTP_START_TIMEOUT)
    try:
        connection.request("POST", "/mcp", json.dumps(init), headers)
        answer = connection.getresponse()
        body = answer.read().decode()
        session = answer.getheader("mcp-session-id")
        if answer.status != 200 or session is None:
            raise RuntimeError(f"initialize: HTTP {answer.status}, no session: {body[:300]}")
        # The result, from a JSON body or from the data of an SSE event.
        data = [line.removeprefix("data:").strip() for line in body.splitlines()]
        reply = next(json.loads(d) for d in data if d.startswith("{") and '"result"' in d)
        version: str = reply["result"]["protocolVersion"]
        headers.update({"Mcp-Session-Id": session, "MCP-Protocol-Version": version})
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        connection.request("POST", "/mcp", json.dumps(note), headers)
        answer = connection.getresponse()
        answer.read()
        if answer.status not in (200, 202):
            raise RuntimeError(f"notifications/initialized: HTTP {answer.status}")
    finally:
        connection.close()
    return session, version


def run_wrk(
    port: int, seconds: int, args: Sequence[str], log: Path
) -> tuple[dict[str, Any], float]:
    """Run wrk with ``wrk_echo.lua`` on ``port`` for ``seconds``: the JSON its ``done`` printed,
    and wrk's own CPU time (user + system, from wait4)."""
    wrk = shutil.which("wrk")
    if wrk is None:
        raise RuntimeError("wrk is not on PATH")
    command = [wrk, "-t1", f"-c{HTTP_CONNECTIONS}", f"-d{seconds}s", "-s", str(WRK_SCRIPT)]
    command += [f"http://127.0.0.1:{port}/mcp", "--", *args]
    with log.open("ab") as err:
        err.write(f"\n--- wrk {' '.join(args[:1])}\n".encode())
        err.flush()
        process = subprocess.Popen(
            command, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err
        )
    guard = threading.Timer(JOB_TIMEOUT, process.kill)  # only so that a hang fails
    guard.start()
    try:
        assert process.stdout is not None
        output = process.stdout.read().decode(errors="replace")
        process.stdout.close()
        # wait4, not wait: the child's resource usage comes with its exit status.
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
    finally:
        guard.cancel()
    lines = output.strip().splitlines()
    if process.returncode != 0 or not lines or not lines[-1].startswith("{"):
        raise RuntimeError(f"wrk exited with {process.returncode}:\n{output[-3000:]}")
    raw: dict[str, Any] = json.loads(lines[-1])
    errors = {k: raw[k] for k in ("bad", "connect", "read", "write", "status", "timeout") if raw[k]}
    if errors:
        raise RuntimeError(f"wrk met errors (bad: not 200 or no echo) {errors}:\n{output[-3000:]}")
    return raw, usage.ru_utime + usage.ru_stime


def wrk_version() -> str:
    """wrk's version line (``wrk -v`` prints it before its usage)."""
    wrk = shutil.which("wrk")
    if wrk is None:
        return "not installed"
    done = subprocess.run([wrk, "-v"], capture_output=True, text=True, check=False)
    words = (done.stdout + done.stderr).split()
    return words[1] if len(words) > 1 and words[0] == "wrk" else "?"


# -- statistics ---------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), nearest rank on the sorted values."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def summarise_calls(part: dict[str, Any]) -> dict[str, float]:
    latencies = part["latencies_us"]
    return {
        "cps": len(latencies) / part["elapsed"],
        "p50": percentile(latencies, 50),
        "p90": percentile(latencies, 90),
        "p99": percentile(latencies, 99),
    }


def throughput_metrics(raw: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for mode, short in (("sequential", "seq"), ("concurrent", "con")):
        for key, value in summarise_calls(raw[mode]).items():
            out[f"{short}_{key}"] = value
    return out


def cancel_metrics(raw: dict[str, Any], stamps: list[int]) -> dict[str, float]:
    issued = [int(s) for s in raw["issued_ns"]]
    returned = [int(s) for s in raw["returned_ns"]]
    if len(stamps) != len(issued):
        raise RuntimeError(
            f"{len(issued)} cancels issued but the server stamped {len(stamps)} cancellations"
        )
    to_return = [(r - i) / 1000 for i, r in zip(issued, returned, strict=True)]
    to_server = [(s - i) / 1000 for i, s in zip(issued, stamps, strict=True)]
    if any(value < 0 for value in to_server):
        raise RuntimeError("a server stamp precedes its cancel: the clocks are not shared")
    return {
        "return_p50": percentile(to_return, 50),
        "return_p90": percentile(to_return, 90),
        "server_p50": percentile(to_server, 50),
        "server_p90": percentile(to_server, 90),
        "next_p50": percentile(raw["next_us"], 50),
        "next_p90": percentile(raw["next_us"], 90),
    }


def scale_metrics(raw: dict[str, Any]) -> dict[str, float]:
    idle = [throughput_metrics(part) for part in raw["idle"]]
    loaded = [throughput_metrics(part) for part in raw["loaded"]]
    grown = raw["rss_after_kib"] - raw["rss_before_kib"]
    out = {
        "bytes_per_request": grown * 1024 / raw["parked"],
        "rss_before_mib": raw["rss_before_kib"] / 1024,
        "rss_after_mib": raw["rss_after_kib"] / 1024,
    }
    for mode in ("seq", "con"):
        out[f"idle_{mode}_cps"] = statistics.mean(m[f"{mode}_cps"] for m in idle)
        out[f"loaded_{mode}_cps"] = statistics.mean(m[f"{mode}_cps"] for m in loaded)
        out[f"{mode}_ratio"] = out[f"loaded_{mode}_cps"] / out[f"idle_{mode}_cps"]
    return out


Run = dict[str, dict[str, float]]


def ratios_for(run: Run) -> dict[str, float]:
    """Every ratio of the report, from figures of this one run only."""
    out: dict[str, float] = {}

    def ratio(name: str, top: tuple[str, str], bottom: tuple[str, str]) -> None:
        a, b = run.get(top[0], {}).get(top[1]), run.get(bottom[0], {}).get(bottom[1])
        if a is not None and b:
            out[name] = a / b

    for mode in ("seq", "con"):
        ratio(f"server_vs_ts_{mode}", ("ts->trio", f"{mode}_cps"), ("ts->ts", f"{mode}_cps"))
        ratio(f"server_vs_py_{mode}", ("ts->trio", f"{mode}_cps"), ("ts->py", f"{mode}_cps"))
        ratio(f"server_vs_ts2_{mode}", ("ts->trio", f"{mode}_cps"), ("ts->ts2", f"{mode}_cps"))
        ratio(f"client_vs_ts_{mode}", ("trio->ts", f"{mode}_cps"), ("ts->ts", f"{mode}_cps"))
        ratio(f"client_vs_py_{mode}", ("trio->ts", f"{mode}_cps"), ("py->ts", f"{mode}_cps"))
        ratio(f"floor_raw_{mode}", ("raw->floor", f"{mode}_cps"), ("raw->trio", f"{mode}_cps"))
        ratio(f"floor_ts_{mode}", ("ts->floor", f"{mode}_cps"), ("ts->trio", f"{mode}_cps"))
        ratio(f"ts_floor_raw_{mode}", ("raw->floor", f"{mode}_cps"), ("raw->ts", f"{mode}_cps"))
        # The floors held to the goals trio_mcp is held to (each within one comparison group).
        tasks = ("raw->floor-tasks", f"{mode}_cps")
        ratio(f"floor_tasks_vs_floor_{mode}", tasks, ("raw->floor", f"{mode}_cps"))
        ratio(f"floor_vs_ts_{mode}", ("ts->floor", f"{mode}_cps"), ("ts->ts", f"{mode}_cps"))
        ratio(f"floor_vs_py_{mode}", ("ts->floor", f"{mode}_cps"), ("ts->py", f"{mode}_cps"))
        # The floor with a task and a scope per request behind the same TypeScript client.
        ts_tasks = ("ts->floor-tasks", f"{mode}_cps")
        ratio(f"floor_tasks_vs_ts_{mode}", ts_tasks, ("ts->ts", f"{mode}_cps"))
        ratio(f"floor_tasks_vs_py_{mode}", ts_tasks, ("ts->py", f"{mode}_cps"))
        ratio(f"server_vs_floor_tasks_{mode}", ("ts->trio", f"{mode}_cps"), ts_tasks)
        ratio(f"floor_tasks_ts_{mode}", ts_tasks, ("ts->trio", f"{mode}_cps"))
        ratio(f"stdio_vs_floor_tasks_{mode}", ("raw->trio", f"{mode}_cps"), tasks)
    for metric in ("server_p50", "return_p50"):
        side = "server" if metric == "server_p50" else "client"
        ours = "cancel ts->trio" if side == "server" else "cancel trio->ts"
        peers: tuple[str, ...] = ("cancel ts->ts", "cancel py->ts")
        if side == "server":
            peers = tuple(f"cancel ts->{peer}" for peer in PEER_SERVERS)
        values = [run[p][metric] for p in peers if p in run]
        if ours in run and values and min(values) > 0:
            out[f"cancel_{side}_vs_best_peer"] = run[ours][metric] / min(values)
            # The bare-Trio floor behind the same client: what any server can reach there.
            floor = "cancel ts->floor"
            if side == "server" and floor in run:
                out["cancel_floor_vs_best_peer"] = run[floor][metric] / min(values)
    ratio("engine_loaded", ("inprocess", "engine_loaded"), ("inprocess", "engine"))
    # A parked request against the bare-Trio task and scope, and against such a task awaiting
    # the benchmark's own `sleep` tool (the tool's frame on both sides).
    parked = ("inprocess", "parked_bytes")
    ratio("parked_vs_floor", parked, ("inprocess", "parked_bytes_floor"))
    ratio("parked_vs_floor_tool", parked, ("inprocess", "parked_bytes_floor_tool"))
    # The floor held to the goal: the bare task and scope that runs the same tool.
    ratio(
        "parked_floor_tool_vs_floor",
        ("inprocess", "parked_bytes_floor_tool"),
        ("inprocess", "parked_bytes_floor"),
    )
    # Already within-round ratios (the median over the job's own interleaved rounds).
    proxy_ratios = {
        "proxy_stdio_vs_direct": "stdio_ratio",
        "proxy_http_vs_direct": "http_ratio",
        "proxy_floor_stdio_vs_direct": "stdio_floor_ratio",
        "proxy_stdio_vs_floor": "stdio_proxied_vs_floor",
    }
    for name, metric in proxy_ratios.items():
        if metric in run.get("proxy", {}):
            out[name] = run["proxy"][metric]
    for transport in ("stdio", "http"):
        for mode in ("api", "sdk"):
            if f"{transport}_{mode}_vs_absent" in run.get("otel", {}):
                # Already a within-round ratio (the median over the job's own rounds).
                out[f"otel_{transport}_{mode}_vs_absent"] = run["otel"][
                    f"{transport}_{mode}_vs_absent"
                ]
    for size in FLEET_SIZES[1:]:
        ratio(f"fleet_{size}_vs_1", (f"fleet {size}", "cps"), ("fleet 1", "cps"))
    for era in ("hs", "modern"):
        # CPU per call through nginx + Redis against one process alone, all in one job: each
        # fleet (tagged routing; any worker, round robin and behind the map; tagged, by
        # connection), at the same load in all and per process, the tagged fleet's machinery
        # with one backend, and the control (three processes alone).
        # Already within-job ratios: each to the standalone measured around it; a three-backend
        # fleet's also over the control's.
        for fleet, load in FLEET_COST_ROWS:
            key = f"{era}_{fleet}_{load}"
            for figure, name in (("_ratio", ""), ("_vs_three", "_vs_three")):
                if key + figure in run.get("fleet cost", {}):
                    out[f"fleet_cost_{key}{name}"] = run["fleet cost"][key + figure]
    for mode in ("seq", "con"):
        ratio(f"stdio_vs_floor_{mode}", ("raw->trio", f"{mode}_cps"), ("raw->floor", f"{mode}_cps"))
        for era in HTTP_ERAS:
            for response in HTTP_RESPONSES:
                ours_cps = (f"http {era} trio {response}", f"{mode}_cps")
                for peer in ("floor", *PEER_SERVERS):
                    ratio(
                        f"http_{era}_{response}_vs_{peer}_{mode}",
                        ours_cps,
                        (f"http {era} {peer} {response}", f"{mode}_cps"),
                    )
    for era in HTTP_ERAS:
        for response in HTTP_RESPONSES:
            # CPU per call, the other way up (theirs/ours: higher is better, as for throughput):
            # the share of one worker's capacity we keep, steadier than calls/s on a busy machine.
            for peer in ("floor", *PEER_SERVERS):
                ratio(
                    f"http_{era}_{response}_cpu_vs_{peer}",
                    (f"http {era} {peer} {response}", "cpu_us_per_call"),
                    (f"http {era} trio {response}", "cpu_us_per_call"),
                )
    for transport in HTTP_TRANSPORTS:
        ours, floor = f"http {transport} trio", f"http {transport} floor"
        key = transport.replace("-", "_")
        for mode in ("seq", "con"):
            ratio(f"http_{key}_vs_floor_{mode}", (ours, f"{mode}_cps"), (floor, f"{mode}_cps"))
        ratio(f"http_{key}_cpu_vs_floor", (floor, "cpu_us_per_call"), (ours, "cpu_us_per_call"))
    # WebSocket's floor with a task and a scope per request over the floor, and ours over it.
    ws, ws_floor, ws_tasks = "http ws trio", "http ws floor", f"http ws {HTTP_TASK_FLOOR}"
    ratio("http_ws_floor_tasks_vs_floor_con", (ws_tasks, "con_cps"), (ws_floor, "con_cps"))
    ratio("http_ws_vs_floor_tasks_con", (ws, "con_cps"), (ws_tasks, "con_cps"))
    cpu = "cpu_us_per_call"
    ratio("http_ws_floor_tasks_cpu_vs_floor", (ws_floor, cpu), (ws_tasks, cpu))
    ratio("http_ws_cpu_vs_floor_tasks", (ws_tasks, cpu), (ws, cpu))
    for era in HTTP_ERAS:
        # The server-observed cancel over the bare POST round trip to the floor (its job).
        post = (f"http cancel {era} floor", "post_p50")
        ratio(f"http_cancel_{era}_vs_post", (f"http cancel {era} trio", "server_p50"), post)
        ratio(f"http_cancel_{era}_floor_vs_post", (f"http cancel {era} floor", "server_p50"), post)
    for era in HTTP_ERAS:
        for response in HTTP_RESPONSES:
            # Under wrk: ours over the floor, and each server's wrk figure over the driver's.
            wrk_ours = f"http {era} trio {response} wrk"
            wrk_floor = f"http {era} floor {response} wrk"
            ratio(
                f"http_{era}_{response}_wrk_vs_floor_con",
                (wrk_ours, "con_cps"),
                (wrk_floor, "con_cps"),
            )
            ratio(
                f"http_{era}_{response}_wrk_cpu_vs_floor",
                (wrk_floor, "cpu_us_per_call"),
                (wrk_ours, "cpu_us_per_call"),
            )
            for server in (*WRK_SERVERS, HTTP_TASK_FLOOR):
                job = f"http {era} {server} {response}"
                ratio(
                    f"http_{era}_{server}_{response}_wrk_vs_driver",
                    (f"{job} wrk", "con_cps"),
                    (job, "con_cps"),
                )
    for response in HTTP_RESPONSES:
        # The handshake era's floor with a task and a scope per request, over the floor, and
        # ours over it: driven, and under wrk.
        for suffix, wrk in (("", ""), ("_wrk", " wrk")):
            tasks = (f"http hs {HTTP_TASK_FLOOR} {response}{wrk}", "con_cps")
            floor = (f"http hs floor {response}{wrk}", "con_cps")
            ours = (f"http hs trio {response}{wrk}", "con_cps")
            ratio(f"http_hs_{response}_floor_tasks{suffix}_vs_floor_con", tasks, floor)
            ratio(f"http_hs_{response}{suffix}_vs_floor_tasks_con", ours, tasks)
        ratio(
            f"http_hs_{response}_cpu_vs_floor_tasks",
            (f"http hs {HTTP_TASK_FLOOR} {response}", "cpu_us_per_call"),
            (f"http hs trio {response}", "cpu_us_per_call"),
        )
    ratio(
        "http_workers_2_vs_1",
        ("http modern trio sse w2", "con_cps"),
        ("http modern trio sse", "con_cps"),
    )
    peer_cancels = [
        run[j]["server_p50"]
        for j in (f"http cancel hs {peer}" for peer in PEER_SERVERS)
        if j in run
    ]
    if "http cancel hs trio" in run and peer_cancels and min(peer_cancels) > 0:
        out["http_cancel_vs_best_peer"] = run["http cancel hs trio"]["server_p50"] / min(
            peer_cancels
        )
    ratio(
        "http_cancel_vs_floor",
        ("http cancel hs trio", "server_p50"),
        ("http cancel hs floor", "server_p50"),
    )
    ratio(
        "http_cancel_modern_vs_py",
        ("http cancel modern trio", "server_p50"),
        ("http cancel modern py", "server_p50"),
    )
    ratio(
        "cancel_server_vs_floor",
        ("cancel raw->trio", "server_p50"),
        ("cancel raw->floor", "server_p50"),
    )
    for server in ("trio", "floor", "ts2"):
        ratio(
            f"cancel_{server}_vs_ts_raw",
            (f"cancel raw->{server}", "server_p50"),
            ("cancel raw->ts", "server_p50"),
        )
    if "http cancel hs floor" in run and peer_cancels and min(peer_cancels) > 0:
        out["http_cancel_floor_vs_best_peer"] = run["http cancel hs floor"]["server_p50"] / min(
            peer_cancels
        )
    for era in HTTP_ERAS:
        for response in HTTP_RESPONSES:
            ratio(
                f"http_{era}_{response}_floor_vs_py_con",
                (f"http {era} floor {response}", "con_cps"),
                (f"http {era} py {response}", "con_cps"),
            )
    return out


def spread(values: Sequence[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def aggregate(runs: list[Run]) -> dict[str, dict[str, dict[str, float]]]:
    """Per job and metric: the median and range over the runs that measured it."""
    collected: dict[str, dict[str, list[float]]] = {}
    for run in runs:
        for job, metrics in run.items():
            for metric, value in metrics.items():
                collected.setdefault(job, {}).setdefault(metric, []).append(value)
    return {
        job: {metric: spread(values) for metric, values in metrics.items()}
        for job, metrics in collected.items()
    }


# -- the benchmarks -----------------------------------------------------------------------------


class Bench:
    def __init__(
        self, profile: dict[str, int], scratch: Path, log: Path, *, wrk: bool = False
    ) -> None:
        self.p = profile
        self.scratch = scratch
        self.log = log
        #: Whether wrk is installed: without it, the HTTP section has no wrk jobs.
        self.wrk = wrk

    def throughput_spec(self, n: int | None = None) -> dict[str, Any]:
        p = self.p
        return {"workload": "throughput", "n": n or p["n"], "k": p["k"], "warmup": p["warmup"]}

    def pair(self, client: str, server: str) -> dict[str, float]:
        raw = run_json(
            client_command(client, self.throughput_spec(), server_command(server)), self.log
        )
        return throughput_metrics(raw)

    def cancel(self, client: str, server: str) -> dict[str, float]:
        stamps = self.scratch / f"stamps-{client}-{server}-{time.monotonic_ns()}"
        stamps.write_text("")
        spec = {
            "workload": "cancel",
            "cancels": self.p["cancels"],
            "warmup": self.p["cancel_warmup"],
            "warmup_cancels": self.p["warmup_cancels"],
        }
        raw = run_json(client_command(client, spec, server_command(server, str(stamps))), self.log)
        stamped = [int(line) for line in stamps.read_text().split()]
        return cancel_metrics(raw, stamped[self.p["warmup_cancels"] :])

    def scale(self, server: str) -> dict[str, float]:
        spec = {**self.throughput_spec(self.p["scale_n"]), "workload": "scale"}
        spec.update(parked=self.p["parked"], settle_ms=self.p["settle_ms"])
        return scale_metrics(run_json(client_command("ts", spec, server_command(server)), self.log))

    def inprocess(self) -> dict[str, float]:
        spec = {"messages": self.p["messages"], "batch": 10, "parked": self.p["parked_inprocess"]}
        command = [*PYTHON, str(Path("benchmarks") / "inprocess.py"), json.dumps(spec)]
        raw = run_json(command, self.log)
        return {k: float(v) for k, v in raw.items() if k not in ("messages", "batch", "parked")}

    def fleet(self, backends: int) -> dict[str, float]:
        p = self.p
        spec = {"backends": backends, "n": p["fleet_n"], "warmup": p["fleet_warmup"]}
        spec["concurrency"] = p["fleet_concurrency"]
        command = [*PYTHON, str(Path("benchmarks") / "scale_out.py"), json.dumps(spec)]
        return {k: float(v) for k, v in run_json(command, self.log).items()}

    def fleet_cost(self) -> dict[str, float]:
        p = self.p
        spec = {"calls": p["fleet_cost_calls"], "warmup": p["fleet_cost_warmup"]}
        spec["sessions"] = p["fleet_cost_sessions"]
        command = [*PYTHON, str(Path("benchmarks") / "fleet_cost.py"), json.dumps(spec)]
        return {k: float(v) for k, v in run_json(command, self.log).items()}

    def tasks(self) -> dict[str, float]:
        p = self.p
        spec = {"calls": p["task_calls"], "warmup": p["task_warmup"], "parked": p["task_parked"]}
        spec["settle_ms"] = p["settle_ms"]
        command = [*PYTHON, str(Path("benchmarks") / "tasks.py"), json.dumps(spec)]
        return {k: float(v) for k, v in run_json(command, self.log).items()}

    def proxy(self) -> dict[str, float]:
        p = self.p
        spec = {"calls": p["proxy_calls"], "warmup": p["proxy_warmup"], "rounds": p["proxy_rounds"]}
        command = [*PYTHON, str(Path("benchmarks") / "proxy.py"), json.dumps(spec)]
        return {k: float(v) for k, v in run_json(command, self.log).items()}

    def otel(self) -> dict[str, float]:
        p = self.p
        spec = {"calls": p["otel_calls"], "warmup": p["otel_warmup"], "rounds": p["otel_rounds"]}
        command = [*PYTHON, str(Path("benchmarks") / "otel.py"), json.dumps(spec)]
        return {k: float(v) for k, v in run_json(command, self.log).items()}

    def growth_job(self, spec: dict[str, Any]) -> dict[str, float]:
        command = [*PYTHON, str(Path("benchmarks") / "growth.py"), json.dumps(spec)]
        return {k: float(v) for k, v in run_json(command, self.log).items()}

    def growth_jobs(self) -> list[tuple[str, Callable[[], dict[str, float]]]]:
        """The scale family (``benchmarks/growth.py``): each figure at two or three sizes."""
        p = self.p
        sessions = p["growth_sessions"]
        jobs: list[tuple[str, Callable[[], dict[str, float]]]] = []
        for transport in GROWTH_TRANSPORTS:
            spec = {"part": "sessions", "transport": transport}
            spec.update(sessions=[sessions // 10, sessions], warmup=p["growth_session_warmup"])
            spec.update(settle_ms=p["settle_ms"], idle_ms=p["growth_idle_ms"])
            spec["quiet_ms"] = p["growth_quiet_ms"]
            jobs.append((f"growth sessions {transport}", lambda s=spec: self.growth_job(s)))
        tools = p["growth_tools"]
        spec = {"part": "tools", "tools": [10, tools // 10, tools]}
        spec.update(tools_listed=p["growth_tools_listed"], page_calls=p["growth_page_calls"])
        jobs.append(("growth tools/list", lambda s=spec: self.growth_job(s)))
        most = p["growth_call_bytes"]
        spec = {"part": "calls", "sizes": [most // 10_000, most // 100, most]}
        spec.update(calls=p["growth_calls"], call_bytes=p["growth_call_budget"], min_calls=3)
        spec["rounds"] = p["growth_rounds"]
        jobs.append(("growth tools/call", lambda s=spec: self.growth_job(s)))
        events = p["growth_events"]
        spec = {"part": "events", "events": [events // 10, events]}
        spec["replays"] = p["growth_replays"]
        jobs.append(("growth event store", lambda s=spec: self.growth_job(s)))
        return jobs

    def http_job(
        self,
        server: str,
        spec: dict[str, Any],
        *,
        json_response: bool = False,
        stamps: str | None = None,
        workers: int = 1,
    ) -> tuple[Any, float]:
        """Start an HTTP server, run the HTTP driver on it; its output, and the server's CPU."""
        port = free_port()
        command, env = http_server_command(
            server, port, json_response=json_response, stamps=stamps, workers=workers
        )
        hypercorn = server in HYPERCORN_SERVERS
        ready = self.scratch / f"ready-{time.monotonic_ns()}" if hypercorn else None
        running = HttpServer(command, env, port, self.log, ready)
        try:
            running.wait_ready(workers)
            spec = {"path": "/mcp", **spec, "port": port}
            if spec["workload"] == "sessions":
                spec["pids"] = group_pids(running.process.pid)
            before = group_cpu_seconds(running.process.pid)
            raw = run_json([node(), str(PEERS / "http_driver.mjs"), json.dumps(spec)], self.log)
            used = group_cpu_seconds(running.process.pid) - before
        finally:
            running.stop()
        return raw, used

    def http_throughput(
        self, era: str, server: str, response: str, workers: int = 1
    ) -> dict[str, float]:
        p = self.p
        k = HTTP_CONNECTIONS
        spec = {"workload": "throughput", "era": HTTP_ERAS[era], "n": p["http_n"], "k": k}
        spec["warmup"] = p["http_warmup"]
        raw, cpu = self.http_job(server, spec, json_response=response == "json", workers=workers)
        out = throughput_metrics(raw)
        # The server's CPU over the whole driver run, warm-up included, over every call it made.
        calls = p["http_warmup"] + k * -(-p["http_warmup"] // k)
        calls += len(raw["sequential"]["latencies_us"]) + len(raw["concurrent"]["latencies_us"])
        out["cpu_us_per_call"] = cpu * 1e6 / calls
        if "cpu_us" in raw["concurrent"]:  # the driver's own, over the concurrent part
            out["client_cpu_us_per_call"] = raw["concurrent"]["cpu_us"] / max(
                1, len(raw["concurrent"]["latencies_us"])
            )
        return out

    def http_transport(self, transport: str, server: str) -> dict[str, float]:
        """The HTTP throughput workload over HTTP+SSE or WebSocket, a session per connection."""
        p = self.p
        k = HTTP_CONNECTIONS
        kind, path = HTTP_TRANSPORTS[transport]
        spec = {"workload": "throughput", "transport": kind, "path": path, "n": p["http_n"], "k": k}
        spec["warmup"] = p["http_warmup"]
        raw, cpu = self.http_job(server, spec)
        out = throughput_metrics(raw)
        # As for Streamable HTTP: the server's CPU over every call (the handshakes left out).
        calls = p["http_warmup"] + k * -(-p["http_warmup"] // k)
        calls += len(raw["sequential"]["latencies_us"]) + len(raw["concurrent"]["latencies_us"])
        out["cpu_us_per_call"] = cpu * 1e6 / calls
        return out

    def http_cancel(self, era: str, server: str) -> dict[str, float]:
        stamps = self.scratch / f"stamps-http-{server}-{time.monotonic_ns()}"
        stamps.write_text("")
        spec: dict[str, Any] = {"workload": "cancel", "era": HTTP_ERAS[era]}
        spec["stamps"] = str(stamps)
        spec.update(cancels=self.p["http_cancels"], warmup=self.p["cancel_warmup"])
        spec["warmup_cancels"] = self.p["warmup_cancels"]
        if server == "floor":  # and the bare POST round trip, the yardstick of the cancels
            spec["post_rounds"] = HTTP_POST_ROUNDS * self.p["http_cancels"]
        raw, _ = self.http_job(server, spec, stamps=str(stamps))
        stamped = [int(line) for line in stamps.read_text().split()]
        out = cancel_metrics(raw, stamped[self.p["warmup_cancels"] :])
        if "post_us" in raw:
            out["post_p50"] = percentile(raw["post_us"], 50)
            out["post_p90"] = percentile(raw["post_us"], 90)
        return out

    def http_wrk(self, era: str, server: str, response: str) -> dict[str, float]:
        """wrk on one HTTP server: ``wrk_warmup_seconds`` unrecorded, then ``wrk_seconds``."""
        p = self.p
        port = free_port()
        command, env = http_server_command(server, port, json_response=response == "json")
        ready = (
            self.scratch / f"ready-{time.monotonic_ns()}" if server in HYPERCORN_SERVERS else None
        )
        running = HttpServer(command, env, port, self.log, ready)
        try:
            running.wait_ready()
            args = [HTTP_ERAS[era]]
            if era == "hs":
                args += open_http_session(port)
            if p["wrk_warmup_seconds"]:
                run_wrk(port, p["wrk_warmup_seconds"], args, self.log)
            before = group_cpu_seconds(running.process.pid)
            raw, client_cpu = run_wrk(port, p["wrk_seconds"], args, self.log)
            used = group_cpu_seconds(running.process.pid) - before
        finally:
            running.stop()
        calls = raw["requests"]
        if not calls:
            raise RuntimeError(f"wrk made no calls to the {server} server")
        return {
            "con_cps": calls / raw["seconds"],
            "con_p50": float(raw["p50_us"]),
            "con_p90": float(raw["p90_us"]),
            "con_p99": float(raw["p99_us"]),
            "cpu_us_per_call": used * 1e6 / calls,
            "client_cpu_us_per_call": client_cpu * 1e6 / calls,
            "calls": float(calls),
        }

    def http_sessions(self, server: str) -> dict[str, float]:
        p = self.p
        spec: dict[str, Any] = {"workload": "sessions", "era": "handshake"}
        spec["sessions"] = p["http_sessions"]
        spec.update(warmup=p["http_session_warmup"], settle_ms=p["settle_ms"])
        raw, _ = self.http_job(server, spec)
        grown = raw["rss_after_kib"] - raw["rss_before_kib"]
        return {
            "bytes_per_session": grown * 1024 / raw["sessions"],
            "rss_before_mib": raw["rss_before_kib"] / 1024,
            "rss_after_mib": raw["rss_after_kib"] / 1024,
        }

    def http_jobs(self) -> list[tuple[str, Callable[[], dict[str, float]]]]:
        jobs: list[tuple[str, Callable[[], dict[str, float]]]] = []
        for era, servers in HTTP_SERVERS.items():
            for server in servers:
                for response in HTTP_RESPONSES:
                    jobs.append(
                        (
                            f"http {era} {server} {response}",
                            lambda e=era, s=server, r=response: self.http_throughput(e, s, r),
                        )
                    )
        for response in HTTP_RESPONSES:
            jobs.append(
                (
                    f"http hs {HTTP_TASK_FLOOR} {response}",
                    lambda r=response: self.http_throughput("hs", HTTP_TASK_FLOOR, r),
                )
            )
        jobs.append(
            ("http modern trio sse w2", lambda: self.http_throughput("modern", "trio", "sse", 2))
        )
        for transport in HTTP_TRANSPORTS:
            for server in ("trio", "floor", *((HTTP_TASK_FLOOR,) if transport == "ws" else ())):
                jobs.append(
                    (
                        f"http {transport} {server}",
                        lambda t=transport, s=server: self.http_transport(t, s),
                    )
                )
        if self.wrk:
            for era in HTTP_ERAS:
                servers = (*WRK_SERVERS, HTTP_TASK_FLOOR) if era == "hs" else WRK_SERVERS
                for server in servers:
                    for response in HTTP_RESPONSES:
                        jobs.append(
                            (
                                f"http {era} {server} {response} wrk",
                                lambda e=era, s=server, r=response: self.http_wrk(e, s, r),
                            )
                        )
        for era, servers in HTTP_SERVERS.items():
            for server in servers:
                jobs.append(
                    (f"http cancel {era} {server}", lambda e=era, s=server: self.http_cancel(e, s))
                )
        for server in ("trio", *PEER_SERVERS):
            jobs.append((f"http sessions {server}", lambda s=server: self.http_sessions(s)))
        return jobs

    def jobs(
        self, sections: Sequence[str], index: int = 0
    ) -> list[tuple[str, Callable[[], dict[str, float]]]]:
        jobs: list[tuple[str, Callable[[], dict[str, float]]]] = []

        def add(name: str, fn: Callable[[], dict[str, float]]) -> None:
            if name not in (j[0] for j in jobs):
                jobs.append((name, fn))

        if "throughput" in sections:
            for server in ("trio", *PEER_SERVERS):
                add(f"ts->{server}", lambda s=server: self.pair("ts", s))
            for client in CLIENTS:
                add(f"{client}->ts", lambda c=client: self.pair(c, "ts"))
        if "floor" in sections:
            for server in ("floor", "floor-tasks", "trio", "ts"):
                add(f"raw->{server}", lambda s=server: self.pair("raw", s))
            add("ts->floor", lambda: self.pair("ts", "floor"))
            add("ts->floor-tasks", lambda: self.pair("ts", "floor-tasks"))
            add("ts->trio", lambda: self.pair("ts", "trio"))
        if "cancel" in sections:
            for server in ("trio", *PEER_SERVERS, "floor"):
                add(f"cancel ts->{server}", lambda s=server: self.cancel("ts", s))
            for client in CLIENTS:
                add(f"cancel {client}->ts", lambda c=client: self.cancel(c, "ts"))
            for server in ("floor", "trio", "ts", "ts2"):
                add(f"cancel raw->{server}", lambda s=server: self.cancel("raw", s))
        if "scale" in sections:
            for server in SERVERS:
                add(f"scale {server}", lambda s=server: self.scale(s))
        if "inprocess" in sections:
            add("inprocess", self.inprocess)
        if "fleet" in sections:
            for size in FLEET_SIZES:
                add(f"fleet {size}", lambda k=size: self.fleet(k))
            add("fleet cost", self.fleet_cost)
        if "tasks" in sections:
            add("tasks", self.tasks)
        if "proxy" in sections:
            add("proxy", self.proxy)
        if "otel" in sections:
            add("otel", self.otel)
        if "http" in sections and index < self.p["http_runs"]:
            for name, fn in self.http_jobs():
                add(name, fn)
        if "growth" in sections and index < self.p["growth_runs"]:
            for name, fn in self.growth_jobs():
                add(name, fn)
        return jobs


#: The peers' names in job names; the raw driver is a workload, not a peer.
_PEER = re.compile(r"\b(trio|floor(?:-tasks)?|ts2?|py)\b")


def comparison_group(name: str) -> str:
    """The jobs whose figures are compared with each other share a group: the same workload on
    each peer (``http hs trio sse`` and ``http hs floor sse``: ``http hs * sse``), the two
    workers' job with the one worker's, wrk's (``http hs trio sse wrk``) with the driver's."""
    return _PEER.sub("*", name.removesuffix(" w2").removesuffix(" wrk"))


def in_run_order(
    jobs: list[tuple[str, Callable[[], dict[str, float]]]], rng: random.Random
) -> list[tuple[str, Callable[[], dict[str, float]]]]:
    """A run's jobs in a shuffled order, each comparison group's back to back (in a shuffled
    order too): this machine's speed drifts over minutes, so a ratio taken across the whole
    run would measure the drift as much as the servers."""
    groups: dict[str, list[tuple[str, Callable[[], dict[str, float]]]]] = {}
    for job in jobs:
        groups.setdefault(comparison_group(job[0]), []).append(job)
    order = list(groups.values())
    rng.shuffle(order)
    return [job for group in order for job in rng.sample(group, len(group))]


def check_clock(rounds: int, log: Path) -> dict[str, Any]:
    command = [node(), str(PEERS / "clock_check.mjs"), str(rounds), "--", sys.executable]
    result: dict[str, Any] = run_json(command, log)
    return result


# -- environment --------------------------------------------------------------------------------


def ensure_wrk(*, install: bool) -> str | None:
    """Install wrk (the Debian package) when it is missing and this runs as root; None when wrk
    is there, else why its jobs are skipped."""
    if shutil.which("wrk") is not None:
        return None
    if not install:
        return "wrk is not installed (and `--no-install` was given)"
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        return "wrk is not installed, and installing it needs apt-get as root (apt-get install wrk)"
    print("installing wrk (apt-get install wrk)", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install_wrk = [apt, "install", "-y", "--no-install-recommends", "wrk"]
    done = subprocess.run(install_wrk, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:  # a fresh machine may have no package lists yet
        subprocess.run([apt, "update"], env=env, capture_output=True, check=False)
        done = subprocess.run(install_wrk, env=env, capture_output=True, text=True, check=False)
    if shutil.which("wrk") is None:
        return f"wrk is not installed, and apt-get could not install it: {done.stderr[-300:]}"
    return None


def ensure_installed(*, install: bool, chart: bool, wrk: bool = False) -> str | None:
    """Install what is missing; with ``wrk``, wrk too, and return why it is absent (or None)."""
    wanted = ["trio_mcp", "mcp"] + (["matplotlib"] if chart else [])
    missing = [m for m in wanted if importlib.util.find_spec(m) is None]
    if missing:
        if not install:
            raise SystemExit(f"run.py: missing {missing}; run: pip install -e '.[interop,bench]'")
        print(f"installing the Python extras (missing: {', '.join(missing)})", flush=True)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "-e", ".[interop,bench]"],
            cwd=ROOT,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(
                "run.py: pip could not install into this interpreter; use a virtual "
                "environment: python3 -m venv .venv && .venv/bin/python benchmarks/run.py"
            )
        importlib.invalidate_caches()
    node()
    if not (ROOT / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json").exists():
        if not install:
            raise SystemExit("run.py: the TypeScript SDK is missing; run: npm ci")
        npm = shutil.which("npm")
        if npm is None:
            raise SystemExit("run.py: npm is not on PATH; it installs the TypeScript SDK")
        print("installing the TypeScript SDK (npm ci)", flush=True)
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=ROOT, check=True)
    return ensure_wrk(install=install) if wrk else None


def _first_line(command: Sequence[str]) -> str:
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, cwd=ROOT, check=False)
    except OSError:
        return "?"
    lines = done.stdout.strip().splitlines()
    return lines[0] if lines else "?"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def source_description(snapshot: str | None) -> str:
    version = _version("trio-mcp")
    if snapshot is not None:
        return f"{version}, commit {snapshot} (exported with `--commit`)"
    head = _first_line(["git", "rev-parse", "--short", "HEAD"])
    changed = _first_line(["git", "status", "--porcelain", "--", "trio_mcp"])
    suffix = " plus uncommitted changes in trio_mcp/" if changed != "?" else ""
    return f"{version}, working tree at commit {head}{suffix}"


def machine(snapshot: str | None) -> dict[str, str]:
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    memory = "?"
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal"):
            memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    os_name = "?"
    release = Path("/etc/os-release")
    if release.exists():
        for line in release.read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = line.split("=", 1)[1].strip('"')
    sdk = json.loads(
        (ROOT / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json").read_text()
    )["version"]
    load = os.getloadavg()
    return {
        "CPU": f"{cpu}, {os.cpu_count()} logical cores",
        "memory": memory,
        "OS": f"{os_name}, Linux {platform.release()}",
        "Python": f"{platform.python_implementation()} {platform.python_version()}",
        "Node.js": _first_line([node(), "--version"]),
        "trio_mcp": source_description(snapshot),
        "trio": _version("trio"),
        "orjson": _version("orjson"),
        "mcp (Python SDK)": _version("mcp"),
        "@modelcontextprotocol/sdk": sdk,
        "load average at start": f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
    }


def write_report(summary: dict[str, Any], out: Path, *, chart: bool) -> None:
    (out / "report.md").write_text(build_report(summary))
    if chart:
        draw_chart(summary, out / "chart.png")


def measure(run: Run, name: str, job: Callable[[], dict[str, float]], label: str) -> None:
    began = time.monotonic()
    run[name] = job()
    print(f"{label}: {name:<18} {time.monotonic() - began:5.1f} s", flush=True)


def shown_arguments(argv: Sequence[str]) -> str:
    """The command line as the report shows it: without ``--out`` (a path of this machine)."""
    shown: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--out":
            skip = True
        elif not arg.startswith("--out="):
            shown.append(arg)
    return "".join(f" {a}" for a in shown)


# -- main ---------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    profile_group = parser.add_mutually_exclusive_group()
    profile_group.add_argument("--quick", action="store_true", help="fewer, shorter runs")
    profile_group.add_argument("--smoke", action="store_true", help="tiny N, one run")
    parser.add_argument("--runs", type=int, help="override the number of runs")
    parser.add_argument("--only", help=f"comma-separated sections of {', '.join(SECTIONS)}")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results folder")
    parser.add_argument("--no-install", action="store_true", help="never pip install / npm ci")
    parser.add_argument("--no-chart", action="store_true", help="skip the PNG (no matplotlib)")
    parser.add_argument(
        "--render",
        action="store_true",
        help="only write report.md and chart.png again from the results.json in --out",
    )
    parser.add_argument(
        "--parallel",
        type=int,
        default=1,
        metavar="N",
        help="run N benchmark processes at once: faster, but the figures are worthless (smoke)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="after the runs, profile our server (benchmarks/profiles.py) for the report",
    )
    parser.add_argument(
        "--commit",
        help="benchmark trio_mcp as committed at COMMIT (git archive), not the working tree",
    )
    args = parser.parse_args(argv)
    profile_name = "smoke" if args.smoke else "quick" if args.quick else "full"
    profile = dict(PROFILES[profile_name])
    if args.runs:
        profile["runs"] = args.runs
    sections = SECTIONS if not args.only else tuple(s.strip() for s in args.only.split(","))
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {SECTIONS}")

    out: Path = args.out.resolve()
    if args.render:
        summary = json.loads((out / "results.json").read_text())
        # The ratios again from each run's own figures: a ratio added since is reported too.
        for run in summary["runs"]:
            run["ratios"] = ratios_for(run["figures"])
        summary["ratios"] = aggregate([{"ratios": r["ratios"]} for r in summary["runs"]]).get(
            "ratios", {}
        )
        write_report(summary, out, chart=not args.no_chart)
        return 0
    wrk_missing = ensure_installed(
        install=not args.no_install, chart=not args.no_chart, wrk="http" in sections
    )
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="trio-mcp-bench-") as scratch:
        log = Path(scratch) / "stderr.log"  # the children's stderr, shown when one fails
        snapshot = None
        if args.commit:
            snapshot = use_snapshot(args.commit, Path(scratch) / "snapshot")
            PROFILE_PYTHON[:] = PYTHON
        summary: dict[str, Any] = {
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "profile_name": profile_name,
            "profile": profile,
            "sections": list(sections),
            "machine": machine(snapshot),
            "argv": shown_arguments(argv if argv is not None else sys.argv[1:]),
        }
        if "http" in sections:
            summary["machine"]["wrk"] = wrk_version()
            if wrk_missing is not None:
                summary["wrk_skipped"] = wrk_missing
                print(f"skipping the wrk jobs: {wrk_missing}", flush=True)
        summary["clock"] = check_clock(profile["clock_rounds"], log)
        bench = Bench(profile, Path(scratch), log, wrk=wrk_missing is None)
        for index in range(profile["runs"]):
            jobs = in_run_order(bench.jobs(sections, index), random.Random(index))
            run: Run = {}
            label = f"run {index + 1}/{profile['runs']}"
            if args.parallel > 1:  # only where figures do not matter: the smoke test
                with ThreadPoolExecutor(args.parallel) as pool:
                    futures = [pool.submit(measure, run, n, job, label) for n, job in jobs]
                    for future in futures:
                        future.result()
            else:
                for name, job in jobs:
                    measure(run, name, job, label)
            runs.append({name: run[name] for name, _ in jobs})
        if args.profile:
            seconds = {"full": 10.0, "quick": 5.0, "smoke": 1.0}[profile_name]
            summary["profiles"] = record_profiles(
                [
                    "http",
                    "http-modern",
                    "http-modern-floor",
                    "ws",
                    "legacy-sse",
                    "stdio",
                    "sessions",
                    "parked",
                ],
                seconds,
                profile["http_sessions"],
                profile["parked_inprocess"],
                log,
            )
            write_profiles(summary["profiles"], out)
    if "profiles" not in summary and (out / "profiles.json").exists():
        # Profiles recorded on their own (profiles.py); the report says when and at which commit.
        summary["profiles"] = json.loads((out / "profiles.json").read_text())
    summary["elapsed_min"] = (time.monotonic() - started) / 60
    summary["machine"]["load average at end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    summary["runs"] = [{"figures": run, "ratios": ratios_for(run)} for run in runs]
    summary["jobs"] = aggregate(runs)
    summary["ratios"] = aggregate([{"ratios": ratios_for(run)} for run in runs]).get("ratios", {})
    (out / "results.json").write_text(json.dumps(summary, indent=1) + "\n")
    write_report(summary, out, chart=not args.no_chart)
    print(f"report written to {out / 'report.md'} in {summary['elapsed_min']:.1f} minutes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
