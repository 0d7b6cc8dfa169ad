"""A stdio server child spoken to with exact bytes: the harness of the raw-wire stdio tests.

``raw_child(command)`` spawns the server with pipes on all three fds, collects its stderr in the
background (so a test can check what it logged), and hands the test a :class:`RawChild` that
writes any bytes and reads back whole lines, each read bounded so that a hang fails the test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import trio

ROOT = Path(__file__).resolve().parent.parent
SERVERS = Path(__file__).resolve().parent / "servers"
DEMO = [sys.executable, "-m", "trio_mcp", "demo"]
#: A hang guard for one read, never a performance assertion.
READ_GUARD = 20


class RawChild:
    """The test's end of a server child: exact frames out, whole lines in, stderr kept."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.stderr = bytearray()
        self._buffer = bytearray()
        self._eof = False

    async def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(data)

    async def send(self, message: Any) -> None:
        await self.send_raw(orjson.dumps(message) + b"\n")

    async def close_input(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.aclose()

    async def line(self, guard: float = READ_GUARD) -> bytes | None:
        """The next line the child writes (without its newline), or None at end of output."""
        assert self.process.stdout is not None
        with trio.fail_after(guard):
            while True:
                newline = self._buffer.find(b"\n")
                if newline >= 0:
                    line = bytes(self._buffer[:newline])
                    del self._buffer[: newline + 1]
                    return line
                if self._eof:
                    return None
                chunk = await self.process.stdout.receive_some(1 << 16)
                if not chunk:
                    self._eof = True
                else:
                    self._buffer += chunk

    async def recv(self, guard: float = READ_GUARD) -> Any:
        line = await self.line(guard)
        assert line is not None, "the child closed its output"
        return orjson.loads(line)

    async def request(self, rid: Any, method: str, params: Any = None) -> Any:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        return await self.recv()

    async def initialize(self, version: str = "2025-11-25") -> Any:
        response = await self.request(
            "init",
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        )
        assert "result" in response, response
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return response


async def _collect(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
    async for chunk in stream:
        into += chunk


@asynccontextmanager
async def raw_child(
    command: list[str] | None = None, *, env: dict[str, str] | None = None
) -> AsyncIterator[RawChild]:
    """Spawn ``command`` (the demo by default), with ``env`` added to this process's
    environment; at the end close its input, wait (bounded), then kill it."""
    process = await trio.lowlevel.open_process(
        command or DEMO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=None if env is None else {**os.environ, **env},
    )
    child = RawChild(process)
    try:
        async with trio.open_nursery() as nursery:
            assert process.stderr is not None
            nursery.start_soon(_collect, process.stderr, child.stderr)
            try:
                yield child
            finally:
                with trio.CancelScope(shield=True):
                    if process.stdin is not None:
                        await process.stdin.aclose()
                    with trio.move_on_after(5):
                        await process.wait()
                    if process.returncode is None:
                        process.kill()
                        await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
