"""Session state (``ctx.session_state``): kept across requests of one session, isolated between
sessions and principals, bounded, dropped when a handshake session ends."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from trio_mcp import Context, MemorySessionStateStore, Principal, Server
from trio_mcp.server import STATE_META_KEY
from trio_mcp.transports import memory_transport_pair

from ..wire import WirePeer, wire_to

VERSION_KEY = "io.modelcontextprotocol/protocolVersion"


def counter_server(**options: Any) -> Server:
    server = Server("state", **options)

    @server.tool()
    async def remember(ctx: Context, name: str, value: Any) -> str:
        await ctx.session_state.set(name, value)
        return "ok"

    @server.tool()
    async def recall(ctx: Context, name: str) -> str:
        return json.dumps(await ctx.session_state.get(name))

    @server.tool()
    async def forget(ctx: Context, name: str) -> str:
        await ctx.session_state.delete(name)
        return "ok"

    return server


def modern(handle: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        VERSION_KEY: "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
    }
    if handle is not None:
        meta[STATE_META_KEY] = handle
    return meta


async def call(
    peer: WirePeer, rid: int, tool: str, meta: dict[str, Any] | None = None, **args: Any
) -> Any:
    params: dict[str, Any] = {"name": tool, "arguments": args}
    if meta is not None:
        params["_meta"] = meta
    return (await peer.request(rid, "tools/call", params))["result"]


def value(result: Any) -> Any:
    return json.loads(result["content"][0]["text"])


@asynccontextmanager
async def peer_as(server: Server, principal: Principal | None) -> AsyncIterator[WirePeer]:
    ours, theirs = memory_transport_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: server.serve_transport(theirs, principal=principal))
        yield WirePeer(ours)
        ours.close()
        nursery.cancel_scope.cancel()


async def test_handshake_state_survives_across_requests_and_is_isolated_between_sessions() -> None:
    server = counter_server()
    async with wire_to(server) as one, wire_to(server) as two:
        assert (await call(one, 2, "remember", name="cart", value=["tea", 2]))["content"]
        assert value(await call(one, 3, "recall", name="cart")) == ["tea", 2]
        assert value(await call(two, 2, "recall", name="cart")) is None
        await call(one, 4, "forget", name="cart")
        assert value(await call(one, 5, "recall", name="cart")) is None


async def test_a_handshake_session_state_is_dropped_when_the_session_ends() -> None:
    store = MemorySessionStateStore()
    server = counter_server(session_state_store=store)
    async with wire_to(server) as peer:
        await call(peer, 2, "remember", name="k", value=1)
        assert len(store) == 1
    await trio.testing.wait_all_tasks_blocked()
    assert len(store) == 0


async def test_modern_state_follows_the_handle_and_the_principal() -> None:
    server = counter_server()
    alice = Principal(subject="alice")
    bob = Principal(subject="bob")
    async with (
        peer_as(server, alice) as a1,
        peer_as(server, alice) as a2,
        peer_as(server, bob) as b,
    ):
        await call(a1, 1, "remember", modern("h-1"), name="k", value={"n": 1})
        # Another request (another connection) of the same principal and handle sees it.
        assert value(await call(a2, 1, "recall", modern("h-1"), name="k")) == {"n": 1}
        assert value(await call(a2, 2, "recall", modern("h-2"), name="k")) is None
        # A second principal with the same client key sees nothing.
        assert value(await call(b, 1, "recall", modern("h-1"), name="k")) is None


async def test_a_modern_request_without_a_handle_is_told_what_to_send() -> None:
    server = counter_server()
    async with wire_to(server, initialize=False) as peer:
        result = await call(peer, 1, "recall", modern(None), name="k")
    assert result["isError"] is True
    assert STATE_META_KEY in result["content"][0]["text"]


async def test_a_write_over_a_bound_is_refused_clearly_and_stores_nothing() -> None:
    server = counter_server(session_state_max_bytes=100, session_state_max_value_bytes=60)
    async with wire_to(server) as peer:
        too_big = await call(peer, 2, "remember", name="big", value="x" * 80)
        assert too_big["isError"] is True
        assert "over the bound of 60 bytes a value" in too_big["content"][0]["text"]
        assert value(await call(peer, 3, "recall", name="big")) is None
        assert not (await call(peer, 4, "remember", name="a", value="y" * 50)).get("isError")
        full = await call(peer, 5, "remember", name="b", value="z" * 50)
        assert full["isError"] is True
        assert "session state is full" in full["content"][0]["text"]
        assert value(await call(peer, 6, "recall", name="b")) is None
        # Replacing a value counts the new one instead of the old.
        assert not (await call(peer, 7, "remember", name="a", value="w" * 55)).get("isError")


async def test_a_value_that_is_not_json_is_refused() -> None:
    server = Server("state")

    @server.tool()
    async def keep(ctx: Context) -> str:
        await ctx.session_state.set("when", {1, 2})
        return "kept"

    async with wire_to(server) as peer:
        result = await call(peer, 2, "keep")
    assert result["isError"] is True
    assert "JSON" in result["content"][0]["text"]


async def test_memory_state_lapses_after_its_ttl_without_use(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = MemorySessionStateStore()
    assert await store.put("s", "k", b"1", 10, 100)
    await trio.sleep(5)
    assert await store.get("s", "k", 10) == b"1"  # used: its life starts again
    await trio.sleep(9)
    assert await store.get("s", "k", 10) == b"1"
    await trio.sleep(11)
    assert await store.get("s", "k", 10) is None
    assert len(store) == 0
