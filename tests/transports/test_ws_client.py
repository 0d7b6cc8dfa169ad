"""Our client over WebSocket: ``open_client("ws://...")`` against our endpoint on a real
hypercorn, and against a bare trio-websocket server for what ours never sends."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import trio
from trio_websocket import WebSocketRequest, serve_websocket

from trio_mcp import (
    Auth,
    ConnectionClosed,
    Principal,
    Server,
    StaticTokenVerifier,
    WebSocketTarget,
    open_client,
)
from trio_mcp._demo import demo_server
from trio_mcp.http import HttpOptions, WebSocketOptions
from trio_mcp.server import Context
from trio_mcp.transports._ws_client import MISSING, open_ws_transport

from .._http import GUARD, Park, Served, serving, text_of


def ws_url(served: Served) -> str:
    return served.base.replace("http://", "ws://", 1) + "/ws"


@pytest.mark.parametrize("mode", [None, "legacy", "modern"])
async def test_tools_and_progress_over_a_socket(mode: str | None) -> None:
    async with serving(demo_server()) as served, open_client(ws_url(served), mode=mode) as client:
        assert client.modern is (mode == "modern")
        assert text_of(await client.call_tool("echo", {"text": "hi"})) == "hi"
        seen: list[tuple[float, float | None, str | None]] = []
        result = await client.call_tool(
            "sleep", {"seconds": 0.3}, on_progress=lambda *p: seen.append(p)
        )
        assert text_of(result) == "slept 0.3s"
        assert seen and seen[0][:2] == (0.1, 0.3)


async def test_our_client_answers_the_servers_keep_alive_pings() -> None:
    options = HttpOptions(websocket=WebSocketOptions(ping_interval=0.3))
    async with (
        serving(demo_server(), options) as served,
        open_client(ws_url(served)) as client,
    ):
        await trio.sleep(1.2)  # several pings, each answered within its interval
        assert served.app.websockets.sockets
        assert text_of(await client.call_tool("echo", {"text": "alive"})) == "alive"


async def test_a_cancelled_call_stops_the_handler_and_the_connection_goes_on() -> None:
    server = Server("parks")
    park = Park(server)

    @server.tool()
    async def echo(text: str) -> str:
        return text

    async with serving(server) as served, open_client(ws_url(served)) as client:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.call_tool, "park", {})
                await park.entered.wait()
                scope.cancel()
        with trio.fail_after(GUARD):
            await park.finished.wait()
        assert park.cancelled
        assert text_of(await client.call_tool("echo", {"text": "after"})) == "after"


async def test_headers_carry_a_bearer_token_and_a_refusal_names_its_reason() -> None:
    alice = Principal("alice", scopes=frozenset({"mcp:base"}))
    auth = Auth(
        StaticTokenVerifier({"alice-token-0123456789": alice}),
        "http://localhost/mcp",
        authorization_servers=("https://auth.example.com",),
        required_scopes="mcp:base",
    )
    server = Server("protected", auth=auth)

    @server.tool()
    async def whoami(ctx: Context) -> str:
        assert ctx.auth is not None
        return str(ctx.auth.subject)

    async with serving(server) as served:
        token = {"Authorization": "Bearer alice-token-0123456789"}
        async with open_client(WebSocketTarget(ws_url(served), headers=token)) as client:
            assert text_of(await client.call_tool("whoami", {})) == "alice"
        with pytest.raises(ConnectionClosed, match="refused: HTTP 401"):
            async with open_client(ws_url(served)):
                pass
        with pytest.raises(ConnectionClosed, match="HTTP 404: Not Found: the WebSocket endpoint"):
            async with open_client(served.base.replace("http", "ws") + "/elsewhere"):
                pass


async def test_http_only_options_are_refused_for_a_ws_url() -> None:
    with pytest.raises(TypeError, match="a ws\\(s\\) URL takes headers="):
        async with open_client("ws://127.0.0.1:1/ws", auth=httpx.BasicAuth("a", "b")):
            pass


async def test_nobody_listening_is_a_connection_error() -> None:
    with pytest.raises(ConnectionClosed, match="cannot open a WebSocket"):
        async with open_client("ws://127.0.0.1:1/ws"):
            pass


async def test_without_trio_websocket_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "trio_websocket", None)
    with pytest.raises(ImportError) as info:
        async with open_ws_transport("ws://127.0.0.1:1/ws"):
            pass
    assert str(info.value) == MISSING


async def test_a_server_shutdown_fails_the_pending_call_at_once() -> None:
    server = Server("parks")
    park = Park(server)
    async with (
        serving(server) as served,
        open_client(ws_url(served)) as client,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(_shut_down_once_parked, served, park)
        with trio.fail_after(GUARD), pytest.raises(ConnectionClosed, match="1001"):
            await client.call_tool("park", {})


async def _shut_down_once_parked(served: Served, park: Park) -> None:
    await park.entered.wait()
    served.app.websockets.shutdown()


# -- a bare server: frames ours never sends --------------------------------------------------------


@asynccontextmanager
async def bare_server(script: Any) -> AsyncIterator[str]:
    """A trio-websocket server (no MCP library) that runs ``script(ws)`` on each socket."""

    async def handler(request: WebSocketRequest) -> None:
        ws = await request.accept(subprotocol="mcp")
        await script(ws)

    async with trio.open_nursery() as nursery:
        ws_server = await nursery.start(serve_websocket, handler, "127.0.0.1", 0, None)
        try:
            yield f"ws://127.0.0.1:{ws_server.port}/"
        finally:
            nursery.cancel_scope.cancel()


async def _answer_initialize(ws: Any) -> Any:
    request = json.loads(await ws.get_message())
    result = {
        "protocolVersion": request["params"]["protocolVersion"],
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "bare", "version": "0"},
    }
    await ws.send_message(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}))
    return json.loads(await ws.get_message())  # notifications/initialized


async def test_a_binary_frame_from_the_server_closes_the_socket_with_1003() -> None:
    closed: list[int] = []
    done = trio.Event()

    async def script(ws: Any) -> None:
        await _answer_initialize(ws)
        call = json.loads(await ws.get_message())
        answer = {"jsonrpc": "2.0", "id": call["id"], "result": {"content": []}}
        await ws.send_message(json.dumps(answer).encode())
        try:
            await ws.get_message()
        except Exception:
            closed.append(ws.closed.code)
        finally:
            done.set()

    async with bare_server(script) as url:
        with trio.fail_after(GUARD):
            async with open_client(url, mode="legacy") as client:
                with pytest.raises(ConnectionClosed, match="binary frame"):
                    await client.call_tool("anything", {})
            await done.wait()
    assert closed == [1003]


async def test_a_message_over_the_limit_closes_the_socket_with_1009() -> None:
    closed: list[int] = []
    done = trio.Event()

    async def script(ws: Any) -> None:
        try:
            await ws.send_message("[" + "1," * 1000 + "1]")
            await ws.get_message()
        except Exception:
            closed.append(ws.closed.code)
        finally:
            done.set()

    async with bare_server(script) as url:
        with trio.fail_after(GUARD):
            async with open_ws_transport(url, max_message_bytes=1000) as transport:
                with pytest.raises(ConnectionClosed, match="1009"):
                    await transport.receive()
            await done.wait()
    assert closed == [1009]
