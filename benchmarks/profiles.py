"""Where trio_mcp's server spends its time under the benchmark loads: py-spy profiles, summarised.

    python3 benchmarks/profiles.py [--out DIR] [--seconds S] [--only http,stdio,sessions,...]

Each load runs our server as the benchmarks do and samples it with ``py-spy record --format raw``
(attached to the process that serves: hypercorn's worker, or the stdio server the raw driver
started; it needs the right to ptrace that process, which root or the same user with
``kernel.yama.ptrace_scope`` 0 has):

- ``http``: handshake era, SSE responses, ``tools/call echo`` on 10 keep-alive connections from
  the raw HTTP driver (``peers/http_driver.mjs``), under ``hypercorn --worker-class trio``;
- ``http-modern``: the same in the modern era (2026-07-28), each request in its POST's task;
- ``http-modern-floor``: a fixed number of modern-era calls (JSON answers) on our server and
  on the bare-hypercorn floor (``peers/floor_http_server.py``), taking turns three times, each
  sampled from its first call to its last: CPU per call by package and by function, ours beside
  the floor's, and the functions where ours spends the most beyond it;
- ``stdio``: ``peers/trio_server.py`` under the stdio raw driver (``peers/raw_driver.mjs``), 10
  concurrent callers;
- ``sessions``: not CPU but memory: tracemalloc in the hypercorn worker while the driver opens
  idle handshake sessions; the lines that allocated the growth, per session;
- ``parked``: memory too: tracemalloc in-process while the server engine parks ``sleep``
  requests (as ``inprocess.py`` measures ``parked_bytes``), by allocating line, per request.

The CPU summaries give the share of the samples (the server busy, idle waits left out) spent in
each package by the innermost frame, and the top functions by own time and by total time.
Writes ``profiles.json`` (read by ``run.py`` into the report) and ``profiles.md`` into DIR
(``benchmarks/results/`` by default). ``run.py --profile`` runs the same after its runs.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _report import profiles_markdown

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # the tests' helpers; trio_mcp may come from PYTHONPATH (--commit)

from tests._ports import free_port  # noqa: E402 - one way to pick a port, the tests' own

PEERS = Path("benchmarks") / "peers"
DEFAULT_OUT = ROOT / "benchmarks" / "results"
TOP = 15
#: Samples per second: py-spy's default of 100 gives too few in a short load.
RATE = 250
#: How to run Python for the servers: ``run.py --commit`` puts its snapshot on PYTHONPATH here.
PYTHON: list[str] = [sys.executable]

LOADS = {
    "http": "handshake era, SSE, `tools/call echo` on 10 connections, raw HTTP driver",
    "http-modern": "modern era (2026-07-28), SSE, `tools/call echo` on 10 connections",
    "http-modern-floor": "modern era, JSON, the same `tools/call echo` calls on 10 connections "
    "to trio_mcp and to the bare-hypercorn floor: CPU per call",
    "ws": "WebSocket (`/ws`), `tools/call echo` on 10 connections, a session each",
    "legacy-sse": "HTTP+SSE (2024-11-05, `/sse`), `tools/call echo` on 10 connections",
    "stdio": "stdio, `tools/call echo` from 10 concurrent callers, raw stdio driver",
    "sessions": "memory: tracemalloc growth while idle handshake sessions are opened",
    "parked": "memory: tracemalloc growth while the engine parks `sleep` requests (no I/O)",
}


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(found).exists():
        raise SystemExit("profiles.py: py-spy is not installed (pip install -e '.[bench]')")
    return found


def package_of(frame: str) -> str:
    """The package of a raw frame ``function (path/to/file.py:line)``."""
    match = re.search(r"\(([^():]+)(?::\d+)?\)$", frame)
    path = match.group(1) if match else frame
    parts = Path(path).parts
    for known in ("trio_mcp", "hypercorn", "h11", "trio", "cattrs", "attrs", "attr", "orjson"):
        if known in parts or (parts and parts[0] == f"{known}.py"):
            return {"attr": "attrs"}.get(known, known)
    if "benchmarks" in parts or (parts and parts[-1].endswith("_server.py")):
        return "the benchmark's own tools"
    return "Python stdlib and other"


#: Packages whose frames the total-time list shows (the runner and bootstrap frames are in every
#: sample and say nothing).
OURS_AND_SERVER = ("trio_mcp", "hypercorn", "h11")


def short_path(where: str) -> str:
    """A source location without this machine's directories: package-relative."""
    for marker in ("site-packages/", "dist-packages/"):
        if marker in where:
            return where.split(marker, 1)[1]
    root = f"{ROOT}/"
    if root in where:
        return where.replace(root, "")
    if "/snapshot/" in where:  # the tree ``run.py --commit`` exported
        return where.split("/snapshot/", 1)[1]
    return re.sub(r"^/\S*/lib/python3\.\d+/", "", where)


def busy_stacks(text: str, importing: list[int] | None = None) -> Iterator[tuple[list[str], int]]:
    """The stacks of py-spy's raw output, innermost frame last, each with its sample count;
    those of a server still importing (a loaded machine imports slowly) are counted into
    ``importing`` instead."""
    for line in text.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [f for f in stack.split(";") if not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        if any("importlib._bootstrap" in frame for frame in frames):
            if importing is not None:
                importing[0] += count
            continue
        yield frames, count


def summarise_raw(text: str) -> dict[str, Any]:
    """Own and total time per function, and own time per package, of py-spy's raw output."""
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    packages: collections.Counter[str] = collections.Counter()
    samples = 0
    importing = [0]
    for frames, count in busy_stacks(text, importing):
        samples += count
        own[frames[-1]] += count
        packages[package_of(frames[-1])] += count
        for frame in set(frames):
            if package_of(frame) in OURS_AND_SERVER:
                total[frame] += count

    # A frame in (nearly) every busy sample is the worker's entry point: it says nothing.
    for frame, n in list(total.items()):
        if n >= 0.97 * samples:
            del total[frame]

    def share(counter: collections.Counter[str], top: int) -> list[list[Any]]:
        return [[name, n / samples] for name, n in counter.most_common(top)] if samples else []

    return {
        "samples": samples,
        "import_samples": importing[0],
        "by_package": share(packages, len(packages)),
        "own": share(own, TOP),
        "total": share(total, TOP),
    }


def _processes_whose(field: int, value: int) -> list[int]:
    """Every live process whose ``/proc/PID/stat`` field ``field`` (counted after the command
    name: 1 the parent, 2 the process group) is ``value``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2 :].split()[field]) == value:
                found.append(int(entry.name))
    return found


def group_pids(group: int) -> list[int]:
    """Every live process of a process group (hypercorn's workers are its children)."""
    return _processes_whose(2, group)


def children_of(parent: int) -> list[int]:
    return _processes_whose(1, parent)


def cpu_seconds(pid: int) -> float:
    """User plus system CPU of one live process (0 once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


#: The CPU a server spends, once its load started, before it is sampled: its load has begun.
BUSY_CPU = 0.2


def until_busy(pid: int, warmup: float) -> None:
    """Wait ``warmup`` seconds, then until the server ``pid`` has spent ``BUSY_CPU`` seconds of
    CPU since this was called: on a busy machine a driver can take seconds to start its load,
    and a sampling that ends before then has nothing to sample."""
    start = cpu_seconds(pid)
    time.sleep(warmup)
    wait_for(lambda: cpu_seconds(pid) - start >= BUSY_CPU, "the load to begin", timeout=120)


def wait_for(condition: Any, what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise RuntimeError(f"profiles.py: timed out waiting for {what}")


def node() -> str:
    found = shutil.which("node")
    if found is None:
        raise SystemExit("profiles.py: node is not on PATH")
    return found


class Hypercorn:
    """trio_mcp's benchmark server (or another of ``peers/``, ``module``) under hypercorn's trio
    worker, in its own process group."""

    def __init__(
        self,
        scratch: Path,
        log: Path,
        env: dict[str, str] | None = None,
        module: str = "trio_http_server.py",
    ) -> None:
        self.port = free_port()
        self.ready = scratch / f"ready-{time.monotonic_ns()}"
        self.ready.write_text("")
        command = [*PYTHON, "-m", "hypercorn", "--worker-class", "trio"]
        command += ["--bind", f"127.0.0.1:{self.port}", f"{PEERS / module}:app"]
        extra = {"BENCH_READY": str(self.ready), "BENCH_MAX_SESSIONS_PER_CLIENT": "100000"}
        with log.open("ab") as err:
            self.process = subprocess.Popen(
                command,
                cwd=ROOT,
                env={**os.environ, **extra, **(env or {})},
                stdin=subprocess.DEVNULL,
                stdout=err,
                stderr=err,
                start_new_session=True,
            )
        self.worker = int(wait_for(lambda: self.ready.read_text().split(), "the worker")[0])

    def stop(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(timeout=10)
                break
            except subprocess.TimeoutExpired:
                continue
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def record(pid: int, seconds: float, output: Path, log: Path) -> subprocess.Popen[bytes]:
    command = [py_spy(), "record", "--pid", str(pid), "--format", "raw", "--function"]
    command += ["--rate", str(RATE), "--duration", str(max(1, round(seconds)))]
    command += ["--nonblocking", "--output", str(output)]
    with log.open("ab") as err:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=err, stderr=err)


#: Samplings of one load at most, while none caught the server busy outside its imports.
SAMPLINGS = 3


def sample_busy(
    pid: int, seconds: float, output: Path, log: Path, running: Callable[[], bool]
) -> dict[str, Any]:
    """py-spy on ``pid`` for ``seconds``, summarised; sampled again (``SAMPLINGS`` times in
    all) while ``running()`` says its load goes on and no sample caught the server busy
    outside its imports: on a loaded machine a stdio server's imports alone can spend
    ``BUSY_CPU``, and a short sampling then sees nothing else."""
    for _ in range(SAMPLINGS):
        spy = record(pid, seconds, output, log)
        spy.wait(timeout=seconds + 60)
        found = summarise_raw(output.read_text() if output.exists() else "")
        if found["samples"] or not running():
            break
    return found


def driver_calls(seconds: float) -> int:
    """Enough calls to outlast the sampling at a few thousand calls a second."""
    return max(200, int(seconds * 3000))


#: Calls a second no server of the HTTP loads reaches here: a driver given this many for the
#: warm-up, py-spy's start and the sampling is still calling when the sampling ends (and is
#: killed then), however fast the transport.
OUTRUN_CPS = 10_000


def profile_http(
    era: str, seconds: float, scratch: Path, log: Path, transport: str | None = None
) -> dict[str, Any]:
    """Streamable HTTP in ``era``; or, with ``transport`` (``ws``, ``sse``), that transport."""
    server = Hypercorn(scratch, log)
    try:
        spec = {"workload": "throughput", "era": era, "port": server.port, "path": "/mcp"}
        if transport is not None:
            spec.update(transport=transport, path="/ws" if transport == "ws" else "/sse")
        # The sequential half is skipped: n=0 on one connection, then the concurrent half.
        # Enough calls for the warm-up, py-spy's start and the sampling at any rate: a driver
        # that ended first (WebSocket answers fast) would leave nothing to sample.
        calls = max(driver_calls(seconds), int((seconds + 3.0) * OUTRUN_CPS))
        spec.update(n=calls, k=10, warmup=200, sequential=False)
        driver = subprocess.Popen(
            [node(), str(PEERS / "http_driver.mjs"), json.dumps(spec)],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log.open("ab"),
        )
        until_busy(server.worker, min(1.0, seconds))  # the warm-up
        output = scratch / f"http-{era}-{transport}.txt"
        found = sample_busy(server.worker, seconds, output, log, lambda: driver.poll() is None)
        driver.kill()
        driver.wait()
    finally:
        server.stop()
    return found


#: The servers of ``http-modern-floor``: label, module in ``peers/``, environment.
AGAINST_FLOOR = (
    ("trio_mcp", "trio_http_server.py", {"BENCH_JSON_RESPONSE": "1"}),
    ("bare-hypercorn floor", "floor_http_server.py", {"BENCH_SSE": "0"}),
)


def profile_http_against_floor(
    calls: int, scratch: Path, log: Path, rounds: int = 3
) -> dict[str, Any]:
    """The same modern-era calls (JSON answers) on our server and on the bare-hypercorn floor,
    each sampled from its first call to its last: CPU per call, by package and by function,
    as the busy samples times the sampling period over the calls made. What ours spends
    beyond the floor, and where, in microseconds rather than shares of two different totals.

    The two take turns, ``rounds`` times, ``calls`` split between the rounds, and each sums
    its rounds: a machine whose speed drifts over a minute (a shared one) moves both alike."""
    warmup, k = 200, 10
    per_round = max(k, calls // rounds)
    made = rounds * (warmup + k * -(-warmup // k) + k * -(-per_round // k))  # warm-ups, then n
    per_sample_us = 1e6 / RATE
    packages = {label: collections.Counter[str]() for label, _, _ in AGAINST_FLOOR}
    functions = {label: collections.Counter[str]() for label, _, _ in AGAINST_FLOOR}
    for turn in range(rounds):
        for label, module, env in AGAINST_FLOOR:
            server = Hypercorn(scratch, log, env, module)
            output = scratch / f"against-floor-{turn}-{module}.txt"
            try:
                spec = {"workload": "throughput", "era": "modern", "path": "/mcp"}
                spec.update(port=server.port, n=per_round, k=k, warmup=warmup, sequential=False)
                # Sampled until stopped: the duration only bounds a driver that hangs.
                spy = record(server.worker, 600, output, log)
                time.sleep(0.5)  # py-spy attached
                subprocess.run(
                    [node(), str(PEERS / "http_driver.mjs"), json.dumps(spec)],
                    cwd=ROOT,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=log.open("ab"),
                    check=True,
                    timeout=600,
                )
                spy.send_signal(signal.SIGINT)  # py-spy writes what it sampled, and ends
                spy.wait(timeout=60)
            finally:
                server.stop()
            for frames, count in busy_stacks(output.read_text()):
                packages[label][package_of(frames[-1])] += count
                functions[label][frames[-1]] += count
    servers = {
        label: {
            "us_per_call": sum(packages[label].values()) * per_sample_us / made,
            "by_package": {p: n * per_sample_us / made for p, n in packages[label].most_common()},
            "by_function": {f: n * per_sample_us / made for f, n in functions[label].most_common()},
        }
        for label, _, _ in AGAINST_FLOOR
    }
    ours, floor = (servers[label]["by_function"] for label, _, _ in AGAINST_FLOOR)
    beyond = {f: ours.get(f, 0.0) - floor.get(f, 0.0) for f in {*ours, *floor}}
    return {
        "calls": made,
        "rounds": rounds,
        "servers": servers,
        "beyond_floor": sorted(beyond.items(), key=lambda item: -item[1])[:TOP],
    }


def profile_stdio(seconds: float, scratch: Path, log: Path) -> dict[str, Any]:
    # Calls enough to outlast the warm-up wait as well at 10,000 calls a second: the driver is
    # killed once the sampling is done, and a server that ended first leaves nothing to sample.
    calls = max(200, int((seconds + 2.0) * 10_000))
    spec = {"workload": "throughput", "n": calls, "k": 10, "warmup": 300}
    command = [node(), str(PEERS / "raw_driver.mjs"), json.dumps(spec), "--"]
    command += [*PYTHON, str(PEERS / "trio_server.py")]
    driver = subprocess.Popen(
        command,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log.open("ab"),
    )
    try:
        server = int(wait_for(lambda: children_of(driver.pid), "the stdio server")[0])
        until_busy(server, min(2.0, seconds))  # its imports and the driver's warm-up
        output = scratch / "stdio.txt"
        found = sample_busy(server, seconds, output, log, lambda: driver.poll() is None)
    finally:
        driver.kill()
        driver.wait()
    return found


def profile_sessions(sessions: int, scratch: Path, log: Path) -> dict[str, Any]:
    result = scratch / "tracemalloc.json"
    server = Hypercorn(scratch, log, {"BENCH_TRACEMALLOC": str(result)})
    try:
        spec = {"workload": "sessions", "era": "handshake", "port": server.port, "path": "/mcp"}
        spec.update(sessions=sessions, warmup=20, settle_ms=200, pids=[server.worker])
        spec["signal_pid"] = server.worker  # SIGUSR1 before and after: the two snapshots
        done = subprocess.run(
            [node(), str(PEERS / "http_driver.mjs"), json.dumps(spec)],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=600,
            check=True,
        )
        raw = json.loads(done.stdout.decode().strip().splitlines()[-1])
        wait_for(result.exists, "the tracemalloc snapshot")
        snapshot = json.loads(wait_for(lambda: result.read_text() or None, "the snapshot"))
    finally:
        server.stop()
    return {
        "sessions": sessions,
        "rss_bytes_per_session": (raw["rss_after_kib"] - raw["rss_before_kib"]) * 1024 / sessions,
        "traced_bytes_per_session": snapshot["total_diff"] / sessions,
        "top": [
            [short_path(line), size / sessions, count / sessions]
            for line, size, count in snapshot["top"]
        ],
    }


def profile_parked(parked: int) -> dict[str, Any]:
    """tracemalloc's growth by line while ``parked`` sleep requests park in the engine."""
    import gc
    import tracemalloc

    import trio
    import trio.testing

    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.path.insert(0, str(ROOT / PEERS))
    from inprocess import FeedTransport, sleep_requests
    from trio_server import build

    async def park() -> list[tracemalloc.StatisticDiff]:
        gate = trio.Event()
        transport = FeedTransport([], 1, gate, parked=sleep_requests(parked))
        server = build(None)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.serve_transport, transport)
            await trio.testing.wait_all_tasks_blocked()
            gc.collect()
            tracemalloc.start(1)
            before = tracemalloc.take_snapshot()
            gate.set()
            await trio.testing.wait_all_tasks_blocked()
            gc.collect()
            stats = tracemalloc.take_snapshot().compare_to(before, "lineno")
            tracemalloc.stop()
            nursery.cancel_scope.cancel()
        return stats

    stats = trio.run(park)
    return {
        "parked": parked,
        "traced_bytes_per_request": sum(s.size_diff for s in stats) / parked,
        "top": [
            [short_path(str(s.traceback[0])), s.size_diff / parked, s.count_diff / parked]
            for s in stats[:20]
        ],
    }


def record_all(
    loads: list[str], seconds: float, sessions: int, parked: int, log: Path
) -> dict[str, Any]:
    profiles: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": _head(),
        "seconds": seconds,
        "rate": RATE,
        "loads": {},
    }
    with tempfile.TemporaryDirectory(prefix="trio-mcp-profile-") as scratch_dir:
        scratch = Path(scratch_dir)
        for load in loads:
            began = time.monotonic()
            if load == "http":
                found = profile_http("handshake", seconds, scratch, log)
            elif load == "http-modern":
                found = profile_http("modern", seconds, scratch, log)
            elif load == "http-modern-floor":
                # Three turns each, but in a smoke run (a second a load): it only has to run.
                turns = 3 if seconds >= 2 else 1
                found = profile_http_against_floor(driver_calls(seconds), scratch, log, turns)
            elif load == "ws":
                found = profile_http("handshake", seconds, scratch, log, "ws")
            elif load == "legacy-sse":
                found = profile_http("handshake", seconds, scratch, log, "sse")
            elif load == "stdio":
                found = profile_stdio(seconds, scratch, log)
            elif load == "sessions":
                found = profile_sessions(sessions, scratch, log)
            elif load == "parked":  # in a process of its own, on PYTHON's trio_mcp
                command = [*PYTHON, str(ROOT / "benchmarks" / "profiles.py")]
                command += ["--parked-child", str(parked)]
                done = subprocess.run(command, cwd=ROOT, capture_output=True, check=True)
                found = json.loads(done.stdout.decode().strip().splitlines()[-1])
            else:
                raise SystemExit(f"profiles.py: unknown load {load!r}; choose from {list(LOADS)}")
            profiles["loads"][load] = {"what": LOADS[load], **found}
            print(f"profile: {load:<12} {time.monotonic() - began:5.1f} s", flush=True)
    return profiles


def _head() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    return done.stdout.strip() or "?"


def write(profiles: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "profiles.json").write_text(json.dumps(profiles, indent=1) + "\n")
    (out / "profiles.md").write_text(profiles_markdown(profiles, "#"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results folder")
    parser.add_argument("--seconds", type=float, default=10.0, help="sampling time per load")
    parser.add_argument("--sessions", type=int, default=1000, help="idle sessions to open")
    parser.add_argument("--parked", type=int, default=5000, help="sleep requests to park")
    parser.add_argument("--only", help=f"comma-separated loads of {', '.join(LOADS)}")
    parser.add_argument("--parked-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.parked_child:
        sys.stdout.write(json.dumps(profile_parked(args.parked_child)) + "\n")
        return 0
    loads = [s.strip() for s in args.only.split(",")] if args.only else list(LOADS)
    with tempfile.TemporaryDirectory(prefix="trio-mcp-profile-log-") as scratch:
        log = Path(scratch) / "stderr.log"
        try:
            profiles = record_all(loads, args.seconds, args.sessions, args.parked, log)
        except (RuntimeError, subprocess.SubprocessError) as error:
            sys.stderr.write(f"{error}\n{log.read_text(errors='replace')[-3000:]}\n")
            return 1
    write(profiles, args.out.resolve())
    print(f"profiles written to {args.out / 'profiles.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
