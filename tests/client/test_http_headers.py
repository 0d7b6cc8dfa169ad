"""The modern client's ``Mcp-Param-*`` headers (2026-07-28): what a tool's ``x-mcp-header``
declarations ask for, the tools a client must refuse, and the re-list and retry on -32020."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import pytest
import trio

from trio_mcp import Server, open_client
from trio_mcp._exceptions import collapse_exception_groups
from trio_mcp.transports import memory_transport_pair
from trio_mcp.transports._http_client import modern_headers, param_value, tool_param_headers

from .._http import GUARD, Recorder, serving_app, text_of
from ..wire import WirePeer

MODERN = "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN}


def schema(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


# -- the declarations ------------------------------------------------------------------------------


def test_declarations_are_found_through_properties_alone() -> None:
    declared = schema(
        region={"type": "string", "x-mcp-header": "Region"},
        count={"type": "integer", "x-mcp-header": "Count"},
        dry={"type": ["boolean", "null"], "x-mcp-header": "Dry-Run"},
        maybe={"anyOf": [{"type": "string"}, {"type": "null"}], "x-mcp-header": "Maybe"},
        tier={"enum": ["gold", "silver"], "x-mcp-header": "Tier"},
        where={"type": "object", "properties": {"zone": {"type": "string", "x-mcp-header": "Z"}}},
        query={"type": "string"},
    )
    assert tool_param_headers(declared) == {
        ("region",): "Region",
        ("count",): "Count",
        ("dry",): "Dry-Run",
        ("maybe",): "Maybe",
        ("tier",): "Tier",
        ("where", "zone"): "Z",
    }
    assert tool_param_headers(schema(query={"type": "string"})) == {}
    assert tool_param_headers(None) == {}
    # A property merely named like a keyword is still a property.
    assert tool_param_headers(schema(items={"type": "string", "x-mcp-header": "I"})) == {
        ("items",): "I"
    }


@pytest.mark.parametrize(
    "bad",
    [
        schema(v={"type": "string", "x-mcp-header": ""}),
        schema(v={"type": "string", "x-mcp-header": "My Region"}),
        schema(v={"type": "string", "x-mcp-header": "Region:Primary"}),
        schema(v={"type": "string", "x-mcp-header": "Région"}),
        schema(v={"type": "string", "x-mcp-header": "Region\t1"}),
        schema(v={"type": "string", "x-mcp-header": 7}),
        schema(v={"type": "object", "x-mcp-header": "Data"}),
        schema(v={"type": "array", "items": {"type": "string"}, "x-mcp-header": "Items"}),
        schema(v={"type": "null", "x-mcp-header": "Nil"}),
        schema(v={"type": "number", "x-mcp-header": "Ratio"}),
        schema(v={"x-mcp-header": "Untyped"}),
        schema(v={"type": {"weird": 1}, "x-mcp-header": "Odd"}),
        schema(v={"anyOf": [{"type": "string"}, {"type": "number"}], "x-mcp-header": "Mixed"}),
        schema(v={"anyOf": [{"type": "string"}, {"not": {}}], "x-mcp-header": "Vague"}),
        schema(v={"enum": ["a", 1.5], "x-mcp-header": "Ratio"}),
        schema(
            a={"type": "string", "x-mcp-header": "MyField"},
            b={"type": "string", "x-mcp-header": "myfield"},
        ),
        schema(v={"type": "array", "items": {"type": "string", "x-mcp-header": "Item"}}),
        schema(v={"anyOf": [{"type": "string", "x-mcp-header": "Either"}]}),
        {**schema(), "$defs": {"d": {"type": "string", "x-mcp-header": "Def"}}},
        {"type": "string", "x-mcp-header": "Root"},
    ],
)
def test_invalid_declarations_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="x-mcp-header"):
        tool_param_headers(bad)


def test_values_are_written_as_headers_carry_them() -> None:
    assert param_value("us-west1") == "us-west1"
    assert param_value("") == ""
    assert param_value("us west 1") == "us west 1"
    for unsafe in ("Hello, 世界", " padded", "line1\r\nline2", "\tx", "=?base64?x?="):
        assert param_value(unsafe) == b64(unsafe)
    assert (param_value(True), param_value(False)) == ("true", "false")
    assert (param_value(42), param_value(42.0), param_value(2.5)) == ("42", "42", "2.5")
    for absent in (None, {"a": 1}, [1], float("nan")):
        assert param_value(absent) is None


def test_only_tools_calls_mirror_the_present_arguments() -> None:
    mirrored = {"t": {("region",): "Region", ("verbose",): "Verbose", ("at", "zone"): "Zone"}}
    params = {
        "_meta": ENVELOPE,
        "name": "t",
        "arguments": {"region": "eu", "verbose": None, "at": {"zone": "b"}, "q": "x"},
    }
    assert modern_headers("tools/call", params, mirrored) == {
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": "t",
        "Mcp-Param-Region": "eu",
        "Mcp-Param-Zone": "b",
    }
    assert "Mcp-Param-Region" not in modern_headers("prompts/get", params, mirrored)
    assert modern_headers("tools/call", {**params, "_meta": {}}, mirrored) == {}


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
