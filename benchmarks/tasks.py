"""Tasks (SEP-2663) over Streamable HTTP: creation and completion latency, memory per parked task.

    python benchmarks/tasks.py '{"calls": 2000, "warmup": 200, "parked": 5000, "settle_ms": 500}'

A trio_mcp server with three task-capable tools runs in a child process (this file, ``serve``)
under hypercorn's trio worker on loopback; the driver speaks the modern era to it with raw
httpx POSTs (every request declares the extension, and carries the modern headers, ``Mcp-Name:
<taskId>`` included), one call at a time:

- ``create``: ``tools/call quick`` sent to its ``CreateTaskResult`` received (the task is stored
  by then, so this is the price of making a call a task);
- ``complete``: ``tools/call quick`` sent to the first ``tasks/get`` that shows it
  ``completed``, polling at once (no ``pollIntervalMs`` wait: the figure is the server's, not
  the interval's);
- ``parked``: the server's RSS before and after ``parked`` tasks are left waiting, once each
  way: at ``input_required`` (``ask``, one elicitation) and sleeping (``nap``); KiB per task.

Prints one JSON object: latency percentiles in microseconds and KiB per parked task.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import trio
from hypercorn.config import Config
from hypercorn.trio import serve as hypercorn_serve

ROOT = Path(__file__).resolve().parent.parent
SELF = str(Path(__file__).resolve())
sys.path.append(str(ROOT))  # trio_mcp may come from PYTHONPATH (--commit)

from trio_mcp import Context, Server  # noqa: E402
from trio_mcp.protocol._envelope import make_envelope  # noqa: E402
from trio_mcp.protocol._headers import modern_headers  # noqa: E402
from trio_mcp.protocol._tasks import TASKS_EXTENSION  # noqa: E402

VERSION = "2026-07-28"
META = make_envelope(
    VERSION,
    {"elicitation": {}, "extensions": {TASKS_EXTENSION: {}}},
    {"name": "bench", "version": "0"},
)
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def serve(parked: int) -> None:
    """The child: a server with the benchmark's tools, on a free loopback port (printed)."""
    server = Server("tasks-bench", max_tasks=2 * parked + 100)

    @server.tool(task=True)
    async def quick() -> str:
        await trio.lowlevel.checkpoint()
        return "done"

    @server.tool(task=True)
    async def ask(ctx: Context) -> str:
        schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
        answer = await ctx.elicit("Go on?", schema)
        return answer.action

    @server.tool(task=True)
    async def nap() -> str:
        await trio.sleep(3600)
        return "rested"  # pragma: no cover - the benchmark ends first

    async def main() -> None:
        config = Config()
        config.bind = ["127.0.0.1:0"]
        config.accesslog = None
        config.errorlog = None
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(hypercorn_serve, server.http_app(), config)
            sys.stdout.write(binds[0] + "/mcp\n")
            sys.stdout.flush()

    trio.run(main)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")  # pragma: no cover - Linux always has it


class Driver:
    def __init__(self, client: httpx.AsyncClient, url: str) -> None:
        self.client = client
        self.url = url
        self.next_id = 0

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        params = {**params, "_meta": META}
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        headers = {**ACCEPT, **modern_headers(method, params)}
        response = await self.client.post(self.url, content=orjson.dumps(body), headers=headers)
        answer = orjson.loads(response.content)
        if response.status_code != 200 or "result" not in answer:
            raise RuntimeError(f"{method} failed: {response.status_code} {response.text[:200]}")
        result: dict[str, Any] = answer["result"]
        return result

    async def create(self, tool: str) -> str:
        created = await self.request("tools/call", {"name": tool, "arguments": {}})
        if created.get("resultType") != "task":
            raise RuntimeError(f"{tool} was not made a task: {created}")
        return str(created["taskId"])

    async def complete(self) -> None:
        task_id = await self.create("quick")
        for _ in range(10_000):
            got = await self.request("tasks/get", {"taskId": task_id})
            if got["status"] == "completed":
                if got["result"]["content"][0]["text"] != "done":
                    raise RuntimeError(f"wrong result: {got}")
                return
            if got["status"] != "working":
                raise RuntimeError(f"the task ended {got['status']}: {got}")
        raise RuntimeError(f"task {task_id} never completed")  # pragma: no cover


def percentiles(name: str, micros: list[float]) -> dict[str, float]:
    ordered = sorted(micros)

    def at(q: float) -> float:
        return ordered[max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))]

    return {f"{name}_p50_us": at(50), f"{name}_p90_us": at(90), f"{name}_p99_us": at(99)}


async def timed(calls: int, step: Any) -> list[float]:
    micros = []
    for _ in range(calls):
        start = time.perf_counter()
        await step()
        micros.append((time.perf_counter() - start) * 1e6)
    return micros


async def park(driver: Driver, pid: int, tool: str, count: int, settle: float) -> float:
    """KiB of server RSS per task left parked in ``tool``."""
    await trio.sleep(settle)
    before = rss_kib(pid)
    for _ in range(count):
        await driver.create(tool)
    await trio.sleep(settle)
    return (rss_kib(pid) - before) / count


async def measure(spec: dict[str, Any]) -> dict[str, Any]:
    calls, warmup, parked = int(spec["calls"]), int(spec["warmup"]), int(spec["parked"])
    settle = int(spec.get("settle_ms", 300)) / 1000
    command = [sys.executable, SELF, "serve", str(parked)]
    async with trio.open_nursery() as nursery:
        process = await nursery.start(
            functools.partial(
                trio.run_process,
                command,
                stdout=subprocess.PIPE,
                stdin=subprocess.PIPE,
                check=False,
            )
        )
        try:
            assert process.stdout is not None
            line = b""
            with trio.fail_after(30):
                while not line.endswith(b"\n"):
                    chunk = await process.stdout.receive_some(1024)
                    if not chunk:
                        raise RuntimeError("the benchmark server exited before listening")
                    line += chunk
            url = line.decode().strip()
            async with httpx.AsyncClient(timeout=60) as client:
                driver = Driver(client, url)
                await timed(warmup, lambda: driver.create("quick"))
                await timed(warmup, driver.complete)
                result: dict[str, Any] = {}
                result.update(
                    percentiles("create", await timed(calls, lambda: driver.create("quick")))
                )
                result.update(percentiles("complete", await timed(calls, driver.complete)))
                result["parked_input_kib_per_task"] = await park(
                    driver, process.pid, "ask", parked, settle
                )
                result["parked_sleep_kib_per_task"] = await park(
                    driver, process.pid, "nap", parked, settle
                )
                result["server_rss_mib"] = rss_kib(process.pid) / 1024
        finally:
            process.kill()
    return result


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        serve(int(argv[1]))
        return 0
    spec = json.loads(argv[0])
    result = trio.run(measure, spec)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
