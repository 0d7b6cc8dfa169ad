"""A raw JSON-RPC peer for tests: send exact frames to a server and read exact frames back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
import trio

from trio_mcp import Server
from trio_mcp.transports import MemoryTransport, memory_transport_pair


class WirePeer:
    def __init__(self, transport: MemoryTransport) -> None:
        self.transport = transport

    async def send(self, message: Any) -> None:
        await self.transport.send(orjson.dumps(message))

    async def send_raw(self, data: bytes) -> None:
        await self.transport.send(data)

    async def recv(self) -> Any:
        # A hang guard: with an autojump clock a missing frame fails at once instead of hanging.
        with trio.fail_after(60):
            return orjson.loads(await self.transport.receive())

    async def recv_within(self, seconds: float) -> Any | None:
        """The next frame, or None if nothing arrives in time (use with an autojump clock)."""
        with trio.move_on_after(seconds):
            return await self.recv()
        return None

    async def request(self, rid: Any, method: str, params: Any = None) -> Any:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        return await self.recv()

    async def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    async def cancel(self, rid: Any, reason: str | None = None) -> None:
        params: dict[str, Any] = {"requestId": rid}
        if reason is not None:
            params["reason"] = reason
        await self.notify("notifications/cancelled", params)

    async def initialize(
        self, version: str = "2025-11-25", capabilities: Any = None, rid: Any = "init"
    ) -> Any:
        response = await self.request(
            rid,
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": capabilities or {},
                "clientInfo": {"name": "wire", "version": "0"},
            },
        )
        await self.notify("notifications/initialized")
        return response


@asynccontextmanager
async def wire_to(server: Server, *, initialize: bool = True) -> AsyncIterator[WirePeer]:
    """Serve ``server`` in memory and give the test the other end as a raw peer."""
    ours, theirs = memory_transport_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.serve_transport, theirs)
        peer = WirePeer(ours)
        if initialize:
            response = await peer.initialize()
            assert "result" in response, response
        yield peer
        ours.close()
        nursery.cancel_scope.cancel()
