"""The modern era (2026-07-28) on a server: seed-behaviors (e) 16-31, over the in-memory wire."""

from __future__ import annotations

from typing import Any

import pytest

from trio_mcp import Context, Server

from ..wire import wire_to

VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
INFO_KEY = "io.modelcontextprotocol/clientInfo"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"


def envelope(version: str = "2026-07-28", caps: Any = None, **extra: Any) -> dict[str, Any]:
    return {VERSION_KEY: version, CAPS_KEY: {} if caps is None else caps, **extra}


def modern(params: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    return {**(params or {}), "_meta": envelope(**meta)}


def era_server(seen: list[dict[str, Any]] | None = None, **options: Any) -> Server:
    server = Server("era", "1.0.0", instructions="Modern or not.", **options)

    @server.tool()
    async def whoami(ctx: Context) -> str:
        if seen is not None:
            seen.append(
                {
                    "modern": ctx.modern,
                    "version": ctx.protocol_version,
                    "client": ctx.client_info.name if ctx.client_info else None,
                    "elicitation": ctx.client_capabilities.elicitation,
                }
            )
        return "me"

    @server.method("custom/pending")
    async def pending(params: dict[str, Any]) -> dict[str, Any]:
        return {"resultType": "input_required", "requestState": "s"}

    @server.prompt()
    async def hello() -> str:
        return "hello"

    @server.resource("test://doc")
    async def doc() -> str:
        return "doc"

    return server


async def test_modern_results_carry_result_type_server_info_and_hints() -> None:
    async with wire_to(era_server(), initialize=False) as peer:
        tools = (await peer.request(1, "tools/list", modern()))["result"]
        assert tools["resultType"] == "complete"
        assert tools["_meta"] == {SERVER_INFO_KEY: {"name": "era", "version": "1.0.0"}}
        assert (tools["ttlMs"], tools["cacheScope"]) == (0, "private")
        prompts = (await peer.request(2, "prompts/list", modern()))["result"]
        assert prompts["resultType"] == "complete"
        call = (await peer.request(3, "tools/call", modern({"name": "whoami"})))["result"]
        assert call["resultType"] == "complete"
        assert "ttlMs" not in call and "cacheScope" not in call
        read = (await peer.request(4, "resources/read", modern({"uri": "test://doc"})))["result"]
        assert (read["ttlMs"], read["cacheScope"]) == (0, "private")
        kept = (await peer.request(5, "custom/pending", modern()))["result"]
        assert kept["resultType"] == "input_required"


async def test_configured_hints_win() -> None:
    async with wire_to(era_server(ttl_ms=5000), initialize=False) as peer:
        tools = (await peer.request(1, "tools/list", modern()))["result"]
        assert (tools["ttlMs"], tools["cacheScope"]) == (5000, "private")


async def test_handshake_results_have_no_result_type_and_opt_in_hints() -> None:
    async with wire_to(era_server()) as peer:
        for rid, method, params in [
            (1, "tools/list", None),
            (2, "ping", None),
            (3, "tools/call", {"name": "whoami"}),
        ]:
            result = (await peer.request(rid, method, params))["result"]
            assert "resultType" not in result and "ttlMs" not in result
    async with wire_to(era_server(ttl_ms=5000)) as peer:
        tools = (await peer.request(1, "tools/list"))["result"]
        assert (tools["ttlMs"], tools["cacheScope"]) == (5000, "private")
        assert "resultType" not in tools
    async with wire_to(era_server(cache_scope="private")) as peer:
        read = (await peer.request(1, "resources/read", {"uri": "test://doc"}))["result"]
        assert (read["ttlMs"], read["cacheScope"]) == (0, "private")


def test_invalid_hint_settings_are_refused() -> None:
    for options in ({"ttl_ms": -1}, {"ttl_ms": 1.5}, {"cache_scope": "internal"}):
        with pytest.raises(ValueError):
            Server("s", **options)


async def test_discover_without_a_handshake_and_without_initializing() -> None:
    async with wire_to(era_server(), initialize=False) as peer:
        discovered = (await peer.request(1, "server/discover"))["result"]
        assert discovered == {
            "supportedVersions": ["2026-07-28"],
            # listChanged and subscribe stay: subscriptions/listen serves them on every transport.
            "capabilities": {
                "logging": {},
                "prompts": {"listChanged": True},
                "resources": {"subscribe": True, "listChanged": True},
                "tools": {"listChanged": True},
            },
            "instructions": "Modern or not.",
            "_meta": {SERVER_INFO_KEY: {"name": "era", "version": "1.0.0"}},
            "ttlMs": 0,
            "cacheScope": "private",
            "resultType": "complete",
        }
        # It did not initialize the connection: the handshake still works afterwards.
        init = await peer.initialize()
        assert init["result"]["protocolVersion"] == "2025-11-25"


async def test_discover_echoes_configured_hints_and_omits_missing_instructions() -> None:
    server = Server("bare", ttl_ms=3_600_000, cache_scope="public")
    async with wire_to(server, initialize=False) as peer:
        discovered = (await peer.request(1, "server/discover", modern()))["result"]
        assert "instructions" not in discovered and "serverInfo" not in discovered
        assert (discovered["ttlMs"], discovered["cacheScope"]) == (3_600_000, "public")


def test_server_discover_cannot_be_redefined() -> None:
    with pytest.raises(ValueError, match="already defined"):
        Server("s").method("server/discover")


async def test_the_handler_sees_the_requests_own_envelope() -> None:
    seen: list[dict[str, Any]] = []
    server = era_server(seen)
    async with wire_to(server, initialize=False) as peer:
        params = modern(
            {"name": "whoami"},
            caps={"elicitation": {"form": {}}},
            **{INFO_KEY: {"name": "modern-client", "version": "2"}},
        )
        await peer.request(1, "tools/call", params)
        await peer.request(2, "tools/call", modern({"name": "whoami"}))
        (connection,) = server.connections
        assert not connection.state.initialized
    assert seen == [
        {
            "modern": True,
            "version": "2026-07-28",
            "client": "modern-client",
            "elicitation": {"form": {}},
        },
        # Nothing is inferred from the earlier request.
        {"modern": True, "version": "2026-07-28", "client": None, "elicitation": None},
    ]


async def test_envelope_errors() -> None:
    seen: list[dict[str, Any]] = []
    async with wire_to(era_server(seen), initialize=False) as peer:
        unsupported = await peer.request(
            1, "tools/call", {"name": "whoami", "_meta": envelope("2027-01-01")}
        )
        assert unsupported["error"] == {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": ["2026-07-28"], "requested": "2027-01-01"},
        }
        only_version = await peer.request(
            2, "tools/call", {"name": "whoami", "_meta": {VERSION_KEY: "2026-07-28"}}
        )
        assert only_version["error"]["code"] == -32602
        assert CAPS_KEY in only_version["error"]["message"]
        assert seen == []


async def test_an_unknown_resource_is_invalid_params_in_the_modern_era() -> None:
    """SEP-2164: 2026-07-28 servers must not emit -32002; the handshake era keeps it."""
    missing = {"uri": "test://missing"}
    async with wire_to(era_server(), initialize=False) as peer:
        refused = await peer.request(1, "resources/read", modern(missing))
        assert refused["error"] == {
            "code": -32602,
            "message": "Resource not found",
            "data": {"uri": "test://missing"},
        }
    async with wire_to(era_server()) as peer:
        legacy = await peer.request(1, "resources/read", missing)
        assert legacy["error"]["code"] == -32002


@pytest.mark.parametrize(
    "method",
    ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"],
)
async def test_methods_the_modern_era_removed(method: str) -> None:
    async with wire_to(era_server(), initialize=False) as peer:
        first = await peer.request("m-1", method, modern())
        assert first["id"] == "m-1"
        assert first["error"]["code"] == -32601
        await peer.request(1, "tools/list", modern())  # now locked modern
        locked = await peer.request("m-2", method, modern())
        assert locked["id"] == "m-2" and locked["error"]["code"] == -32601


async def test_an_enveloped_initialize_neither_locks_nor_initializes() -> None:
    server = era_server()
    async with wire_to(server, initialize=False) as peer:
        params = {
            "protocolVersion": "2026-07-28",
            "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"},
            "_meta": envelope(),
        }
        assert (await peer.request(1, "initialize", params))["error"]["code"] == -32601
        (connection,) = server.connections
        assert connection.state.era is None
        assert "result" in await peer.initialize()


async def test_a_successful_modern_request_locks_the_connection() -> None:
    async with wire_to(era_server(), initialize=False) as peer:
        assert "result" in await peer.request(1, "tools/list", modern())
        refused = await peer.initialize()
        assert refused["error"]["code"] == -32601
        plain = await peer.request(2, "tools/list")
        assert plain["error"]["code"] == -32602
        assert VERSION_KEY in plain["error"]["message"]
        discover = await peer.request(3, "server/discover")
        assert discover["error"]["code"] == -32602
        assert "result" in await peer.request(4, "server/discover", modern())


async def test_a_failed_modern_request_does_not_lock() -> None:
    async with wire_to(era_server(), initialize=False) as peer:
        failed = await peer.request(1, "tools/list", {"_meta": envelope("2027-01-01")})
        assert failed["error"]["code"] == -32022
        assert "result" in await peer.initialize()
        # Now the handshake decided: an enveloped request is refused.
        refused = await peer.request(2, "tools/list", modern())
        assert refused["error"]["code"] == -32600
        assert "legacy lifecycle" in refused["error"]["message"]


async def test_an_initialize_and_a_modern_request_routed_together_leave_one_era() -> None:
    """Both pass routing (the connection is in no era yet); the handshake, decided first,
    wins, and the modern request is refused as it would be after it (not served in both)."""
    server = era_server()
    init = {
        "jsonrpc": "2.0",
        "id": "init",
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"},
        },
    }
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": modern()}
    async with wire_to(server, initialize=False) as peer:
        await peer.send([init, listing])
        answers = {answer["id"]: answer for answer in await peer.recv()}
        assert "result" in answers["init"]
        assert answers[1]["error"]["code"] == -32600
        assert "legacy lifecycle" in answers[1]["error"]["message"]
        (connection,) = server.connections
        assert connection.state.initialized and not connection.state.modern_locked


async def test_modern_log_messages_only_when_the_request_asks() -> None:
    server = Server("logs")

    @server.tool()
    async def chatty(ctx: Context) -> str:
        await ctx.debug("debug line")
        await ctx.warning("warning line")
        return "done"

    async with wire_to(server, initialize=False) as peer:
        silent = await peer.request(1, "tools/call", modern({"name": "chatty"}))
        assert silent["result"]["content"][0]["text"] == "done"
        await peer.send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": modern(
                    {"name": "chatty"}, **{"io.modelcontextprotocol/logLevel": "warning"}
                ),
            }
        )
        frames = [await peer.recv(), await peer.recv()]
        assert frames[0]["method"] == "notifications/message"
        assert frames[0]["params"]["data"] == "warning line"
        assert frames[1]["id"] == 2


def listen_params(rid: Any, **wanted: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "subscriptions/listen",
        "params": modern({"notifications": wanted}),
    }


@pytest.mark.invariant(3)
async def test_listen_acknowledges_then_delivers_tagged_notifications() -> None:
    server = era_server()
    async with wire_to(server, initialize=False) as peer:
        await peer.send(
            listen_params(
                "sub-1",
                toolsListChanged=True,
                resourceSubscriptions=["test://doc"],
                unknownFilter=True,
            )
        )
        ack = await peer.recv()
        assert ack == {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {
                "notifications": {
                    "toolsListChanged": True,
                    "resourceSubscriptions": ["test://doc"],
                },
                "_meta": {"io.modelcontextprotocol/subscriptionId": "sub-1"},
            },
        }
        # Prompts were not asked for: not delivered. Tools and the resource were.
        server.notify_list_changed("prompts")
        server.notify_list_changed("tools")
        server.notify_resource_updated("test://other")
        server.notify_resource_updated("test://doc")
        tagged = {"io.modelcontextprotocol/subscriptionId": "sub-1"}
        assert await peer.recv() == {
            "jsonrpc": "2.0",
            "method": "notifications/tools/list_changed",
            "params": {"_meta": tagged},
        }
        assert await peer.recv() == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": "test://doc", "_meta": tagged},
        }
        # Cancelling ends the subscription with a final result naming it.
        await peer.cancel("sub-1")
        final = await peer.recv()
        assert final["id"] == "sub-1"
        assert final["result"]["resultType"] == "complete"
        assert final["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "sub-1"
        (connection,) = server.connections
        assert connection.listeners == {}
        server.notify_list_changed("tools")
        assert (await peer.request(9, "tools/list", modern()))["id"] == 9


async def test_listen_is_modern_only_and_needs_a_filter() -> None:
    async with wire_to(era_server()) as peer:
        legacy = await peer.request(1, "subscriptions/listen", {"notifications": {}})
        assert legacy["error"]["code"] == -32601
    async with wire_to(era_server(), initialize=False) as peer:
        bad = await peer.request(2, "subscriptions/listen", modern())
        assert bad["error"]["code"] == -32602
