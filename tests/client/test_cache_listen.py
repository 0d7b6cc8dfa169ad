"""The client's result cache (off by default) and ``client.listen()`` (modern era)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from trio_mcp import MCPError, Server, open_client
from trio_mcp.client._cache import ResultCache


def counting_server(calls: list[str], **options: Any) -> Server:
    server = Server("cached", **options)

    @server.tool()
    async def one() -> str:
        return "1"

    @server.resource("test://doc")
    async def doc() -> str:
        calls.append("read")
        return f"read {len(calls)}"

    return server


async def test_cacheable_results_are_reused_until_stale_or_invalidated() -> None:
    calls: list[str] = []
    server = counting_server(calls, ttl_ms=60_000)
    async with open_client(server, mode="modern", cache=True) as client:
        first = await client.read_resource("test://doc")
        again = await client.read_resource("test://doc")
        assert calls == ["read"]
        assert again.contents[0].text == first.contents[0].text == "read 1"  # type: ignore[union-attr]
        assert [t.name for t in await client.list_tools()] == ["one"]

        @server.tool()
        async def two() -> str:
            return "2"

        # A listener is what tells a modern client about the change; with one, the cached
        # list is dropped and the next call goes to the server.
        async with client.listen(tools=True) as subscription:
            with trio.fail_after(10):
                assert await subscription.wait_acknowledged() == {"toolsListChanged": True}
            server.notify_list_changed("tools")
            with trio.fail_after(10):
                note = await subscription.__anext__()
            assert note.method == "notifications/tools/list_changed"
        assert [t.name for t in await client.list_tools()] == ["one", "two"]
        server.notify_resource_updated("test://doc")


async def test_no_cache_by_default_and_none_for_zero_ttl() -> None:
    calls: list[str] = []
    async with open_client(counting_server(calls), mode="modern") as client:
        await client.read_resource("test://doc")
        await client.read_resource("test://doc")
    async with open_client(counting_server(calls), mode="modern", cache=True) as client:
        await client.read_resource("test://doc")
        await client.read_resource("test://doc")  # ttlMs 0: never reused
    assert calls == ["read"] * 4


def test_cache_rules() -> None:
    now = [0.0]
    cache = ResultCache(clock=lambda: now[0])
    params = {"uri": "a", "_meta": {"x": 1}}
    cache.put("resources/read", params, {"contents": [], "ttlMs": 1000, "resultType": "complete"})
    assert cache.get("resources/read", {"uri": "a"}) is not None  # _meta is not part of the key
    assert cache.get("resources/read", {"uri": "b"}) is None
    now[0] = 1.5
    assert cache.get("resources/read", {"uri": "a"}) is None
    cache.put("tools/call", {}, {"content": [], "ttlMs": 1000})
    cache.put("resources/read", {"uri": "a", "requestState": "s"}, {"contents": [], "ttlMs": 1000})
    cache.put("resources/read", {"uri": "c"}, {"resultType": "input_required", "ttlMs": 1000})
    assert len(cache) == 0
    cache.put("resources/read", {"uri": "a"}, {"contents": [], "ttlMs": 1000})
    cache.invalidate("notifications/resources/updated", {"uri": "a"})
    assert len(cache) == 0


async def test_listen_delivers_only_what_was_asked_and_ends_cleanly() -> None:
    server = counting_server([])
    async with open_client(server, mode="modern") as client:
        async with client.listen(resource_uris=["test://doc"]) as subscription:
            with trio.fail_after(10):
                acknowledged = await subscription.wait_acknowledged()
            assert acknowledged == {"resourceSubscriptions": ["test://doc"]}
            server.notify_list_changed("tools")
            server.notify_resource_updated("test://doc")
            with trio.fail_after(10):
                note = await subscription.__anext__()
            assert note.method == "notifications/resources/updated"
            assert (note.params or {})["uri"] == "test://doc"
        (connection,) = server.connections
        with trio.fail_after(10):
            while connection.listeners:  # noqa: ASYNC110 - the server forgets it as it ends
                await trio.sleep(0.01)


async def test_listen_is_modern_only() -> None:
    async with open_client(counting_server([])) as client:
        with pytest.raises(MCPError, match="modern-era method"):
            async with client.listen(tools=True):
                pass  # pragma: no cover
