"""Raw JSON-RPC in WebSocket text frames against a real ``trio-mcp demo --transport ws`` child
process, and the URL commands with a ``ws://`` target.

No MCP library on our side: trio-websocket carries exact frames, as ``test_raw_wire.py`` writes
exact lines to a stdio child.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
from trio_websocket import WebSocketConnection, open_websocket_url

from ._support import DEMO, HANG_GUARD, ROOT

CLIENT_INFO = {"name": "raw-ws-wire", "version": "0"}


@asynccontextmanager
async def demo_over_ws() -> AsyncIterator[str]:
    """``trio-mcp demo --transport ws --port 0``; yields the WebSocket URL it announces, then
    stops it with SIGINT (a graceful shutdown) and checks it exits cleanly."""
    process = await trio.lowlevel.open_process(
        [*DEMO, "--transport", "ws", "--port", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stderr is not None
        seen = b""
        while (found := re.search(rb"serving MCP over WebSocket at (ws://\S+/ws)", seen)) is None:
            chunk = await process.stderr.receive_some(4096)
            assert chunk, seen
            seen += chunk
        yield found[1].decode()
        process.send_signal(signal.SIGINT)
        assert await process.wait() == 0
        while chunk := await process.stderr.receive_some(4096):
            seen += chunk
        assert b"Traceback" not in seen, seen.decode(errors="replace")
    finally:
        if process.returncode is None:
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()


class RawSocket:
    def __init__(self, ws: WebSocketConnection) -> None:
        self.ws = ws

    async def send(self, *messages: Any) -> None:
        for message in messages:
            await self.ws.send_message(json.dumps(message))

    async def recv(self) -> Any:
        return json.loads(await self.ws.get_message())

    async def initialize(self) -> Any:
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT_INFO}
        await self.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": params})
        response = await self.recv()
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return response


@asynccontextmanager
async def raw(url: str) -> AsyncIterator[RawSocket]:
    async with open_websocket_url(url, subprotocols=["mcp"]) as ws:
        peer = RawSocket(ws)
        assert (await peer.initialize())["result"]["serverInfo"]["name"] == "trio-mcp-demo"
        yield peer


def tools_call(rid: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def slept(rid: Any, seconds: str) -> dict[str, Any]:
    text = {"type": "text", "text": f"slept {seconds}s"}
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": [text]}}


async def test_the_seeds_over_a_websocket_to_a_child_process() -> None:
    with trio.fail_after(HANG_GUARD):
        async with demo_over_ws() as url:
            # A duplicate in-flight id is refused; the first request completes.
            async with raw(url) as peer:
                await peer.send(
                    tools_call(7, "sleep", {"seconds": 0.5}),
                    tools_call(7, "echo", {"text": "duplicate"}),
                )
                refused = await peer.recv()
                assert refused["id"] == 7 and refused["error"]["code"] == -32600, refused
                assert await peer.recv() == slept(7, "0.5")

            # notifications/cancelled with an id: Method not found, and its handler never ran.
            async with raw(url) as peer:
                cancel: dict[str, Any] = {"requestId": "s"}
                await peer.send(
                    tools_call("s", "sleep", {"seconds": 0.3}),
                    {
                        "jsonrpc": "2.0",
                        "id": 9,
                        "method": "notifications/cancelled",
                        "params": cancel,
                    },
                )
                refused = await peer.recv()
                assert refused["id"] == 9 and refused["error"]["code"] == -32601, refused
                assert await peer.recv() == slept("s", "0.3")

            # A cancel suppresses the response: request 1 would have ended at 0.6 s, request
            # 2 ends at about 1.2 s, and the next message is the answer to 2.
            async with raw(url) as peer:
                await peer.send(tools_call(1, "sleep", {"seconds": 0.6}))
                await trio.sleep(0.2)
                cancel = {"requestId": 1, "reason": "raw wire"}
                await peer.send(
                    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel},
                    tools_call(2, "sleep", {"seconds": 1}),
                )
                assert await peer.recv() == slept(2, "1")


async def test_the_url_commands_take_a_ws_target() -> None:
    with trio.fail_after(HANG_GUARD):
        async with demo_over_ws() as url:
            done = await trio.run_process(
                [sys.executable, "-m", "trio_mcp", "call", url, "add", "a=2", "b=3"],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                cwd=ROOT,
            )
            assert done.returncode == 0, done.stderr.decode()
            assert done.stdout.decode().strip() == "5"
            done = await trio.run_process(
                [sys.executable, "-m", "trio_mcp", "tools", url],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                cwd=ROOT,
            )
            assert done.returncode == 0, done.stderr.decode()
            assert "echo" in done.stdout.decode() and "sleep" in done.stdout.decode()
