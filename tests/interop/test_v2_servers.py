"""trio_mcp's client drives a server built on the TypeScript SDK's second generation
(``@modelcontextprotocol/server`` 2.4.0, ``ts2_server.mjs``), over stdio and Streamable HTTP,
in both eras: the handshake (at 2025-11-25 and 2025-06-18) and 2026-07-28, which our client
reaches by its ``server/discover`` probe (``mode="auto"``).

The v2 server writes ``book`` and ``summarize`` once, returning ``inputRequired(...)``: in the
modern era that is a multi round-trip (the wire shows the retry with ``inputResponses`` and the
``requestState``); in the handshake era the SDK's shim sends real ``elicitation/create`` and
``sampling/createMessage`` requests, which our client answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from trio_mcp import CreateMessageResult, ElicitResult, HttpTarget, open_client
from trio_mcp.protocol._types import TextContent
from trio_mcp.testing import stdio_client

from ._http_support import ServerProcess, start_server
from ._support import (
    CLIENT_TO_SERVER,
    HANG_GUARD,
    HERE,
    check_cancelled_call,
    frames,
    node,
    read_records,
    recorded,
)
from .test_http_interop import WireLog, result_text

# Sampling is deprecated in 2026-07-28, yet the v2 server asks for it: our client says so.
pytestmark = pytest.mark.filterwarnings(
    "ignore:roots and sampling are deprecated:DeprecationWarning"
)

MODERN = "2026-07-28"
CANCELLED = "CANCELLED slow "
#: (mode, the handshake version offered) of each connection.
ERAS = [("legacy", "2025-11-25"), ("legacy", "2025-06-18"), ("auto", None)]


def ts2_server(transport: str) -> list[str]:
    return [node(), str(HERE / "ts2_server.mjs"), transport]


@attrs.frozen
class Peer:
    """What a peer server's surface says about it."""

    scheme: str
    #: Its server name (None: not checked, e.g. behind a proxy).
    name: str | None
    info: str


TS2 = Peer("ts2", "ts2-interop-server", "served by the TypeScript SDK v2")


class Asked:
    """Our client's answers to the server's questions, and what it was asked."""

    def __init__(self) -> None:
        self.questions: list[tuple[str, str]] = []

    def elicit(self, params: Any) -> ElicitResult:
        self.questions.append(("elicitation", params.message))
        # A peer may ask for the dates as such, or as fastmcp's wrapped scalar ("value").
        (field,) = params.requested_schema["properties"]
        return ElicitResult(action="accept", content={field: "1-3 May"})

    def sample(self, params: Any) -> CreateMessageResult:
        self.questions.append(("sampling", params.messages[0].content.text))
        return CreateMessageResult(role="assistant", content=TextContent("short"), model="trio")


class Markers:
    """The cancel markers a stdio peer wrote to its stderr."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._changed = trio.Event()

    def on_stderr(self, line: str) -> None:
        if line.startswith(CANCELLED):
            self.lines.append(line)
            self._changed.set()

    async def arrived(self) -> None:
        await self._changed.wait()

    async def cancelled(self, marker: str) -> None:
        await self._changed.wait()
        assert self.lines == [marker]


async def scenario(client: Any, asked: Asked, cancelled: Any, peer: Peer = TS2) -> Any:
    """Every feature once; returns the request id of the cancelled ``slow`` call."""
    if peer.name is not None:
        assert client.server_info.name == peer.name
    tools = sorted(tool.name for tool in await client.list_tools())
    assert tools == ["add", "book", "echo", "slow", "summarize"]
    assert result_text(await client.call_tool("echo", {"text": "hello"})) == "hello"
    assert float(result_text(await client.call_tool("add", {"a": 2, "b": 3}))) == 5
    assert result_text(await client.get_prompt("greet", {"name": "Ada"})) == "Please greet Ada."
    assert [r.uri for r in await client.list_resources()] == [f"{peer.scheme}://info"]
    templates = await client.list_resource_templates()
    assert [t.uri_template for t in templates] == [f"{peer.scheme}://greeting/{{name}}"]
    (info,) = (await client.read_resource(f"{peer.scheme}://info")).contents
    assert getattr(info, "text", None) == peer.info
    (greeting,) = (await client.read_resource(f"{peer.scheme}://greeting/Ada")).contents
    assert getattr(greeting, "text", None) == "Hello, Ada!"

    assert result_text(await client.call_tool("book", {"city": "Lisbon"})) == "Lisbon, 1-3 May"
    assert result_text(await client.call_tool("summarize", {"text": "x"})) == "summary: short"
    assert asked.questions == [("elicitation", "Which dates?"), ("sampling", "Summarize: x")]

    progress: list[tuple[float, float | None, str | None]] = []

    def record(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    assert result_text(await client.call_tool("slow", {"steps": 3}, on_progress=record)) == (
        "done 3"
    )
    assert progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]

    # Cancel our caller's scope at the first progress: the peer's handler must stop while we
    # are still connected (a handler that went on would trip the hang guard).
    request_id = client.new_request_id()
    with trio.CancelScope() as scope:
        await client.call_tool(
            "slow", {"steps": 100_000}, request_id=request_id, on_progress=lambda *_: scope.cancel()
        )
    assert scope.cancelled_caught
    await cancelled(f"{CANCELLED}{request_id}")
    assert result_text(await client.call_tool("echo", {"text": "still here"})) == "still here"
    return request_id


def check_era(client: Any, mode: str, version: str | None) -> None:
    modern = mode == "auto"
    assert client.modern is modern
    assert client.protocol_version == (MODERN if modern else version)


#: The modern era's rounds of the asking tools: asked, then retried with the answer. The v2
#: server mints no ``requestState`` (the spec: a server "MUST include at least one of
#: inputRequests or requestState"), and our client, rightly, sends none back (a client "MUST NOT
#: send one if none was given").
MODERN_ROUNDS = [
    ("book", [], False),
    ("book", ["dates"], False),
    ("summarize", [], False),
    ("summarize", ["summary"], False),
]


def rounds(calls: list[dict[str, Any]]) -> list[tuple[str, list[str], bool]]:
    return [
        (c["name"], sorted(c.get("inputResponses") or []), "requestState" in c)
        for c in calls
        if c.get("name") in ("book", "summarize")
    ]


async def test_our_client_drives_a_v2_server_over_stdio_in_both_eras(tmp_path: Path) -> None:
    for mode, version in ERAS:
        log = tmp_path / f"{mode}-{version}.jsonl"
        markers = Markers()
        asked = Asked()
        with trio.fail_after(HANG_GUARD):
            async with stdio_client(
                recorded(log, ts2_server("stdio")),
                on_stderr=markers.on_stderr,
                mode=mode,
                protocol_version=version,
                on_elicit=asked.elicit,
                on_sample=asked.sample,
            ) as client:
                check_era(client, mode, version)
                request_id = await scenario(client, asked, markers.cancelled)
        records = read_records(log)
        assert check_cancelled_call(records, "slow") == request_id
        assert markers.lines == [f"{CANCELLED}{request_id}"]
        calls = [
            m["params"]
            for m in frames(records, CLIENT_TO_SERVER)
            if isinstance(m, dict) and m.get("method") == "tools/call"
        ]
        if mode == "auto":
            assert rounds(calls) == MODERN_ROUNDS
        else:
            assert rounds(calls) == [("book", [], False), ("summarize", [], False)]


async def test_our_client_drives_a_v2_server_over_http_in_both_eras(
    nursery: trio.Nursery,
) -> None:
    with trio.fail_after(HANG_GUARD * 2):
        server = await start_server(nursery, ts2_server("http"))
        for mode, version in ERAS:
            wire = WireLog()
            asked = Asked()
            seen = list(server.lines)

            async def cancelled(marker: str, seen: list[str] = seen) -> None:
                # The marker of this connection's cancel, beyond those of the ones before.
                await new_marker(server, seen, marker)

            async with (
                wire.client() as http,
                open_client(
                    HttpTarget(server.url, http_client=http),
                    mode=mode,
                    protocol_version=version,
                    on_elicit=asked.elicit,
                    on_sample=asked.sample,
                ) as client,
            ):
                check_era(client, mode, version)
                request_id = await scenario(client, asked, cancelled)
            check_http_wire(wire, mode, version, request_id)
        await server.stop()


async def new_marker(server: ServerProcess, before: list[str], marker: str) -> None:
    """Wait for one more ``marker`` line than ``before`` had (request ids repeat across
    connections); the caller's hang guard bounds the wait."""
    count = before.count(marker)

    def arrived(_line: str) -> bool:
        return server.lines.count(marker) > count

    await server.wait_for(arrived)


def check_http_wire(wire: WireLog, mode: str, version: str | None, request_id: Any) -> None:
    calls = [p["params"] for p in wire.posts("tools/call")]
    cancels = wire.posts("notifications/cancelled")
    if mode == "auto":
        assert wire.posts()[0]["rpc"] == "server/discover"
        assert wire.posts("initialize") == []
        for post in wire.posts():
            assert post["version"] == MODERN and not post["session"], post
        assert rounds(calls) == MODERN_ROUNDS
    else:
        assert wire.posts()[0]["rpc"] == "initialize"
        for post in wire.posts()[1:]:
            assert post["version"] == version and post["session"], post
        assert rounds(calls) == [("book", [], False), ("summarize", [], False)]
        (cancel,) = cancels
        assert cancel["params"]["requestId"] == request_id
