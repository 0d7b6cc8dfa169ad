"""A proxied call against a direct one, and against the floor of any proxy: what ``trio-mcp
proxy`` in front of a stdio server costs.

    python benchmarks/proxy.py '{"calls": 200, "warmup": 50, "rounds": 5}'

The upstream is the demo server (``python -m trio_mcp demo``), a stdio child in every case:

- stdio: a trio_mcp client spawns the demo directly (``direct``); or spawns
  ``peers/floor_relay.py``, a bare Trio relay that copies bytes between its stdin/stdout and the
  demo's without parsing them (``floor``: the same second process hop as a proxy, and nothing
  else); or spawns ``trio-mcp proxy`` over stdio, which spawns the demo (``proxied``);
- http: a modern-era (2026-07-28) trio_mcp client calls ``trio-mcp demo --transport http``
  (``direct``), or ``trio-mcp proxy "<the demo>" --transport http`` (``proxied``: every request
  a connection of its own downstream, all of them on the proxy's one pooled upstream session).

All the clients of a transport are open at once. Each makes ``warmup`` calls; then, for each of
``rounds`` rounds, each makes ``calls`` ``tools/call echo`` one at a time, the sides taking
turns in an order that rotates every round (so a noisy neighbour weighs on all of them alike).
Prints one JSON object: per transport and side the p50 and p90 latency in microseconds over
every round; ``<transport>_ratio``, the median over the rounds of that round's proxied p50 /
direct p50 (the goal is 1.3); for stdio also ``stdio_floor_ratio`` (floor / direct: what any
proxy costs at the least), ``stdio_proxied_vs_floor`` (proxied / floor) and
``stdio_proxy_own_us`` (proxied p50 - floor p50: the proxy's own work per call).
"""

from __future__ import annotations

import json
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # trio_mcp may come from PYTHONPATH (--commit)

from tests._ports import free_port  # noqa: E402
from trio_mcp import Client, Command, open_client  # noqa: E402

DEMO = [sys.executable, "-m", "trio_mcp", "demo"]
PROXY = [sys.executable, "-m", "trio_mcp", "proxy", shlex.join(DEMO)]
RELAY = [sys.executable, str(ROOT / "benchmarks" / "peers" / "floor_relay.py"), *DEMO]
#: How long an HTTP server may take to answer its readiness path.
START_TIMEOUT = 30.0


def quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def timed_calls(client: Client, n: int) -> list[float]:
    """Microseconds per ``tools/call echo``, one at a time."""
    samples: list[float] = []
    for _ in range(n):
        started = time.perf_counter()
        await client.call_tool("echo", {"text": "ping"})
        samples.append((time.perf_counter() - started) * 1e6)
    return samples


@asynccontextmanager
async def served_over_http(command: list[str]) -> AsyncIterator[str]:
    """``command`` serving Streamable HTTP on a free port: its MCP endpoint."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    full = [*command, "--transport", "http", "--port", str(port)]
    process = await trio.lowlevel.open_process(
        full, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        async with httpx.AsyncClient() as probe:
            with trio.fail_after(START_TIMEOUT):
                while True:
                    try:
                        if (await probe.get(base + "/ready")).status_code == 200:
                            break
                    except httpx.TransportError:
                        await trio.sleep(0.05)
        yield base + "/mcp"
    finally:
        process.terminate()
        with trio.move_on_after(10):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()


async def compare(
    spec: dict[str, Any], sides: dict[str, Callable[[AsyncExitStack], Any]]
) -> tuple[dict[str, list[float]], list[dict[str, float]]]:
    """Every side's samples, and each round's p50 per side."""
    async with AsyncExitStack() as stack:
        clients: dict[str, Client] = {}
        for side, open_side in sides.items():
            clients[side] = await open_side(stack)
        for client in clients.values():
            await timed_calls(client, spec["warmup"])
        samples: dict[str, list[float]] = {side: [] for side in sides}
        rounds: list[dict[str, float]] = []
        order = list(sides)
        for n in range(spec.get("rounds", 1)):
            turn = order[n % len(order) :] + order[: n % len(order)]
            medians: dict[str, float] = {}
            for side in turn:
                got = await timed_calls(clients[side], spec["calls"])
                samples[side].extend(got)
                medians[side] = quantile(got, 0.5)
            rounds.append(medians)
    return samples, rounds


def stdio_side(command: list[str]) -> Callable[[AsyncExitStack], Any]:
    async def open_side(stack: AsyncExitStack) -> Client:
        return await stack.enter_async_context(open_client(Command(command, stderr="discard")))

    return open_side


def http_side(command: list[str]) -> Callable[[AsyncExitStack], Any]:
    async def open_side(stack: AsyncExitStack) -> Client:
        url = await stack.enter_async_context(served_over_http(command))
        return await stack.enter_async_context(open_client(url, mode="modern"))

    return open_side


def ratio(rounds: list[dict[str, float]], top: str, bottom: str) -> float:
    """The median over the rounds of that round's ``top`` p50 / ``bottom`` p50."""
    return statistics.median(r[top] / r[bottom] for r in rounds)


async def main(spec: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    transports = {
        "stdio": {
            "direct": stdio_side(DEMO),
            "floor": stdio_side(RELAY),
            "proxied": stdio_side(PROXY),
        },
        "http": {"direct": http_side(DEMO), "proxied": http_side(PROXY)},
    }
    for transport, sides in transports.items():
        samples, rounds = await compare(spec, sides)
        for side, got in samples.items():
            out[f"{transport}_{side}_p50_us"] = quantile(got, 0.5)
            out[f"{transport}_{side}_p90_us"] = quantile(got, 0.9)

        out[f"{transport}_ratio"] = ratio(rounds, "proxied", "direct")
        if "floor" in sides:
            out[f"{transport}_floor_ratio"] = ratio(rounds, "floor", "direct")
            out[f"{transport}_proxied_vs_floor"] = ratio(rounds, "proxied", "floor")
            out[f"{transport}_proxy_own_us"] = statistics.median(
                r["proxied"] - r["floor"] for r in rounds
            )
    return out


if __name__ == "__main__":
    figures = trio.run(main, json.loads(sys.argv[1]))
    print(json.dumps(figures))
