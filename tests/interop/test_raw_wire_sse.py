"""The raw-wire seed checks of ``test_raw_wire.py``, over HTTP+SSE (2024-11-05), against the
demo in a child process (``demo_http_server.py``): no client library on our side, exact JSON
POSTed to the endpoint the stream names, exact events read from the stream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson
import trio

from .._http import SseReader
from ._http_support import ServerProcess, start_server
from ._support import HANG_GUARD
from .test_http_interop import CANCELLED, DEMO_HTTP, is_marker
from .test_raw_wire import CLIENT_INFO, tools_call


class SseWire:
    """One HTTP+SSE session spoken by hand."""

    def __init__(self, http: httpx.AsyncClient, reader: SseReader, endpoint: str) -> None:
        self.http = http
        self.reader = reader
        self.endpoint = endpoint

    async def send(self, message: Any) -> None:
        response = await self.http.post(
            self.endpoint,
            content=orjson.dumps(message),
            headers={"content-type": "application/json"},
        )
        assert response.status_code == 202, response.text

    async def recv(self) -> Any:
        """The next message that is not a progress notification."""
        while True:
            message = await self.reader.message()
            if message.get("method") != "notifications/progress":
                return message

    async def initialize(self) -> Any:
        params = {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": CLIENT_INFO}
        await self.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": params})
        response = await self.recv()
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return response


@asynccontextmanager
async def sse_demo(nursery: trio.Nursery) -> AsyncIterator[tuple[SseWire, ServerProcess]]:
    with trio.fail_after(HANG_GUARD):
        server = await start_server(nursery, DEMO_HTTP)
        base = server.url.removesuffix("/mcp")
        async with (
            httpx.AsyncClient(timeout=HANG_GUARD) as http,
            http.stream("GET", base + "/sse", headers={"accept": "text/event-stream"}) as stream,
        ):
            reader = SseReader(stream)
            first = await reader.next()
            assert first is not None and first.event == "endpoint", first
            wire = SseWire(http, reader, base + first.data)
            assert (await wire.initialize())["result"]["protocolVersion"] == "2024-11-05"
            yield wire, server


async def test_a_duplicate_in_flight_id_is_refused_and_the_first_request_completes(
    nursery: trio.Nursery,
) -> None:
    async with sse_demo(nursery) as (wire, _):
        await wire.send(tools_call(7, "sleep", {"seconds": 1}))
        await wire.send(tools_call(7, "echo", {"text": "duplicate"}))
        refused = await wire.recv()
        assert refused["id"] == 7
        assert refused["error"]["code"] == -32600, refused
        completed = await wire.recv()
        assert completed == {
            "jsonrpc": "2.0",
            "id": 7,
            "result": {"content": [{"type": "text", "text": "slept 1s"}]},
        }


async def test_a_cancelled_notification_with_an_id_gets_method_not_found(
    nursery: trio.Nursery,
) -> None:
    async with sse_demo(nursery) as (wire, _):
        await wire.send(tools_call("s", "sleep", {"seconds": 0.5}))
        await wire.send(
            {
                "jsonrpc": "2.0",
                "id": 9,
                "method": "notifications/cancelled",
                "params": {"requestId": "s"},
            }
        )
        refused = await wire.recv()
        assert refused["id"] == 9
        assert refused["error"]["code"] == -32601, refused
        # Its handler never ran: the sleep it named was not cancelled, and completes.
        completed = await wire.recv()
        assert completed == {
            "jsonrpc": "2.0",
            "id": "s",
            "result": {"content": [{"type": "text", "text": "slept 0.5s"}]},
        }


async def test_a_cancel_stops_the_handler_and_suppresses_its_response(
    nursery: trio.Nursery,
) -> None:
    async with sse_demo(nursery) as (wire, server):
        call = tools_call("long", "slow", {"steps": 100_000})
        call["params"]["_meta"] = {"progressToken": "long"}
        await wire.send(call)
        first = await wire.reader.message()
        assert first["method"] == "notifications/progress", first
        await wire.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "long"}}
        )
        assert await server.wait_for(is_marker) == f"{CANCELLED}long"
        # The next answer on the stream is the next request's: none ever comes for "long".
        await wire.send({"jsonrpc": "2.0", "id": "after", "method": "ping"})
        assert await wire.recv() == {"jsonrpc": "2.0", "id": "after", "result": {}}
