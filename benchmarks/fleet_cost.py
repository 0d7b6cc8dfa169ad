"""The cost per call of a fleet: CPU per call through nginx + Redis against one process alone.

    python benchmarks/fleet_cost.py '{"calls": 2000, "warmup": 300, "sessions": 8}'

Four deployments of the same server (``tests/servers/fleet_server.py``), up at once:

- standalone: one ``trio-mcp serve ... --transport http`` process, called directly;
- tagged: three ``--redis-url URL`` processes behind nginx as ``deploy/nginx.conf`` ships it (a
  session's requests go to the node its id names; requests without a session round robin): the
  recommended fleet;
- any: three ``--redis-url URL --any-worker`` processes behind nginx round robin, every request
  of a session on any process (its record read from Redis each time, a replica built where it
  lands): the fleet that survives losing any node without its sessions;
- one: the tagged fleet's machinery with one backend, ``--redis-url URL`` behind the same
  nginx: every hop and every Redis write of a fleet's call, and no other backend to share the
  cores with. On a machine with fewer cores than the three-backend fleets have busy processes,
  what separates those from this one is their contention for the cores.

Each fleet has a real ``redis-server`` of its own; each is run from ``deploy/nginx.conf`` by
the tests' harness (``tests/deploy/_fleet.py``). For each era (``hs``: handshake sessions;
``modern``: 2026-07-28 ``tools/call``), ``sessions`` loops make ``calls`` ``tools/call echo`` in
all over keep-alive connections, every answer checked, after ``warmup`` calls. Each fleet is
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
busy machine, where calls per second do not. Prints one JSON object: per era, microseconds of
CPU per call standalone (``<era>_standalone_us``), and per fleet and load
(``<era>_<fleet>_<load>_us``, with its ``_backends``, ``_nginx`` and ``_redis`` parts), and the
ratio to the standalone (``<era>_<fleet>_<load>_ratio``; the goal is at most 1.3; reported, not
asserted).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # for the harness; trio_mcp may come from PYTHONPATH (--commit)

from tests.deploy._fleet import FLEET_SERVER, fleet  # noqa: E402 - the checkout's own harness
from tests.deploy._services import free_port, redis_server  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
HANDSHAKE = "2025-06-18"
MODERN = "2026-07-28"
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


def _check(response: httpx.Response, text: str) -> None:
    if response.status_code != 200 or f'"text":"{text}"' not in response.text:
        raise RuntimeError(f"call {text} failed: {response.status_code} {response.text[:300]}")


async def _handshake_loop(client: httpx.AsyncClient, url: str, calls: int, tag: str) -> None:
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": HANDSHAKE,
    }
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": HANDSHAKE,
            "capabilities": {},
            "clientInfo": {"name": "fleet-cost", "version": "0"},
        },
    }
    opened = await client.post(url, content=orjson.dumps(init), headers=headers)
    opened.raise_for_status()
    headers["mcp-session-id"] = opened.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    (await client.post(url, content=orjson.dumps(note), headers=headers)).raise_for_status()
    for call in range(1, calls + 1):
        text = f"{tag}c{call}"
        body = {
            "jsonrpc": "2.0",
            "id": call,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}},
        }
        _check(await client.post(url, content=orjson.dumps(body), headers=headers), text)


async def _modern_loop(client: httpx.AsyncClient, url: str, calls: int, tag: str) -> None:
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": "echo",
    }
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    for call in range(1, calls + 1):
        text = f"{tag}c{call}"
        body = {
            "jsonrpc": "2.0",
            "id": call,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}, "_meta": meta},
        }
        _check(await client.post(url, content=orjson.dumps(body), headers=headers), text)


LOOPS = {"hs": _handshake_loop, "modern": _modern_loop}


async def load(era: str, url: str, calls: int, sessions: int, tag: str) -> None:
    """``calls`` calls in all from ``sessions`` loops at once (each its own session, for hs)."""
    loop = LOOPS[era]
    limits = httpx.Limits(max_connections=sessions, max_keepalive_connections=sessions)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client, trio.open_nursery() as n:
        for number in range(sessions):
            share = calls // sessions + (1 if number < calls % sessions else 0)
            n.start_soon(loop, client, url, share, f"{tag}s{number}")


async def cpu_per_call(
    era: str, url: str, spec: dict[str, Any], counted: Callable[[], list[float]], tag: str
) -> list[float]:
    """Microseconds of CPU per call of each part ``counted`` names, over the measured calls."""
    calls, sessions = int(spec["calls"]), int(spec["sessions"])
    await load(era, url, int(spec["warmup"]), sessions, tag + "w")
    before = counted()
    await load(era, url, calls, sessions, tag)
    after = counted()
    return [(a - b) * 1e6 / calls for a, b in zip(after, before, strict=True)]


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
    "one": ([], "map", 1),
}
#: The loads of a fleet: how many times the standalone's loops it is driven with, once per
#: backend (one backend: ``total`` alone, the same load as ``per``).
LOADS = {"total": 1, "per": BACKENDS}


async def measure(spec: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
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

            def parts_of(running: Any, redis_pid: int) -> Callable[[], list[float]]:
                def parts() -> list[float]:
                    backends = sum(cpu_seconds(b.pid, group=True) for b in running.backends)
                    nginx = cpu_seconds(running.nginx.pid, group=True)
                    return [backends, nginx, cpu_seconds(redis_pid, group=False)]

                return parts

            for era in ("hs", "modern"):
                (alone,) = await cpu_per_call(
                    era, alone_url, spec, lambda: [cpu_seconds(alone_pid, group=True)], "a"
                )
                out[f"{era}_standalone_us"] = alone
                for name, (running, redis_pid, size) in fleets.items():
                    for load, times in LOADS.items():
                        if times > size:
                            continue  # one backend: its load per process is the standalone's
                        loaded = {**spec, "sessions": int(spec["sessions"]) * times}
                        loaded["calls"] = int(spec["calls"]) * times
                        tag = f"{name[0]}{load[0]}"
                        parts = parts_of(running, redis_pid)
                        backends, nginx, redis_part = await cpu_per_call(
                            era, running.url, loaded, parts, tag
                        )
                        total = backends + nginx + redis_part
                        key = f"{era}_{name}_{load}"
                        out[f"{key}_us"] = total
                        out[f"{key}_backends_us"] = backends
                        out[f"{key}_nginx_us"] = nginx
                        out[f"{key}_redis_us"] = redis_part
                        out[f"{key}_ratio"] = total / alone if alone else 0.0
    return out


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0]) if argv else {"calls": 2000, "warmup": 300, "sessions": 8}
    sys.stdout.write(json.dumps(trio.run(measure, spec)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
