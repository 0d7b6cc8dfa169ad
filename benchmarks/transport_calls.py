"""The HTTP+SSE and WebSocket transports in process: a fixed number of calls, counted, not timed.

    python benchmarks/transport_calls.py sse|ws [--calls N] [--floor] [--profile] [--plain]

Drives trio_mcp's ASGI app directly (no ASGI server, no socket) as ``peers/http_driver.mjs``
drives it under hypercorn's trio worker, one session and one call at a time:

- ``sse``: the 2024-11-05 HTTP+SSE transport. A ``GET /sse`` stream runs in a task of its own
  (its ``receive`` waits for the disconnect that ends the run); once its ``endpoint`` event
  named the messages URL, each call is a ``POST /messages/?session_id=...`` (the body at once,
  a checkpoint per ``send``) answered 202, and then the wait for its answer down the stream.
- ``ws``: a WebSocket on ``/ws`` (subprotocol ``mcp``). The socket's ``receive`` reads a memory
  channel the driver writes each call's text frame to, as hypercorn's connection task hands
  frames to the app; the call ends when the answer's frame is sent.

Either way the session opens with ``initialize`` and ``notifications/initialized`` (the
handshake era: ``2024-11-05`` over HTTP+SSE, ``2025-06-18`` over WebSocket), then makes N
``tools/call echo`` calls. ``--floor`` drives the bare ASGI floor of
``peers/floor_http_server.py`` instead. Prints, per call: the CPU time (process time: noisy on
a loaded machine), the task steps trio ran (each a pass through its scheduler) and the Python
function calls (cProfile's count; not with ``--plain``). ``--profile`` adds the top functions
by own time.

For an instruction count per call, run it under callgrind with two N and divide the
difference of the two totals by the difference of N (as for ``modern_post.py``)::

    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python benchmarks/transport_calls.py sse --plain --calls 1200   # then --calls 200
"""

from __future__ import annotations

import argparse
import cProfile
import json
import math
import pstats
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

from inprocess import http_post
from modern_post import Steps
from trio_server import build

from trio_mcp.http import HttpOptions

VERSIONS = {"sse": "2024-11-05", "ws": "2025-06-18"}


def messages(transport: str, calls: int) -> list[bytes]:
    """The session's messages: the handshake, then the calls."""
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": VERSIONS[transport],
            "capabilities": {},
            "clientInfo": {"name": "transport-calls", "version": "0.0.0"},
        },
    }
    out = [
        orjson.dumps(init),
        orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ]
    for i in range(1, calls + 1):
        params = {"name": "echo", "arguments": {"text": f"hello {i}"}}
        out.append(
            orjson.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params})
        )
    return out


def http_scope(method: str, path: str, query: bytes, headers: list[tuple[bytes, bytes]]) -> Any:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.1"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8000"), *headers],
        "client": ("127.0.0.1", 5555),
        "server": ("127.0.0.1", 8000),
    }


class Answers:
    """What came back to the client, by request id, and a wait for one of them."""

    def __init__(self) -> None:
        self.got: dict[Any, Any] = {}
        self._want: Any = None
        self._event: trio.Event | None = None

    def add(self, data: bytes | str) -> None:
        message = orjson.loads(data)
        for item in message if isinstance(message, list) else [message]:
            self.got[item.get("id")] = item
            if self._event is not None and item.get("id") == self._want:
                self._event.set()

    async def wait(self, rid: Any) -> Any:
        if rid not in self.got:
            self._want, self._event = rid, trio.Event()
            await self._event.wait()
            self._event = None
        return self.got.pop(rid)


class SseClient:
    """A GET stream in its own task, and POSTs made in the caller's task."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.answers = Answers()
        self.endpoint: bytes | None = None
        self.announced = trio.Event()
        self.gone = trio.Event()
        self.pending = b""

    async def stream(self) -> None:
        given = False

        async def receive() -> dict[str, Any]:
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await self.gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                self.feed(message.get("body", b""))
            await trio.lowlevel.checkpoint()

        scope = http_scope("GET", "/sse", b"", [(b"accept", b"text/event-stream")])
        await self.app(scope, receive, send)

    def feed(self, data: bytes) -> None:
        self.pending += data
        while b"\n\n" in self.pending:
            block, self.pending = self.pending.split(b"\n\n", 1)
            event, body = b"message", []
            for line in block.split(b"\n"):
                field, _, value = line.partition(b":")
                value = value.removeprefix(b" ")
                if field == b"event":
                    event = value
                elif field == b"data":
                    body.append(value)
            if not body:
                continue
            if event == b"endpoint":
                self.endpoint = body[0]
                self.announced.set()
            elif event == b"message":
                self.answers.add(b"\n".join(body))

    async def open(self, nursery: trio.Nursery) -> None:
        nursery.start_soon(self.stream)
        await self.announced.wait()

    async def call(self, body: bytes, rid: Any) -> Any:
        assert self.endpoint is not None
        path, _, query = self.endpoint.partition(b"?")
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        scope = http_scope("POST", path.decode(), query, headers)
        status = (await http_post(self.app, scope, body))[0]["status"]
        assert status == 202, status
        return None if rid is None else await self.answers.wait(rid)

    def close(self) -> None:
        self.gone.set()


class WsClient:
    """A socket served in its own task; its frames go through a memory channel."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.answers = Answers()
        self.frames, self._frames = trio.open_memory_channel[dict[str, Any]](math.inf)
        self.accepted = trio.Event()

    async def socket(self) -> None:
        async def receive() -> dict[str, Any]:
            return await self._frames.receive()

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "websocket.accept":
                assert message.get("subprotocol") == "mcp", message
                self.accepted.set()
            elif message["type"] == "websocket.send":
                self.answers.add(message["text"])
            await trio.lowlevel.checkpoint()

        scope = {
            **http_scope("GET", "/ws", b"", []),
            "type": "websocket",
            "scheme": "ws",
            "subprotocols": ["mcp"],
            "extensions": {"websocket.http.response": {}},
        }
        await self.app(scope, receive, send)

    async def open(self, nursery: trio.Nursery) -> None:
        nursery.start_soon(self.socket)
        self.frames.send_nowait({"type": "websocket.connect"})
        await self.accepted.wait()

    async def call(self, body: bytes, rid: Any) -> Any:
        self.frames.send_nowait({"type": "websocket.receive", "text": body.decode()})
        if rid is None:
            await trio.lowlevel.checkpoint()
            return None
        return await self.answers.wait(rid)

    def close(self) -> None:
        self.frames.send_nowait({"type": "websocket.disconnect", "code": 1000})


async def drive(
    app: Any, transport: str, calls: int, profiler: cProfile.Profile | None
) -> dict[str, Any]:
    bodies = messages(transport, calls)
    client = SseClient(app) if transport == "sse" else WsClient(app)
    async with trio.open_nursery() as nursery:
        await client.open(nursery)
        reply = await client.call(bodies[0], 0)
        assert "result" in reply, reply
        await client.call(bodies[1], None)
        reply = await client.call(bodies[2], 1)  # warm: caches, first-use imports
        assert reply["result"]["content"][0]["text"] == "hello 1", reply
        steps = Steps()
        trio.lowlevel.add_instrument(steps)
        start = time.process_time()
        steps.on = True
        if profiler is not None:
            profiler.enable()
        for rid, body in enumerate(bodies[3:], start=2):
            await client.call(body, rid)
        if profiler is not None:
            profiler.disable()
        steps.on = False
        cpu = time.process_time() - start
        trio.lowlevel.remove_instrument(steps)
        client.close()
    n = calls - 1
    return {"cpu_us": cpu * 1e6 / n, "steps": steps.steps / n}


async def run_ours(transport: str, calls: int, profiler: cProfile.Profile | None) -> Any:
    app = build(None).http_app(HttpOptions())
    async with app.running():
        return await drive(app, transport, calls, profiler)


async def run_floor(transport: str, calls: int, profiler: cProfile.Profile | None) -> Any:
    from floor_http_server import app

    return await drive(app, transport, calls, profiler)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("transport", choices=["sse", "ws"])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--floor", action="store_true", help="the bare ASGI floor instead")
    parser.add_argument("--profile", action="store_true", help="print the top functions")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--plain", action="store_true", help="no profiled run (for callgrind)")
    args = parser.parse_args(argv)
    run = run_floor if args.floor else run_ours
    timed = trio.run(run, args.transport, args.calls, None)
    out = {
        "what": ("floor " if args.floor else "") + args.transport,
        "calls": args.calls - 1,
        "cpu_us_per_call": round(timed["cpu_us"], 2),
        "task_steps_per_call": round(timed["steps"], 2),
    }
    if args.plain:
        sys.stdout.write(json.dumps(out) + "\n")
        return 0
    profiler = cProfile.Profile()
    trio.run(run, args.transport, args.calls, profiler)
    stats = pstats.Stats(profiler)
    out["calls_per_call"] = round(stats.total_calls / (args.calls - 1), 2)  # type: ignore[attr-defined]
    sys.stdout.write(json.dumps(out) + "\n")
    if args.profile:
        stats.sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
