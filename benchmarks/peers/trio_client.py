"""Benchmark driver built on trio_mcp's client.

    python trio_client.py SPEC_JSON -- COMMAND [ARG ...]

The same workloads and output as ``ts_client.mjs`` (see there), with trio_mcp's ``open_client``:
a cancel is ``CancelScope.cancel()`` on the caller's scope, which cancels the call on the wire.
"""

from __future__ import annotations

import json
import math
import sys
import time
from typing import Any

import trio

from trio_mcp import Client, Command, open_client


def now_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def micros(start: int, end: int) -> float:
    return round((end - start) / 1000, 1)


class Driver:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.counter = 0

    async def echo(self) -> None:
        text = f"hello {self.counter}"
        self.counter += 1
        result = await self.client.call_tool("echo", {"text": text})
        block = result.content[0]
        if getattr(block, "text", None) != text:
            raise RuntimeError(f"bad echo: {result!r}")

    async def timed_calls(self, count: int, latencies: list[float]) -> None:
        for _ in range(count):
            start = now_ns()
            await self.echo()
            latencies.append(micros(start, now_ns()))

    async def concurrent_calls(self, n: int, k: int, latencies: list[float]) -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(k):
                nursery.start_soon(self.timed_calls, math.ceil(n / k), latencies)

    async def throughput(self, n: int, k: int) -> dict[str, Any]:
        sequential: list[float] = []
        start = now_ns()
        await self.timed_calls(n, sequential)
        seq_elapsed = (now_ns() - start) / 1e9
        concurrent: list[float] = []
        start = now_ns()
        await self.concurrent_calls(n, k, concurrent)
        con_elapsed = (now_ns() - start) / 1e9
        return {
            "sequential": {"elapsed": seq_elapsed, "latencies_us": sequential},
            "concurrent": {"elapsed": con_elapsed, "latencies_us": concurrent, "k": k},
        }

    async def cancel_once(self) -> tuple[int, int, float]:
        issued = 0
        with trio.CancelScope() as scope:

            def on_progress(progress: float, total: float | None, message: str | None) -> None:
                nonlocal issued
                if not issued:
                    issued = now_ns()
                    scope.cancel()

            await self.client.call_tool("sleep", {"seconds": 60}, on_progress=on_progress)
            raise RuntimeError("the cancelled call returned a result")
        returned = now_ns()
        start = now_ns()
        await self.echo()
        return issued, returned, micros(start, now_ns())


async def drive(spec: dict[str, Any], command: list[str]) -> dict[str, Any]:
    async with open_client(Command(command, stderr="inherit")) as client:
        driver = Driver(client)
        # Warm up both paths: sequential calls, then as many over k concurrent callers.
        await driver.timed_calls(spec.get("warmup", 0), [])
        await driver.concurrent_calls(spec.get("warmup", 0), spec.get("k", 1), [])
        if spec["workload"] == "throughput":
            return await driver.throughput(spec["n"], spec["k"])
        if spec["workload"] == "cancel":
            out: dict[str, list[Any]] = {"issued_ns": [], "returned_ns": [], "next_us": []}
            for _ in range(spec.get("warmup_cancels", 0)):
                await driver.cancel_once()
            for _ in range(spec["cancels"]):
                issued, returned, next_us = await driver.cancel_once()
                out["issued_ns"].append(str(issued))
                out["returned_ns"].append(str(returned))
                out["next_us"].append(next_us)
            return out
        raise ValueError(f"unknown workload {spec['workload']!r}")


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: trio_client.py SPEC_JSON -- COMMAND [ARG ...]\n")
        return 2
    result = trio.run(drive, json.loads(argv[0]), argv[2:])
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
