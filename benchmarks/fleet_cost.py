"""The cost per call of a fleet: CPU per call through nginx + Redis against one process alone.

    python benchmarks/fleet_cost.py '{"calls": 2000, "warmup": 300, "sessions": 8, "rounds": 3}'

Seven deployments of the same server (``tests/servers/fleet_server.py``), up at once:

- standalone: one ``trio-mcp serve ... --transport http`` process, called directly;
- tagged: three ``--redis-url URL`` processes behind nginx as ``deploy/nginx.conf`` ships it (a
  session's requests go to the node its id names; requests without a session round robin): the
  recommended fleet;
- any: three ``--redis-url URL --any-worker`` processes behind nginx round robin, every request
  of a session on any process (its record read from Redis each time, a replica built where it
  lands): the fleet that survives losing any node without its sessions, behind a balancer
  that cannot route on a header;
- anymap: the same processes behind ``deploy/nginx.conf`` as shipped, as the tagged fleet: a
  session's requests go to the node that opened it while it lives, and to that node's backups,
  which build their copies from its record, once it is gone. The way to have sessions outlive
  their node where the balancer can route on the session id;
- connection: the tagged fleet with the config's commented ``hash`` line in use: the requests
  without a session (the modern era's, each ``initialize``) go by client connection, each
  connection's to one backend, rather than each request to the next;
- one: the tagged fleet's machinery with one backend, ``--redis-url URL`` behind the same
  nginx: every hop and every Redis write of a fleet's call, and no other backend to share the
  cores with. On a machine with fewer cores than the three-backend fleets have busy processes,
  what separates those from this one is their contention for the cores;
- three: the control of the three-backend fleets: three standalone processes (the standalone
  and two more like it), no nginx, no Redis, each called directly by a driver of its own, all
  at once, with the fleets' loads split evenly between them. What three processes sharing the
  machine's cores cost per call with none of a fleet's machinery; each three-backend fleet's
  ratio over it (``_vs_three``) is what its machinery adds at the same contention.

Each fleet has a real ``redis-server`` of its own; each is run from ``deploy/nginx.conf`` by
the tests' harness (``tests/deploy/_fleet.py``). For each era (``hs``: handshake sessions;
``modern``: 2026-07-28 ``tools/call``), the project's raw HTTP driver (``peers/http_driver.mjs``,
Node) makes ``calls`` ``tools/call echo`` in all from ``sessions`` keep-alive connections at
once (each its own session in the handshake era), every answer checked, after ``warmup``
calls. Each fleet is
loaded two ways: with the standalone's ``sessions`` loops (``total``: the same load in all, so
each backend runs a third of it) and with three times as many (``per``: the same load per
process as the standalone's); the one-backend fleet, whose load is its process's either way,
with the standalone's (``total``). A process that serves fewer requests at once pays more CPU per
call (fewer requests share each wake-up of its event loop), which ``total`` counts with the
fleet's cost; ``per`` does not, but on a machine with fewer cores than the fleet has busy
processes (backends, nginx, Redis, the load generator) it adds their contention for the cores
instead. Neither isolates the fleet's machinery alone; the two bracket it.

What is counted is CPU, not time: user plus system CPU (``/proc/<pid>/stat``) of every server
process (the backends, nginx's master and workers, ``redis-server``) over the measured calls,
divided by their number. The load generator's own CPU is not counted, so the figure holds on a
busy machine, where calls per second do not. The standalone is measured before each fleet's
load and after it, and each ratio is to the mean of those two: a shared machine's speed drifts
over a job, and a ratio across the whole of it would count the drift. With ``rounds`` (1 if
not given), all of it is measured that many times over, and every figure is the median of its
rounds: one draw of a row moves by a fifth on a shared machine. Prints one JSON object: per
era, microseconds of CPU per call standalone (``<era>_standalone_us``, the median of its
measurements), and per fleet and load (``<era>_<fleet>_<load>_us``, with its ``_backends``,
``_nginx`` and ``_redis`` parts), and the ratio to the standalone around it
(``<era>_<fleet>_<load>_ratio``; the goal is at most 1.3; reported, not asserted), and for
the three-backend fleets the ratio of that ratio to the control's at the same load
(``<era>_<fleet>_<load>_vs_three``). A handshake-era load ends its sessions (DELETE) once its
calls are made, so that no run leaves sessions behind on the processes the next one drives.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # for the harness; trio_mcp may come from PYTHONPATH (--commit)

from tests._ports import free_port  # noqa: E402
from tests.deploy._fleet import FLEET_SERVER, fleet  # noqa: E402 - the checkout's own harness
from tests.deploy._services import redis_server  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
#: The driver's name of each era.
ERAS = {"hs": "handshake", "modern": "modern"}
BACKENDS = 3
#: A hang guard on starting the standalone process.
START_GUARD = 30


def cpu_seconds(pid: int, *, group: bool) -> float:
    """User plus system CPU of a process, or of every live process of its process group."""
    total = 0
    if not group:
        candidates = [Path(f"/proc/{pid}")]
    else:
        candidates = [p for p in Path("/proc").iterdir() if p.name.isdigit()]
    for entry in candidates:
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if not group or int(fields[2]) == pid:  # pgrp
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


# -- the load ---------------------------------------------------------------------------------

#: The load generator: the project's raw HTTP driver (Node, hand-built HTTP/1.1 on keep-alive
#: sockets, every answer checked). It costs the machine about a tenth of what a Python client
#: (httpx) does per call, a millisecond of CPU: on a machine whose cores the servers share with
#: it, a heavy client is contention the servers' CPU per call counts.
DRIVER = Path(__file__).resolve().parent / "peers" / "http_driver.mjs"


async def load(era: str, url: str, calls: int, sessions: int) -> None:
    """``calls`` calls in all from ``sessions`` connections at once (each its own session, for
    hs); a bad answer fails the run."""
    parsed = urlsplit(url)
    spec = {"workload": "load", "era": ERAS[era], "port": parsed.port, "path": parsed.path}
    spec.update(calls=calls, k=sessions)
    node = shutil.which("node")
    if node is None:
        raise SystemExit("fleet_cost.py: node is not on PATH (the load generator is Node)")
    done = await trio.run_process([node, str(DRIVER), json.dumps(spec)], capture_stdout=True)
    if json.loads(done.stdout)["calls"] != calls:
        raise RuntimeError(f"the driver made other calls than asked: {done.stdout[:300]!r}")


async def cpu_per_call(
    era: str, targets: list[tuple[str, dict[str, Any]]], counted: Callable[[], list[float]]
) -> list[float]:
    """Microseconds of CPU per call of each part ``counted`` names, over the measured calls:
    each target (a URL and its load) driven by a driver of its own, all at once."""

    async def at_once(key: str) -> None:
        async with trio.open_nursery() as nursery:
            for url, spec in targets:
                nursery.start_soon(load, era, url, int(spec[key]), int(spec["sessions"]))

    await at_once("warmup")
    before = counted()
    await at_once("calls")
    after = counted()
    calls = sum(int(spec["calls"]) for _, spec in targets)
    return [(a - b) * 1e6 / calls for a, b in zip(after, before, strict=True)]


def split(spec: dict[str, Any], ways: int) -> list[dict[str, Any]]:
    """A load split evenly ``ways`` ways: sessions, calls and warm-up calls each shared out, the
    first shares one larger where they do not divide (each at least one session)."""

    def share(total: int, i: int) -> int:
        return total // ways + (1 if i < total % ways else 0)

    return [
        {
            **spec,
            "sessions": max(1, share(int(spec["sessions"]), i)),
            "calls": share(int(spec["calls"]), i),
            "warmup": share(int(spec["warmup"]), i),
        }
        for i in range(ways)
    ]


# -- the deployments --------------------------------------------------------------------------


@asynccontextmanager
async def standalone(directory: Path) -> AsyncIterator[tuple[str, int]]:
    """One ``trio-mcp serve`` process of the fleet's server, alone: its URL and pid."""
    port = free_port()
    # -P: trio_mcp from PYTHONPATH first (run.py --commit), not from the working directory.
    command = [sys.executable, "-P", "-m", "trio_mcp", "serve", str(FLEET_SERVER)]
    command += ["--transport", "http", "--port", str(port)]
    path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH", ""), str(ROOT)) if p)
    log = directory / "standalone.log"
    with log.open("wb") as out:
        process = await trio.lowlevel.open_process(
            command,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": path},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(timeout=5) as client:
            with trio.fail_after(START_GUARD):
                while True:
                    if process.poll() is not None:
                        raise RuntimeError(f"the standalone server exited: {log.read_text()}")
                    try:
                        if (await client.get(base + "/ready")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    await trio.sleep(0.05)
        yield base + "/mcp", process.pid
    finally:
        process.kill()
        with trio.move_on_after(10):
            await process.wait()


#: The fleets: the backends' options, nginx's routing and how many backends (see the module's
#: docstring).
FLEETS = {
    "tagged": ([], "map", BACKENDS),
    "any": (["--any-worker"], "any", BACKENDS),
    "anymap": (["--any-worker"], "map", BACKENDS),
    "connection": ([], "connection", BACKENDS),
    "one": ([], "map", 1),
}
#: The loads of a fleet: how many times the standalone's loops it is driven with, once per
#: backend (one backend: ``total`` alone, the same load as ``per``).
LOADS = {"total": 1, "per": BACKENDS}


async def measure(spec: dict[str, Any]) -> dict[str, float]:
    # Every figure of every round; the output is each one's median over the rounds.
    samples: dict[str, list[float]] = collections.defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="trio-mcp-fleet-cost-") as scratch:
        base = Path(scratch)
        async with contextlib.AsyncExitStack() as stack:
            fleets = {}
            for name, (options, routing, size) in FLEETS.items():
                (base / name).mkdir()
                # Each fleet its own redis-server: the fleets share nothing, and each one's Redis
                # CPU is its own.
                redis = await stack.enter_async_context(redis_server(base / name))
                running = await stack.enter_async_context(
                    fleet(
                        base / name,
                        size,
                        server=str(FLEET_SERVER),
                        options=["--redis-url", redis.url, *options],
                        routing=routing,
                    )
                )
                assert redis.process is not None
                fleets[name] = (running, redis.process.pid, size)
            alone_url, alone_pid = await stack.enter_async_context(standalone(base))
            # The control: the standalone and two more like it, each called directly.
            crowd = [(alone_url, alone_pid)]
            for i in range(2, BACKENDS + 1):
                (base / f"alone{i}").mkdir()
                crowd.append(await stack.enter_async_context(standalone(base / f"alone{i}")))

            def parts_of(running: Any, redis_pid: int) -> Callable[[], list[float]]:
                def parts() -> list[float]:
                    backends = sum(cpu_seconds(b.pid, group=True) for b in running.backends)
                    nginx = cpu_seconds(running.nginx.pid, group=True)
                    return [backends, nginx, cpu_seconds(redis_pid, group=False)]

                return parts

            async def alone(era: str) -> float:
                (us,) = await cpu_per_call(
                    era, [(alone_url, spec)], lambda: [cpu_seconds(alone_pid, group=True)]
                )
                return us

            def crowd_cpu() -> list[float]:
                return [sum(cpu_seconds(pid, group=True) for _, pid in crowd)]

            async def one_round(era: str) -> None:
                # The standalone is measured first and again after each deployment's load, and
                # each ratio is to the mean of the two measured around it: a machine whose speed
                # drifts over the job (a shared one does) moves both.
                standalone_us = [await alone(era)]

                async def around_it() -> float:
                    standalone_us.append(await alone(era))
                    return (standalone_us[-2] + standalone_us[-1]) / 2

                three: dict[str, float] = {}
                for load, times in LOADS.items():
                    # ``total``: the standalone's load dealt out; ``per``: each its whole load.
                    shares = split(spec, BACKENDS) if times == 1 else [spec] * BACKENDS
                    targets = [(url, share) for (url, _), share in zip(crowd, shares, strict=True)]
                    (us,) = await cpu_per_call(era, targets, crowd_cpu)
                    around = await around_it()
                    three[load] = us / around if around else 0.0
                    samples[f"{era}_three_{load}_us"].append(us)
                    samples[f"{era}_three_{load}_ratio"].append(three[load])
                for name, (running, redis_pid, size) in fleets.items():
                    for load, times in LOADS.items():
                        if times > size:
                            continue  # one backend: its load per process is the standalone's
                        loaded = {**spec, "sessions": int(spec["sessions"]) * times}
                        loaded["calls"] = int(spec["calls"]) * times
                        parts = parts_of(running, redis_pid)
                        backends, nginx, redis_part = await cpu_per_call(
                            era, [(running.url, loaded)], parts
                        )
                        around = await around_it()
                        total = backends + nginx + redis_part
                        ratio = total / around if around else 0.0
                        key = f"{era}_{name}_{load}"
                        samples[f"{key}_us"].append(total)
                        samples[f"{key}_backends_us"].append(backends)
                        samples[f"{key}_nginx_us"].append(nginx)
                        samples[f"{key}_redis_us"].append(redis_part)
                        samples[f"{key}_ratio"].append(ratio)
                        if size == BACKENDS and three[load]:
                            samples[f"{key}_vs_three"].append(ratio / three[load])
                samples[f"{era}_standalone_us"].extend(standalone_us)

            for _ in range(int(spec.get("rounds", 1))):
                for era in ("hs", "modern"):
                    await one_round(era)
    return {key: statistics.median(values) for key, values in samples.items()}


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0]) if argv else {"calls": 2000, "warmup": 300, "sessions": 8}
    sys.stdout.write(json.dumps(trio.run(measure, spec)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
