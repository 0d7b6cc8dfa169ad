"""Raw newline-delimited JSON against a real ``trio-mcp demo`` child process.

No client library on our side: the test writes exact frames to the server's stdin and reads
exact frames from its stdout.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from ._support import DEMO, HANG_GUARD

CLIENT_INFO = {"name": "raw-wire", "version": "0"}


class RawPeer:
    """One end of a newline-delimited JSON-RPC stream over a child's stdin and stdout."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._buffer = bytearray()

    async def send(self, *messages: Any) -> None:
        """Write the messages in one write, so the server reads them back to back."""
        await self._stdin.send_all(b"".join(json.dumps(m).encode() + b"\n" for m in messages))

    async def recv(self) -> Any:
        while (newline := self._buffer.find(b"\n")) < 0:
            chunk = await self._stdout.receive_some(65536)
            assert chunk, "the server closed its stdout"
            self._buffer += chunk
        line = bytes(self._buffer[:newline])
        del self._buffer[: newline + 1]
        return json.loads(line)

    async def initialize(self, version: str = "2025-11-25") -> Any:
        await self.send(
            {
                "jsonrpc": "2.0",
                "id": "init",
                "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": CLIENT_INFO,
                },
            }
        )
        response = await self.recv()
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return response


@asynccontextmanager
async def demo() -> AsyncIterator[RawPeer]:
    """``trio-mcp demo`` as a child process; on exit, close its stdin and wait (bounded)."""
    with trio.fail_after(HANG_GUARD):
        process = await trio.lowlevel.open_process(
            DEMO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        try:
            yield RawPeer(process)
            assert process.stdin is not None
            await process.stdin.aclose()
            assert await process.wait() == 0
        finally:
            if process.returncode is None:
                process.kill()
                with trio.CancelScope(shield=True):
                    await process.wait()


def tools_call(rid: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


async def test_a_duplicate_in_flight_id_is_refused_and_the_first_request_completes() -> None:
    async with demo() as peer:
        assert "result" in await peer.initialize()
        # Both in one write: the second arrives while the first (a 1 s sleep) is in flight.
        await peer.send(
            tools_call(7, "sleep", {"seconds": 1}), tools_call(7, "echo", {"text": "duplicate"})
        )
        refused = await peer.recv()
        assert refused["id"] == 7
        assert refused["error"]["code"] == -32600, refused
        completed = await peer.recv()
        assert completed == {
            "jsonrpc": "2.0",
            "id": 7,
            "result": {"content": [{"type": "text", "text": "slept 1s"}]},
        }


async def test_a_cancelled_notification_with_an_id_gets_method_not_found() -> None:
    async with demo() as peer:
        assert "result" in await peer.initialize()
        await peer.send(
            tools_call("s", "sleep", {"seconds": 0.5}),
            {
                "jsonrpc": "2.0",
                "id": 9,
                "method": "notifications/cancelled",
                "params": {"requestId": "s"},
            },
        )
        refused = await peer.recv()
        assert refused["id"] == 9
        assert refused["error"]["code"] == -32601, refused
        # Its handler never ran: the sleep it named was not cancelled, and completes.
        completed = await peer.recv()
        assert completed == {
            "jsonrpc": "2.0",
            "id": "s",
            "result": {"content": [{"type": "text", "text": "slept 0.5s"}]},
        }


async def test_initialize_asking_for_2026_07_28_is_answered_2025_11_25() -> None:
    async with demo() as peer:
        response = await peer.initialize("2026-07-28")
        assert response["id"] == "init"
        assert response["result"]["protocolVersion"] == "2025-11-25"
        assert response["result"]["serverInfo"]["name"] == "trio-mcp-demo"
        # The session is open at the counter-offered version.
        await peer.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        listed = await peer.recv()
        assert sorted(tool["name"] for tool in listed["result"]["tools"]) == [
            "add",
            "echo",
            "sleep",
        ]
