"""In-process cost of parsing and dispatch (no I/O), to guide optimisation.

    python inprocess.py SPEC_JSON

``SPEC_JSON`` sets ``messages``, ``batch`` and ``parked``; ``"only": NAME`` measures one figure
alone, with no warm-up, for an instruction count per message: run it under callgrind with two
values of ``messages`` and divide the difference of the two totals by the difference in
messages (in POSTs for the ``http_*`` figures: ``messages / 10``)::

    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python benchmarks/inprocess.py '{"only": "http_json_us", "messages": 12000}'

Prints one JSON object of messages (or calls) per second:

- ``parse``: ``trio_mcp.protocol._jsonrpc.parse`` on pre-encoded ``tools/call echo`` requests.
- ``floor_work``: what the bare-Trio floor does per line (orjson decode, build the reply,
  encode), the same function as ``peers/floor_server.py``.
- ``engine``: the whole server engine with a transport that does no I/O: pre-encoded requests
  go in through ``receive()`` (one checkpoint per message, as a stream read would take) and
  responses are counted in ``send()``. Parse, route, one task and cancel scope per request, the
  ``echo`` handler, encode, the ordered writer.
- ``engine_batched``: the same, ``batch`` messages per checkpoint, as when one read from the pipe
  brings several lines (concurrent callers).
- ``engine_loaded``: ``engine`` with ``parked`` ``sleep(3600)`` requests in flight on the same
  connection all along: routing must stay O(1), so this should equal ``engine``.
- ``memory_roundtrip``: trio_mcp's client calling ``echo`` on trio_mcp's server over the
  in-memory transport, one call at a time: both engines plus the client's typed results.
- ``parked_bytes``: Python memory (tracemalloc) per parked request: ``parked`` concurrent
  ``sleep(3600)`` calls fed to the server engine, until every task is blocked.
- ``parked_bytes_floor``: the same for the least a Trio design with one task and one cancel scope
  per request can hold: a bare task entering a ``CancelScope`` and calling ``trio.sleep``.
- ``parked_bytes_floor_tool``: a bare task entering a ``CancelScope`` and awaiting the
  benchmark's own ``sleep`` tool (``peers/trio_server.py``, its coroutine as trio_mcp's engine
  awaits it): what a bare-Trio server running that tool holds, the tool's frame included.
- ``writer_us``: CPU time per request stream handed to an app's ``EventWriter`` (what a worker
  sharing its event store writes through): each stream opened, given one event, ended, and
  delivered one checkpoint later, well within the writer's coalescing window, as most answers
  are; the store answers at once (a ``MemoryEventStore``). The loop itself is counted: compare
  the figure across commits.
- ``http_modern_us``, ``http_sse_us``, ``http_json_us``: CPU time per POST of ``tools/call echo``
  through trio_mcp's Streamable HTTP app with no ASGI server between (``messages / 10`` POSTs):
  modern (2026-07-28), and one handshake-era session answering with SSE or JSON. What hypercorn
  adds is measured by the ``http`` section of ``run.py``.
"""

from __future__ import annotations

import functools
import gc
import json
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import trio
import trio.testing

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

from floor_server import answer
from trio_server import build

from trio_mcp import open_client
from trio_mcp.http import HttpOptions, MemoryEventStore, StreamMeta
from trio_mcp.http._streams import EventStream, EventWriter
from trio_mcp.lowlevel import BaseTransport
from trio_mcp.protocol._jsonrpc import RequestId, parse

INITIALIZE = orjson.dumps(
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "inprocess", "version": "0"},
        },
    }
)
INITIALIZED = orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})


#: The HTTP app's paths measured in process: the modern era, and a handshake-era session's SSE
#: and JSON responses.
HTTP_MODES = ("modern", "sse", "json")


def echo_requests(n: int) -> list[bytes]:
    return [
        orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": f"hello {i}"}},
            }
        )
        for i in range(1, n + 1)
    ]


def per_second(count: int, start: float) -> float:
    return count / (time.perf_counter() - start)


def bench_parse(lines: list[bytes]) -> float:
    start = time.perf_counter()
    for line in lines:
        parse(line)
    return per_second(len(lines), start)


def bench_floor_work(lines: list[bytes]) -> float:
    start = time.perf_counter()
    for line in lines:
        answer(orjson.loads(line))
    return per_second(len(lines), start)


class FeedTransport(BaseTransport):
    """Hands the engine pre-encoded frames and counts the responses; no I/O at all."""

    def __init__(
        self,
        lines: list[bytes],
        batch: int,
        gate: trio.Event | None = None,
        parked: list[bytes] | None = None,
    ) -> None:
        parked = parked or []
        self.lines = [INITIALIZE, INITIALIZED, *parked, *lines]
        self.first = 2 + len(parked)  # the clock starts with the first of ``lines``
        self.expected = len(lines) + 1  # the initialize response too; parked ones never answer
        self.batch = batch
        self.gate = gate
        self.index = 0
        self.sent = 0
        self.started = 0.0
        self.finished = 0.0
        self.done = trio.Event()
        self.idle = trio.Event()

    async def send(
        self, data: bytes, *, related_request_id: RequestId | None = None, final: bool = False
    ) -> None:
        self.sent += 1
        if self.sent == self.expected:
            self.finished = time.perf_counter()
            self.done.set()
        await trio.lowlevel.checkpoint()

    async def receive(self) -> bytes:
        if self.index >= len(self.lines):
            await self.idle.wait()  # hold the connection open until the benchmark ends
            raise trio.EndOfChannel
        if self.index == 2 and self.gate is not None:
            await self.gate.wait()
        if self.index == self.first:
            await trio.testing.wait_all_tasks_blocked()  # every parked request is parked
            self.started = time.perf_counter()
        if self.index % self.batch == 0:
            await trio.lowlevel.checkpoint()
        line = self.lines[self.index]
        self.index += 1
        return line


async def bench_engine(lines: list[bytes], batch: int, parked: int = 0) -> float:
    transport = FeedTransport(lines, batch, parked=sleep_requests(parked, first_id=-parked))
    server = build(None)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.serve_transport, transport)
        await transport.done.wait()
        nursery.cancel_scope.cancel()
    return len(lines) / (transport.finished - transport.started)


async def bench_memory_roundtrip(n: int) -> float:
    server = build(None)
    async with open_client(server) as client:
        for i in range(min(n, 100)):  # warm up
            await client.call_tool("echo", {"text": f"warm {i}"})
        start = time.perf_counter()
        for i in range(n):
            await client.call_tool("echo", {"text": f"hello {i}"})
        return per_second(n, start)


def sleep_requests(n: int, first_id: int = 1) -> list[bytes]:
    return [
        orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {"name": "sleep", "arguments": {"seconds": 3600}},
            }
        )
        for i in range(first_id, first_id + n)
    ]


def traced_bytes(before: tracemalloc.Snapshot) -> int:
    gc.collect()
    after = tracemalloc.take_snapshot()
    return sum(stat.size_diff for stat in after.compare_to(before, "filename"))


async def bench_parked(n: int) -> float:
    gate = trio.Event()
    transport = FeedTransport([], 1, gate, parked=sleep_requests(n))
    server = build(None)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.serve_transport, transport)
        await trio.testing.wait_all_tasks_blocked()
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.take_snapshot()
        gate.set()
        await trio.testing.wait_all_tasks_blocked()
        grown = traced_bytes(before)
        tracemalloc.stop()
        nursery.cancel_scope.cancel()
    return grown / n


async def bench_parked_floor(n: int) -> float:
    async def parked(params: dict[str, Any]) -> None:
        with trio.CancelScope():
            await trio.sleep(params["arguments"]["seconds"])

    return await parked_in_bare_tasks(n, parked)


class _NoProgress:
    """What the ``sleep`` tool reads of its context (``meta``), one for every call: the floor
    that runs the tool gives it no per-request context of its own."""

    __slots__ = ("meta",)

    def __init__(self) -> None:
        self.meta: dict[str, Any] = {}


async def bench_parked_floor_tool(n: int) -> float:
    tool = build(None).tools.get("sleep").fn
    context = _NoProgress()

    async def parked(params: dict[str, Any]) -> None:
        with trio.CancelScope():
            await tool(seconds=float(params["arguments"]["seconds"]), ctx=context)

    return await parked_in_bare_tasks(n, parked)


async def parked_in_bare_tasks(
    n: int, parked: Callable[[dict[str, Any]], Awaitable[None]]
) -> float:
    """Bytes per task of ``n`` bare tasks, each running ``parked`` on a parsed request's params
    until every one is blocked."""
    async with trio.open_nursery() as nursery:
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.take_snapshot()
        for line in sleep_requests(n):
            nursery.start_soon(parked, orjson.loads(line)["params"])
        await trio.testing.wait_all_tasks_blocked()
        grown = traced_bytes(before)
        tracemalloc.stop()
        nursery.cancel_scope.cancel()
    return grown / n


async def bench_writer(n: int) -> float:
    writer = EventWriter(MemoryEventStore())
    meta = StreamMeta("s")
    async with trio.open_nursery() as nursery:
        await nursery.start(writer.run)
        start = time.process_time()
        for i in range(n):
            stream = EventStream("s", f"r{i}", writer, meta=meta)
            stream.push(b'{"jsonrpc":"2.0","id":1,"result":{}}')
            stream.finish(responded=True)
            await trio.lowlevel.checkpoint()
            stream.delivered()
        await writer.flush()
        spent = time.process_time() - start
        nursery.cancel_scope.cancel()
    return spent * 1e6 / n


# -- the HTTP app, with no server between -------------------------------------------------------

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def http_scope(headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    base = [
        (b"host", b"127.0.0.1:8000"),
        (b"accept", b"application/json, text/event-stream"),
        (b"content-type", b"application/json"),
    ]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": base + headers,
        "client": ("127.0.0.1", 5555),
        "server": ("127.0.0.1", 8000),
    }


async def http_post(app: Any, scope: dict[str, Any], body: bytes) -> list[dict[str, Any]]:
    """One POST, as hypercorn hands it over: the body at once, a checkpoint per send, and the
    end of a complete response reported as a disconnect."""
    sent: list[dict[str, Any]] = []
    given = False
    ended = trio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        await ended.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            ended.set()
        await trio.lowlevel.checkpoint()

    await app(dict(scope), receive, send)
    return sent


async def bench_http(mode: str, n: int) -> float:
    """CPU (process time) per POST of ``tools/call echo`` through trio_mcp's ASGI app alone:
    ``modern`` (2026-07-28, no session), ``sse`` or ``json`` (one handshake-era session)."""
    app = build(None).http_app(HttpOptions(json_response=mode == "json"))
    async with app.running():
        if mode == "modern":
            scope = http_scope(
                [
                    (b"mcp-protocol-version", b"2026-07-28"),
                    (b"mcp-method", b"tools/call"),
                    (b"mcp-name", b"echo"),
                ]
            )
            params: dict[str, Any] = {"name": "echo", "_meta": MODERN_META}
        else:
            opened = await http_post(app, http_scope([]), INITIALIZE)
            session = dict(opened[0]["headers"])[b"mcp-session-id"]
            scope = http_scope(
                [(b"mcp-protocol-version", b"2025-06-18"), (b"mcp-session-id", session)]
            )
            await http_post(app, scope, INITIALIZED)
            params = {"name": "echo"}
        bodies = [
            orjson.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "tools/call",
                    "params": {**params, "arguments": {"text": f"hello {i}"}},
                }
            )
            for i in range(1, n + 1)
        ]
        answer = await http_post(app, scope, bodies[0])
        assert b"hello 1" in b"".join(m.get("body", b"") for m in answer), answer
        start = time.process_time()
        for body in bodies[1:]:
            await http_post(app, scope, body)
        return (time.process_time() - start) * 1e6 / (n - 1)


def main(argv: list[str]) -> int:
    spec: dict[str, Any] = json.loads(argv[0]) if argv else {}
    n = int(spec.get("messages", 20000))
    batch = int(spec.get("batch", 10))
    parked = int(spec.get("parked", 5000))
    http = max(2, n // 10)
    lines = echo_requests(n)
    figures: dict[str, Callable[[], float]] = {
        "parse": lambda: bench_parse(lines),
        "floor_work": lambda: bench_floor_work(lines),
        "engine": lambda: trio.run(bench_engine, lines, 1),
        "engine_batched": lambda: trio.run(bench_engine, lines, batch),
        "engine_loaded": lambda: trio.run(bench_engine, lines, 1, parked),
        "memory_roundtrip": lambda: trio.run(bench_memory_roundtrip, max(1, n // 4)),
        "parked_bytes": lambda: trio.run(bench_parked, parked),
        "parked_bytes_floor": lambda: trio.run(bench_parked_floor, parked),
        "parked_bytes_floor_tool": lambda: trio.run(bench_parked_floor_tool, parked),
        "writer_us": lambda: trio.run(bench_writer, n),
        **{
            f"http_{mode}_us": functools.partial(trio.run, bench_http, mode, http)
            for mode in HTTP_MODES
        },
    }
    only = spec.get("only")
    if only is not None:
        # One figure alone, with no warm-up: what an instruction count (callgrind, two values
        # of ``messages``) is taken over.
        if only not in figures:
            raise SystemExit(f"inprocess.py: no figure {only!r}; one of {', '.join(figures)}")
        sys.stdout.write(json.dumps({only: figures[only]()}) + "\n")
        return 0
    warm = echo_requests(min(n, 500))
    bench_parse(warm)
    bench_floor_work(warm)
    trio.run(bench_engine, warm, 1)
    out: dict[str, Any] = {"messages": n, "batch": batch}
    out.update((name, figure()) for name, figure in figures.items())
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
