"""The modern client's ``Mcp-Param-*`` headers (2026-07-28) against real servers: a listed
tool's headers are sent and accepted, tools a client must refuse are dropped, and a -32020
refusal re-lists the tools and retries."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import pytest
import trio

from trio_mcp import ProtocolError, Server, open_client
from trio_mcp._exception_groups import collapse_exception_groups
from trio_mcp.transports import memory_transport_pair

from .._http import GUARD, Receive, Recorder, Scope, Seen, Send, serving_app, text_of
from ..wire import WirePeer

MODERN = "2026-07-28"


def schema(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


# -- against a real server -------------------------------------------------------------------------


def regional_server() -> Server:
    server = Server("regional", "1.0")

    @server.tool()
    async def deploy(
        region: Annotated[str, {"x-mcp-header": "Region"}],
        replicas: Annotated[int, {"x-mcp-header": "Replicas"}],
        zone: Annotated[str | None, {"x-mcp-header": "Zone"}] = None,
        note: str = "",
    ) -> str:
        return f"{region}x{replicas}" + (f"/{zone}" if zone else "")

    return server


async def test_a_listed_tool_gets_its_param_headers_and_the_server_accepts_them() -> None:
    app = Recorder(regional_server().http_app())
    with trio.fail_after(GUARD):
        async with serving_app(app) as url, open_client(url, mode="modern") as client:
            assert [t.name for t in await client.list_tools()] == ["deploy"]
            result = await client.call_tool(
                "deploy", {"region": "Zürich", "replicas": 3, "zone": "b", "note": "n"}
            )
            assert text_of(result) == "Zürichx3/b"
            result = await client.call_tool("deploy", {"region": "eu", "replicas": 1})
            assert text_of(result) == "eux1"
    calls = [
        {k: v for k, v in call.headers.items() if k.startswith("mcp-param-")}
        for call in app.posts("tools/call")
    ]
    assert calls == [
        {"mcp-param-region": b64("Zürich"), "mcp-param-replicas": "3", "mcp-param-zone": "b"},
        {"mcp-param-region": "eu", "mcp-param-replicas": "1"},
    ]


async def test_a_header_refusal_relists_the_tools_and_retries_once() -> None:
    app = Recorder(regional_server().http_app())
    with trio.fail_after(GUARD):
        async with serving_app(app) as url, open_client(url, mode="modern") as client:
            # Never listed: the client cannot know the headers, the server refuses (-32020).
            result = await client.call_tool("deploy", {"region": "eu", "replicas": 2})
            assert text_of(result) == "eux2"
    sequence = [s.rpc_method for s in app.seen if s.rpc_method != "server/discover"]
    assert sequence == ["tools/call", "tools/list", "tools/call"]
    assert [s.status for s in app.posts("tools/call")] == [400, 200]
    first, retry = app.posts("tools/call")
    assert first.json["id"] != retry.json["id"]


async def test_a_float_argument_for_an_integer_parameter_succeeds_end_to_end() -> None:
    """``2.0`` is the integer 2: the client sends ``2`` and the server agrees, first time."""
    app = Recorder(regional_server().http_app())
    with trio.fail_after(GUARD):
        async with serving_app(app) as url, open_client(url, mode="modern") as client:
            await client.list_tools()
            result = await client.call_tool("deploy", {"region": "eu", "replicas": 2.0})
            assert text_of(result) == "eux2"
    (call,) = app.posts("tools/call")  # no -32020 and no retry
    assert call.status == 200
    assert call.json["params"]["arguments"]["replicas"] == 2.0
    assert call.headers["mcp-param-replicas"] == "2"


#: A tool whose declared header sits inside a nested object argument.
NESTED = {
    **schema(
        name={"type": "string"},
        target={
            "type": "object",
            "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}},
            "required": ["zone"],
        },
    ),
    "required": ["name", "target"],
}


def nested_server() -> Server:
    server = Server("nested", "1.0")

    @server.tool(input_schema=NESTED)
    async def place(name: str, target: dict[str, Any]) -> str:
        return f"{name}@{target['zone']}"

    return server


class Rewriting(Recorder):
    """An intermediary that changes one header on its way to the server."""

    def __init__(self, app: Any, header: bytes, value: bytes) -> None:
        super().__init__(app)
        self.header, self.value = header, value

    async def handle(self, seen: Seen, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(k, self.value if k.lower() == self.header else v) for k, v in scope["headers"]]
        await self.app({**scope, "headers": headers}, receive, send)


async def test_a_nested_declared_header_is_checked_by_the_server() -> None:
    arguments = {"name": "db", "target": {"zone": "b"}}
    app = Recorder(nested_server().http_app())
    with trio.fail_after(GUARD):
        async with serving_app(app) as url, open_client(url, mode="modern") as client:
            await client.list_tools()
            assert text_of(await client.call_tool("place", arguments)) == "db@b"
    (call,) = app.posts("tools/call")
    assert (call.status, call.headers["mcp-param-zone"]) == (200, "b")

    tampered = Rewriting(nested_server().http_app(), b"mcp-param-zone", b"c")
    with trio.fail_after(GUARD):
        async with serving_app(tampered) as url, open_client(url, mode="modern") as client:
            await client.list_tools()
            with pytest.raises(ProtocolError) as info:
                await client.call_tool("place", arguments)
    assert info.value.code == -32020
    assert "Mcp-Param-Zone header value 'c' does not match body value 'b'" in info.value.message
    # Refused before it ran, then refused again after the client re-listed and retried.
    assert [s.status for s in tampered.posts("tools/call")] == [400, 400]


# -- tools the client must not use -----------------------------------------------------------------

TOOLS = [
    {"name": "good", "inputSchema": schema(r={"type": "string", "x-mcp-header": "Region"})},
    {"name": "spaced", "inputSchema": schema(r={"type": "string", "x-mcp-header": "A B"})},
    {"name": "plain", "inputSchema": schema()},
    {"name": "numeric", "inputSchema": schema(r={"type": "number", "x-mcp-header": "N"})},
]


@asynccontextmanager
async def listing(tools: list[Any], **options: Any) -> AsyncIterator[Any]:
    """A raw peer of either era whose ``tools/list`` answers ``tools`` as they are."""
    ours, theirs = memory_transport_pair()
    peer = WirePeer(theirs)

    async def serve() -> None:
        while True:
            try:
                message = await peer.recv()
            except trio.EndOfChannel:
                return
            method, rid = message.get("method"), message.get("id")
            if method == "server/discover":
                result: Any = {"supportedVersions": [MODERN], "capabilities": {"tools": {}}}
            elif method == "initialize":
                result = {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "raw", "version": "1"},
                }
            elif method == "tools/list":
                result = {"tools": tools}
            else:
                continue
            await peer.send({"jsonrpc": "2.0", "id": rid, "result": result})

    with collapse_exception_groups():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve)
            try:
                async with open_client(ours, **options) as client:
                    yield client
            finally:
                nursery.cancel_scope.cancel()


async def test_a_modern_client_drops_tools_with_invalid_declarations_and_keeps_the_rest() -> None:
    with trio.fail_after(GUARD):
        async with listing(TOOLS, mode="modern") as client:
            assert [t.name for t in await client.list_tools()] == ["good", "plain"]
            raw = await client.request("tools/list")
            assert [t["name"] for t in raw["tools"]] == ["good", "plain"]
        # x-mcp-header means nothing before 2026-07-28: a handshake-era client keeps them all.
        async with listing(TOOLS, mode="legacy") as client:
            assert len(await client.list_tools()) == 4
