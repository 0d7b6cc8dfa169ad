"""A proxied call against a direct one: what ``trio-mcp proxy`` in front of a stdio server costs.

    python benchmarks/proxy.py '{"calls": 500, "warmup": 50}'

The upstream is the demo server (``python -m trio_mcp demo``), a stdio child in every case:

- stdio: a trio_mcp client spawns the demo directly (``direct``), or spawns ``trio-mcp proxy``
  over stdio, which spawns the demo (``proxied``);
- http: a modern-era (2026-07-28) trio_mcp client calls ``trio-mcp demo --transport http``
  (``direct``), or ``trio-mcp proxy "<the demo>" --transport http`` (``proxied``: every request
  a connection of its own downstream, all of them on the proxy's one pooled upstream session).

Each side makes ``warmup`` calls, then ``calls`` ``tools/call echo`` one at a time; both sides of
a transport are measured back to back. Prints one JSON object: per transport and side the p50
and p90 latency in microseconds, and the ratio of the p50s (proxied / direct; the goal is 1.3).
"""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # trio_mcp may come from PYTHONPATH (--commit)

from trio_mcp import Command, open_client  # noqa: E402

DEMO = [sys.executable, "-m", "trio_mcp", "demo"]
PROXY = [sys.executable, "-m", "trio_mcp", "proxy", shlex.join(DEMO)]
#: How long an HTTP server may take to answer its readiness path.
START_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def timed_calls(target: Any, spec: dict[str, Any], **options: Any) -> list[float]:
    """Microseconds per ``tools/call echo``, one at a time, after the warm-up."""
    samples: list[float] = []
    async with open_client(target, **options) as client:
        for n in range(spec["warmup"] + spec["calls"]):
            started = time.perf_counter()
            await client.call_tool("echo", {"text": "ping"})
            if n >= spec["warmup"]:
                samples.append((time.perf_counter() - started) * 1e6)
    return samples


async def over_http(command: list[str], spec: dict[str, Any]) -> list[float]:
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
        return await timed_calls(base + "/mcp", spec, mode="modern")
    finally:
        process.terminate()
        with trio.move_on_after(10):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()


async def main(spec: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    sides = {
        "stdio": {
            "direct": lambda: timed_calls(Command(DEMO, stderr="discard"), spec),
            "proxied": lambda: timed_calls(Command(PROXY, stderr="discard"), spec),
        },
        "http": {
            "direct": lambda: over_http(DEMO, spec),
            "proxied": lambda: over_http(PROXY, spec),
        },
    }
    for transport, pair in sides.items():
        for side, measure in pair.items():
            samples = await measure()
            out[f"{transport}_{side}_p50_us"] = quantile(samples, 0.5)
            out[f"{transport}_{side}_p90_us"] = quantile(samples, 0.9)
        out[f"{transport}_ratio"] = (
            out[f"{transport}_proxied_p50_us"] / out[f"{transport}_direct_p50_us"]
        )
    return out


if __name__ == "__main__":
    figures = trio.run(main, json.loads(sys.argv[1]))
    print(json.dumps(figures))
