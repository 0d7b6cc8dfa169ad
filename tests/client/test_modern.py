"""The client in the modern era: connect modes, the envelope, the input-required loop;
seed-behaviors (e) 39-42."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from trio_mcp import (
    Context,
    CreateMessageResult,
    ElicitResult,
    InitializeError,
    MCPError,
    ProtocolError,
    Root,
    Server,
    TextContent,
    open_client,
)
from trio_mcp._exception_groups import collapse_exception_groups
from trio_mcp.protocol import Era
from trio_mcp.transports import memory_transport_pair

from ..wire import WirePeer

FORM = {"type": "object", "properties": {"city": {"type": "string"}}}


def travel_server(log: list[str]) -> Server:
    server = Server("travel", "3.0", instructions="Plan trips.")

    @server.tool()
    async def plan(ctx: Context) -> str:
        log.append(
            f"round modern={ctx.modern} client={ctx.client_info.name if ctx.client_info else None}"
        )
        where = await ctx.elicit("Where to?", FORM)
        city = (where.content or {}).get("city", "nowhere")
        idea = await ctx.sample(f"Plan {city}", max_tokens=20)
        await ctx.info(f"planned {city}")
        return f"{city}: {idea.content.text}"  # type: ignore[union-attr]

    @server.tool()
    async def hello() -> str:
        return "hello"

    return server


async def on_elicit(params: Any) -> ElicitResult:
    return ElicitResult(action="accept", content={"city": "Lyon"})


async def on_sample(params: Any) -> CreateMessageResult:
    return CreateMessageResult(role="assistant", content=TextContent("eat well"), model="m")


async def test_modern_mode_discovers_and_fulfils_input_with_the_same_callbacks() -> None:
    log: list[str] = []
    logs: list[Any] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        async with open_client(
            travel_server(log),
            mode="modern",
            on_elicit=on_elicit,
            on_sample=on_sample,
            on_log=logs.append,
        ) as client:
            assert client.modern and client.protocol_version == "2026-07-28"
            assert client.server_info.name == "travel" and client.server_info.version == "3.0"
            assert client.instructions == "Plan trips."
            assert client.discovered is not None and client.discovered.ttl_ms == 0
            assert [t.name for t in await client.list_tools()] == ["plan", "hello"]
            await client.set_logging_level("info")
            result = await client.call_tool("plan", {})
            assert result.content[0].text == "Lyon: eat well"  # type: ignore[union-attr]
            await client.ping()
    # Three rounds: asked where, asked the model, then completed; each carried the envelope.
    assert log == ["round modern=True client=trio-mcp"] * 3
    assert [m.data for m in logs] == ["planned Lyon"]


async def test_auto_mode_reaches_our_server_in_the_modern_era() -> None:
    async with open_client(travel_server([]), mode="auto") as client:
        assert client.modern and client.era is Era.MODERN
        assert (await client.call_tool("hello")).content[0].text == "hello"  # type: ignore[union-attr]


async def test_no_mode_with_a_modern_version_connects_modern() -> None:
    async with open_client(travel_server([]), protocol_version="2026-07-28") as client:
        assert client.modern


@asynccontextmanager
async def scripted(answer_discover: Any, **options: Any) -> AsyncIterator[tuple[Any, list[Any]]]:
    """A raw peer that answers server/discover as told, and initialize like a legacy server."""
    ours, theirs = memory_transport_pair()
    peer = WirePeer(theirs)
    seen: list[Any] = []

    async def serve() -> None:
        while True:
            try:
                message = await peer.recv()
            except trio.EndOfChannel:
                return
            seen.append(message)
            if message.get("method") == "server/discover":
                await peer.send({"jsonrpc": "2.0", "id": message["id"], **answer_discover(message)})
            elif message.get("method") == "initialize":
                await peer.send(
                    {
                        "jsonrpc": "2.0",
                        "id": message["id"],
                        "result": {
                            "protocolVersion": "2025-11-25",
                            "capabilities": {},
                            "serverInfo": {"name": "legacy", "version": "1"},
                        },
                    }
                )

    with collapse_exception_groups():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve)
            try:
                async with open_client(ours, **options) as client:
                    yield client, seen
            finally:
                nursery.cancel_scope.cancel()


def method_not_found(message: Any) -> Any:
    return {"error": {"code": -32601, "message": "Method not found"}}


async def test_auto_falls_back_to_the_handshake_on_an_error() -> None:
    async with scripted(method_not_found, mode="auto") as (client, seen):
        assert not client.modern and client.era is Era.HANDSHAKE
        assert client.protocol_version == "2025-11-25"
        assert [m.get("method") for m in seen] == ["server/discover", "initialize"]
        assert seen[0]["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"


async def test_auto_falls_back_when_no_modern_version_is_shared() -> None:
    def other(message: Any) -> Any:
        return {"result": {"supportedVersions": ["2027-01-01"], "capabilities": {}}}

    async with scripted(other, mode="auto") as (client, _):
        assert not client.modern


async def test_auto_retries_discover_with_a_shared_version_after_minus_32022() -> None:
    def answer(message: Any) -> Any:
        asked = message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
        if asked == "2026-07-28":
            return {
                "result": {
                    "supportedVersions": ["2026-07-28"],
                    "capabilities": {},
                    "resultType": "complete",
                }
            }
        return {"error": {"code": -32022, "message": "Unsupported protocol version"}}

    async with scripted(answer, mode="auto") as (client, seen):
        assert client.modern
        assert [m["method"] for m in seen] == ["server/discover"]


@pytest.mark.invariant(9)
async def test_an_explicit_modern_version_never_falls_back() -> None:
    with pytest.raises(InitializeError, match="server/discover failed: Method not found"):
        async with scripted(method_not_found, protocol_version="2026-07-28"):
            pass  # pragma: no cover


@pytest.mark.invariant(9)
async def test_modern_mode_needs_a_mutual_version() -> None:
    def other(message: Any) -> Any:
        return {"result": {"supportedVersions": ["2027-01-01"], "capabilities": {}}}

    with pytest.raises(InitializeError, match="no mutually supported modern protocol version"):
        async with scripted(other, mode="modern"):
            pass  # pragma: no cover


def test_bad_modes_are_refused_before_anything_starts() -> None:
    from trio_mcp.client._client import resolve_mode

    with pytest.raises(ValueError, match="mode must be one of"):
        resolve_mode("sometimes", None)
    with pytest.raises(ValueError, match="is a handshake version"):
        resolve_mode("modern", "2025-06-18")
    with pytest.raises(ValueError, match="is a modern protocol version and cannot be pinned"):
        resolve_mode("legacy", "2026-07-28")
    assert resolve_mode("auto", "2025-06-18") == ("legacy", "2025-06-18")
    assert resolve_mode(None, None) == ("legacy", "2025-11-25")


async def test_a_modern_connect_declaring_roots_or_sampling_warns() -> None:
    with pytest.warns(DeprecationWarning, match="deprecated in the modern protocol"):
        async with open_client(travel_server([]), mode="modern", roots=[Root(uri="file:///x")]):
            pass
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        async with open_client(travel_server([]), mode="legacy", on_sample=on_sample):
            pass
        async with open_client(travel_server([]), mode="modern", on_elicit=on_elicit):
            pass


async def test_missing_callbacks_and_endless_input_are_errors() -> None:
    async with open_client(travel_server([]), mode="modern") as client:
        with pytest.raises(ProtocolError) as info:
            await client.call_tool("plan", {})
        # The server refuses to ask what the client cannot answer.
        assert info.value.code == -32021
        assert info.value.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}

    server = Server("greedy")

    @server.method("custom/greedy")
    async def greedy(params: dict[str, Any]) -> dict[str, Any]:
        return {
            "resultType": "input_required",
            "inputRequests": {
                "q": {
                    "method": "elicitation/create",
                    "params": {"message": "again", "requestedSchema": FORM},
                }
            },
        }

    @server.method("custom/odd")
    async def odd(params: dict[str, Any]) -> dict[str, Any]:
        return {"resultType": "task"}

    async with open_client(server, mode="modern", on_elicit=on_elicit) as client:
        client.max_input_rounds = 3
        with pytest.raises(MCPError, match="after 3 rounds"):
            await client.request("custom/greedy")
        with pytest.raises(MCPError, match="unknown resultType 'task'"):
            await client.request("custom/odd")


async def test_cancelling_the_caller_cancels_a_running_callback(autojump_clock: Any) -> None:
    started, stopped = trio.Event(), trio.Event()

    async def slow_elicit(params: Any) -> ElicitResult:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            stopped.set()
        raise AssertionError  # pragma: no cover

    async with open_client(travel_server([]), mode="modern", on_elicit=slow_elicit) as client:
        with trio.move_on_after(5) as scope:
            await client.call_tool("plan", {})
        assert scope.cancelled_caught
        assert started.is_set() and stopped.is_set()


async def test_a_minus_32022_naming_the_version_sent_is_retried_once() -> None:
    """An instance behind the same address may be older: the version it names is tried again."""
    refusals: list[str] = []

    def answer(message: Any) -> Any:
        asked = message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
        if len(refusals) < 1:
            refusals.append(asked)
            return {
                "error": {
                    "code": -32022,
                    "message": "Unsupported protocol version",
                    "data": {"supported": ["2026-07-28"], "requested": asked},
                }
            }
        return {"result": {"supportedVersions": ["2026-07-28"], "capabilities": {}}}

    async with scripted(answer, mode="modern") as (client, seen):
        assert client.modern and refusals == ["2026-07-28"]
        assert [m["method"] for m in seen] == ["server/discover", "server/discover"]

    def always(message: Any) -> Any:
        refusals.append("again")
        return {
            "error": {
                "code": -32022,
                "message": "Unsupported protocol version",
                "data": {"supported": ["2026-07-28"], "requested": "2026-07-28"},
            }
        }

    with pytest.raises(InitializeError, match="Unsupported protocol version"):
        async with scripted(always, mode="modern"):
            pass  # pragma: no cover
    assert refusals.count("again") == 2


DEFAULTS_FORM = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "verified": {"type": "boolean", "default": True},
        "nickname": {"type": "string"},
    },
}


@pytest.mark.parametrize("mode", ["legacy", "modern"])
async def test_an_accepted_form_gets_the_defaults_the_answer_leaves_out(mode: str) -> None:
    """SEP-1034: the user saw the defaults filled in; the server gets them with the answer."""
    server = Server("forms")

    @server.tool()
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit("Who?", DEFAULTS_FORM)
        return f"{answer.action} {answer.content}"

    answers = iter(
        [
            ElicitResult(action="accept", content={"name": "Ada"}),
            ElicitResult(action="accept"),
            ElicitResult(action="decline"),
        ]
    )

    async def on_form(params: Any) -> ElicitResult:
        await trio.lowlevel.checkpoint()
        return next(answers)

    async with open_client(server, mode=mode, on_elicit=on_form) as client:
        texts = [(await client.call_tool("ask", {})).content[0] for _ in range(3)]
    assert [t.text for t in texts if isinstance(t, TextContent)] == [
        "accept {'name': 'Ada', 'age': 30, 'verified': True}",
        "accept {'name': 'John Doe', 'age': 30, 'verified': True}",
        "decline None",
    ]
