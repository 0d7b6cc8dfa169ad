"""The floor: a bare Trio program that answers newline-delimited JSON over stdin/stdout.

    python floor_server.py [--stamps PATH] [--tasks]

No MCP library at all. One task reads lines, decodes each with orjson and answers it with one
``send_all`` (as trio_mcp's stdio transport writes), on private copies of fd 0 and 1.

- A request gets ``{"jsonrpc", "id", "result"}`` whose result has the shape an MCP server gives
  ``tools/call echo``: ``params.arguments.text`` in one text content block. Inline: no task.
  With ``--tasks``, each request is answered by a task of its own under a ``CancelScope`` of
  its own, kept in a table by id while it runs (what a server that can cancel any request must
  do at the least, and what trio_mcp does): the floor of that design. Answers that are ready
  while another is being written go out with the next write, as trio_mcp's writer sends them.
- A request whose ``params.name`` is ``sleep`` gets what the cancel benchmark needs and no more:
  its own task under its own ``CancelScope`` (as trio_mcp gives every request) sending a
  progress line every 100 ms; a ``notifications/cancelled`` line cancels that scope, and the
  task's ``finally`` appends a CLOCK_MONOTONIC timestamp (ns) to the stamps file, like the
  benchmark servers' ``sleep`` tools. This is the floor for server-observed cancel latency.
- Two concessions so that an unmodified MCP client can drive it too: a canned answer to
  ``initialize``; other lines without an id are ignored.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import orjson
import trio

INITIALIZE_RESULT = {
    "protocolVersion": "2025-06-18",
    "capabilities": {"tools": {}},
    "serverInfo": {"name": "bare-trio-floor", "version": "0.0.0"},
}


def answer(message: Any) -> bytes | None:
    """The reply line to one decoded message (None for a notification)."""
    if not isinstance(message, dict) or message.get("id") is None:
        return None
    if message.get("method") == "initialize":
        params = message.get("params") or {}
        version = params.get("protocolVersion") or INITIALIZE_RESULT["protocolVersion"]
        result: dict[str, Any] = {**INITIALIZE_RESULT, "protocolVersion": version}
    else:
        text = ((message.get("params") or {}).get("arguments") or {}).get("text", "")
        result = {"content": [{"type": "text", "text": text}]}
    return orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + b"\n"


class Floor:
    def __init__(self, send: trio.lowlevel.FdStream, stamps_fd: int | None, tasks: bool) -> None:
        self.stream = send
        self.stamps_fd = stamps_fd
        self.tasks = tasks
        #: Lines waiting while a task writes: that task writes them next, all together.
        self.outbox: list[bytes] = []
        self.writing = False
        #: The scope of each request running in a task of its own, by id: what a cancel names.
        self.scopes: dict[Any, trio.CancelScope] = {}

    async def send(self, line: bytes) -> None:
        self.outbox.append(line)
        if self.writing:
            return
        self.writing = True
        try:
            while self.outbox:
                lines, self.outbox = self.outbox, []
                await self.stream.send_all(b"".join(lines))
        finally:
            self.writing = False

    async def answer_in_task(self, message: Any, scope: trio.CancelScope) -> None:
        try:
            with scope:
                reply = answer(message)
                if reply is not None:
                    await self.send(reply)
        finally:
            if self.scopes.get(message["id"]) is scope:
                del self.scopes[message["id"]]

    async def sleep(self, rid: Any, params: dict[str, Any], scope: trio.CancelScope) -> None:
        seconds = float((params.get("arguments") or {}).get("seconds", 0))
        token = (params.get("_meta") or {}).get("progressToken")
        finished = False
        try:
            with scope:
                deadline = trio.current_time() + seconds
                tick = 0
                while trio.current_time() < deadline:
                    await trio.sleep_until(min(deadline, trio.current_time() + 0.1))
                    tick += 1
                    if token is not None:
                        note = {"progressToken": token, "progress": tick / 10, "total": seconds}
                        await self.send(
                            orjson.dumps(
                                {
                                    "jsonrpc": "2.0",
                                    "method": "notifications/progress",
                                    "params": note,
                                }
                            )
                            + b"\n"
                        )
                finished = True
        finally:
            if not finished and self.stamps_fd is not None:
                os.write(
                    self.stamps_fd, f"{time.clock_gettime_ns(time.CLOCK_MONOTONIC)}\n".encode()
                )
            if self.scopes.get(rid) is scope:
                del self.scopes[rid]
        if finished:
            result = {"content": [{"type": "text", "text": f"slept {seconds:g}s"}]}
            await self.send(orjson.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + b"\n")

    async def handle(self, message: Any, nursery: trio.Nursery) -> None:
        if isinstance(message, dict):
            params = message.get("params") or {}
            if message.get("method") == "notifications/cancelled":
                scope = self.scopes.get(params.get("requestId"))
                if scope is not None:
                    scope.cancel()
                return
            if params.get("name") == "sleep" and message.get("id") is not None:
                scope = trio.CancelScope()
                self.scopes[message["id"]] = scope
                nursery.start_soon(self.sleep, message["id"], params, scope)
                return
            if self.tasks and message.get("id") is not None:
                scope = self.scopes[message["id"]] = trio.CancelScope()
                nursery.start_soon(self.answer_in_task, message, scope)
                return
        reply = answer(message)
        if reply is not None:
            await self.send(reply)


async def serve(stamps_fd: int | None, tasks: bool) -> None:
    receive = trio.lowlevel.FdStream(os.dup(0))
    send = trio.lowlevel.FdStream(os.dup(1))
    floor = Floor(send, stamps_fd, tasks)
    buffer = bytearray()
    async with receive, send, trio.open_nursery() as nursery:
        while True:
            chunk = await receive.receive_some(65536)
            if not chunk:
                nursery.cancel_scope.cancel()
                return
            buffer += chunk
            while (newline := buffer.find(b"\n")) >= 0:
                line = bytes(buffer[:newline])
                del buffer[: newline + 1]
                if line.strip():
                    await floor.handle(orjson.loads(line), nursery)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stamps", help="append cancellation timestamps (ns) to this file")
    parser.add_argument("--tasks", action="store_true", help="a task and a scope per request")
    args = parser.parse_args()
    fd = None
    if args.stamps:
        fd = os.open(args.stamps, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    trio.run(serve, fd, args.tasks)


if __name__ == "__main__":
    main()
