"""The WebSocket endpoint, frame by frame: a real hypercorn on loopback, a raw trio-websocket
client (no MCP library on the client's side), exact JSON-RPC messages in text frames."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
from trio_websocket import (
    ConnectionClosed,
    ConnectionRejected,
    WebSocketConnection,
    open_websocket_url,
)

from trio_mcp import Auth, Principal, Server, StaticTokenVerifier
from trio_mcp._demo import demo_server
from trio_mcp.http import HostRules, HttpOptions, Limits, WebSocketOptions
from trio_mcp.server import Context

from .._http import Park, Served, eventually, serving

CLIENT_INFO = {"name": "raw-ws", "version": "0"}


def ws_url(served: Served, path: str = "/ws") -> str:
    return served.base.replace("http://", "ws://", 1) + path


class Peer:
    """One raw socket: JSON in text frames, nothing else."""

    def __init__(self, ws: WebSocketConnection) -> None:
        self.ws = ws

    async def send(self, *messages: Any) -> None:
        for message in messages:
            await self.ws.send_message(json.dumps(message))

    async def recv(self) -> Any:
        return json.loads(await self.ws.get_message())

    async def initialize(self, version: str = "2025-11-25") -> Any:
        await self.send(
            {
                "jsonrpc": "2.0",
                "id": "init",
                "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": CLIENT_INFO,
                },
            }
        )
        response = await self.recv()
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return response


@asynccontextmanager
async def socket(
    served: Served, *, path: str = "/ws", headers: dict[str, str] | None = None
) -> AsyncIterator[Peer]:
    extra = [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    async with open_websocket_url(
        ws_url(served, path), subprotocols=["mcp"], extra_headers=extra
    ) as ws:
        assert ws.subprotocol == "mcp"
        yield Peer(ws)


def tools_call(rid: Any, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments or {}}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


async def rejected(url: str, **kwargs: Any) -> ConnectionRejected:
    with pytest.raises(ConnectionRejected) as info:
        async with open_websocket_url(url, **kwargs):
            pass
    return info.value


def close_code(closed: ConnectionClosed) -> int:
    assert closed.reason is not None
    return int(closed.reason.code)


def error_message(rejection: ConnectionRejected) -> str:
    assert rejection.body is not None
    body = json.loads(rejection.body)
    assert body["jsonrpc"] == "2.0"
    return str(body["error"]["message"])


# -- the handshake ---------------------------------------------------------------------------------


async def test_a_tool_call_over_a_socket() -> None:
    async with serving(demo_server()) as served, socket(served) as peer:
        response = await peer.initialize()
        assert response["result"]["serverInfo"]["name"] == "trio-mcp-demo"
        await peer.send(tools_call(1, "echo", {"text": "over ws"}))
        assert await peer.recv() == {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"content": [{"type": "text", "text": "over ws"}]},
        }


async def test_a_handshake_without_the_mcp_subprotocol_is_refused_with_400() -> None:
    async with serving(demo_server()) as served:
        refusal = await rejected(ws_url(served))
        assert refusal.status_code == 400
        assert "subprotocol 'mcp'" in error_message(refusal)
        refusal = await rejected(ws_url(served), subprotocols=["graphql-ws"])
        assert refusal.status_code == 400


async def test_another_path_is_404_and_the_endpoint_can_be_moved_or_switched_off() -> None:
    async with serving(demo_server()) as served:
        refusal = await rejected(ws_url(served, "/mcp"), subprotocols=["mcp"])
        assert refusal.status_code == 404
        assert "/ws" in error_message(refusal)
    async with serving(
        demo_server(), HttpOptions(websocket=WebSocketOptions(path="/socket"))
    ) as served:
        async with socket(served, path="/socket") as peer:
            assert "result" in await peer.initialize()
        assert (await rejected(ws_url(served), subprotocols=["mcp"])).status_code == 404
    # The MCP path itself: an upgrade there is a WebSocket, any other request Streamable HTTP.
    async with serving(
        demo_server(), HttpOptions(websocket=WebSocketOptions(path="/mcp"))
    ) as served:
        async with socket(served, path="/mcp") as peer:
            assert "result" in await peer.initialize()
        assert (await served.initialize()).strip()
    async with serving(demo_server(), HttpOptions(websocket=None)) as served:
        refusal = await rejected(ws_url(served, "/ws"), subprotocols=["mcp"])
        assert refusal.status_code == 404
        assert "no WebSocket" in error_message(refusal)


async def test_a_foreign_origin_or_host_is_refused_before_the_accept() -> None:
    async with serving(demo_server()) as served:
        evil = [(b"origin", b"https://evil.example")]
        refusal = await rejected(ws_url(served), subprotocols=["mcp"], extra_headers=evil)
        assert refusal.status_code == 403
        assert "Origin 'https://evil.example' refused" in error_message(refusal)
        # Allowed origins are the same option as for Streamable HTTP.
        ok = [(b"origin", b"http://localhost:3000")]
        async with open_websocket_url(ws_url(served), subprotocols=["mcp"], extra_headers=ok):
            pass
    options = HttpOptions(hosts=HostRules(allowed_hosts=["mcp.example"]))
    async with serving(demo_server(), options) as served:
        refusal = await rejected(ws_url(served), subprotocols=["mcp"])
        assert refusal.status_code == 403
        assert "allowed_hosts" in error_message(refusal)


async def test_with_auth_the_upgrade_needs_a_token_and_gets_the_challenge() -> None:
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
        refusal = await rejected(ws_url(served), subprotocols=["mcp"])
        assert refusal.status_code == 401
        challenge = dict(refusal.headers)[b"www-authenticate"].decode()
        assert challenge.startswith("Bearer ") and "resource_metadata=" in challenge
        wrong = [(b"authorization", b"Bearer not-a-token-0123456789")]
        refusal = await rejected(ws_url(served), subprotocols=["mcp"], extra_headers=wrong)
        assert refusal.status_code == 401
        good = {"authorization": "Bearer alice-token-0123456789"}
        async with socket(served, headers=good) as peer:
            assert "result" in await peer.initialize()
            await peer.send(tools_call(1, "whoami"))
            assert (await peer.recv())["result"]["content"][0]["text"] == "alice"


async def test_a_draining_app_refuses_new_sockets_with_503() -> None:
    async with serving(demo_server()) as served:
        served.app.begin_drain()
        refusal = await rejected(ws_url(served), subprotocols=["mcp"])
        assert refusal.status_code == 503


async def test_sockets_are_limited_per_client_and_in_all() -> None:
    def client_key(scope: Any) -> str:
        return str(dict(scope["headers"]).get(b"x-client", b"").decode())

    options = HttpOptions(
        limits=Limits(max_sessions_per_client=2, max_sessions=3, client_key=client_key)
    )
    async with serving(demo_server(), options) as served:
        url = ws_url(served)
        alice = {"x-client": "alice"}
        async with socket(served, headers=alice), socket(served, headers=alice):
            refusal = await rejected(
                url, subprotocols=["mcp"], extra_headers=[(b"x-client", b"alice")]
            )
            assert refusal.status_code == 429
            # When the first of its sockets is due to expire: unused, at most a minute.
            assert 1 <= int(dict(refusal.headers)[b"retry-after"]) <= 60
            async with socket(served, headers={"x-client": "bob"}):
                refusal = await rejected(
                    url, subprotocols=["mcp"], extra_headers=[(b"x-client", b"carol")]
                )
                assert refusal.status_code == 503
        # Closed sockets no longer count.
        await eventually(lambda: not served.app.websockets.sockets)
        async with socket(served, headers=alice) as peer:
            assert "result" in await peer.initialize()


# -- frames and closes -----------------------------------------------------------------------------


async def test_a_binary_frame_closes_the_socket_with_1003() -> None:
    async with serving(demo_server()) as served, socket(served) as peer:
        assert "result" in await peer.initialize()
        await peer.ws.send_message(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
        with pytest.raises(ConnectionClosed) as closed:
            await peer.ws.get_message()
        assert close_code(closed.value) == 1003


async def test_a_message_over_the_limit_closes_the_socket_with_1009() -> None:
    options = HttpOptions(websocket=WebSocketOptions(max_message_bytes=1000))
    async with serving(demo_server(), options) as served, socket(served) as peer:
        assert "result" in await peer.initialize()
        # Just under the limit is served: the limit is on bytes, and this text is 999 of them.
        text = "é" * ((1000 - len(json.dumps(tools_call(1, "echo", {"text": ""})))) // 2)
        small = json.dumps(tools_call(1, "echo", {"text": text}), ensure_ascii=False)
        assert len(small.encode()) <= 1000 < len(small) * 2
        await peer.ws.send_message(small)
        assert (await peer.recv())["result"]["content"][0]["text"] == text
        await peer.send(tools_call(2, "echo", {"text": "x" * 1000}))
        with pytest.raises(ConnectionClosed) as closed:
            await peer.ws.get_message()
        assert close_code(closed.value) == 1009


async def test_a_client_close_is_answered_and_a_server_shutdown_closes_with_1001() -> None:
    async with serving(demo_server()) as served:
        async with socket(served) as peer:
            assert "result" in await peer.initialize()
        assert peer.ws.closed is not None and peer.ws.closed.code == 1000
        await eventually(lambda: not served.app.websockets.sockets)
        async with socket(served) as peer:
            assert "result" in await peer.initialize()
            served.app.websockets.shutdown()
            with pytest.raises(ConnectionClosed) as closed:
                await peer.ws.get_message()
            assert close_code(closed.value) == 1001


async def test_hypercorn_stopping_closes_an_open_socket_with_1001_and_cancels_its_work() -> None:
    server = Server("parks")
    park = Park(server)
    async with serving(server, graceful_timeout=0.5) as served, socket(served) as peer:
        assert "result" in await peer.initialize()
        await peer.send(tools_call(1, "park"))
        await park.entered.wait()
        served.shutdown.set()  # hypercorn stops: after its grace it cancels the app's tasks
        with trio.fail_after(10), pytest.raises(ConnectionClosed) as closed:
            await peer.ws.get_message()
        assert close_code(closed.value) == 1001
        assert park.cancelled


async def test_a_dropped_socket_cancels_what_its_connection_has_in_flight() -> None:
    server = Server("parks")
    park = Park(server)
    async with serving(server) as served:
        async with socket(served) as peer:
            assert "result" in await peer.initialize()
            await peer.send(tools_call(1, "park"))
            await park.entered.wait()
            # Gone without a close frame: the TCP connection simply ends.
            await peer.ws._stream.aclose()
        with trio.fail_after(10):
            await park.finished.wait()
        assert park.cancelled
        await eventually(lambda: not served.app.websockets.sockets)


# -- the seeds' behaviours on this wire ------------------------------------------------------------


async def test_a_duplicate_in_flight_id_is_refused_and_the_first_request_completes() -> None:
    async with serving(demo_server()) as served, socket(served) as peer:
        assert "result" in await peer.initialize()
        await peer.send(
            tools_call(7, "sleep", {"seconds": 0.5}), tools_call(7, "echo", {"text": "duplicate"})
        )
        refused = await peer.recv()
        assert refused["id"] == 7
        assert refused["error"]["code"] == -32600, refused
        assert await peer.recv() == {
            "jsonrpc": "2.0",
            "id": 7,
            "result": {"content": [{"type": "text", "text": "slept 0.5s"}]},
        }


async def test_a_cancelled_notification_with_an_id_gets_method_not_found() -> None:
    async with serving(demo_server()) as served, socket(served) as peer:
        assert "result" in await peer.initialize()
        await peer.send(
            tools_call("s", "sleep", {"seconds": 0.3}),
            {
                "jsonrpc": "2.0",
                "id": 9,
                "method": "notifications/cancelled",
                "params": {"requestId": "s"},
            },
        )
        refused = await peer.recv()
        assert refused["id"] == 9
        assert refused["error"]["code"] == -32601, refused
        # Its handler never ran: the sleep it named was not cancelled, and completes.
        completed = await peer.recv()
        assert completed["id"] == "s" and "result" in completed


async def test_a_cancel_stops_the_handler_and_suppresses_the_response() -> None:
    server = Server("parks")
    park = Park(server)

    @server.tool()
    async def echo(text: str) -> str:
        return text

    async with serving(server) as served, socket(served) as peer:
        assert "result" in await peer.initialize()
        await peer.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "park", "arguments": {}, "_meta": {"progressToken": "p"}},
            }
        )
        assert (await peer.recv())["method"] == "notifications/progress"
        await park.entered.wait()
        cancel = {"requestId": 1, "reason": "changed my mind"}
        await peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
        with trio.fail_after(10):
            await park.finished.wait()
        assert park.cancelled
        # Nothing for request 1 comes: the next message is the answer to the next request.
        await peer.send(tools_call(2, "echo", {"text": "after"}))
        following = await peer.recv()
        assert following["id"] == 2, following


async def test_one_task_per_request_two_run_at_once() -> None:
    server = Server("concurrent")
    both = trio.Event()
    arrived = 0

    @server.tool()
    async def meet() -> str:
        nonlocal arrived
        arrived += 1
        if arrived == 2:
            both.set()
        await both.wait()  # the first can only finish once the second has started
        return "met"

    async with serving(server) as served, socket(served) as peer:
        assert "result" in await peer.initialize()
        await peer.send(tools_call(1, "meet"), tools_call(2, "meet"))
        answers = {(await peer.recv())["id"], (await peer.recv())["id"]}
        assert answers == {1, 2}


def tasks_below(running: str) -> list[list[str]]:
    """For every task in ``running`` (a function's qualified name, anywhere in the task's
    await chain), the tasks below it, by their coroutines' names."""
    found: list[list[str]] = []

    def below(task: trio.lowlevel.Task) -> list[str]:
        names = []
        for nursery in task.child_nurseries:
            for child in nursery.child_tasks:
                names += [child.coro.cr_code.co_qualname, *below(child)]
        return names

    def walk(task: trio.lowlevel.Task) -> None:
        if any(frame.f_code.co_qualname == running for frame, _ in task.iter_await_frames()):
            found.append(below(task))
        for nursery in task.child_nurseries:
            for child in nursery.child_tasks:
                walk(child)

    root = trio.lowlevel.current_root_task()
    assert root is not None
    walk(root)
    return found


async def test_an_idle_socket_holds_no_task_but_its_engines_writer() -> None:
    # The engine runs in the socket's own task (hypercorn's, for the ASGI call): a task and a
    # nursery started only to run it were 4.8 KB of every idle socket.
    async with serving(demo_server()) as served, socket(served) as one, socket(served) as two:
        for peer in (one, two):
            assert "result" in await peer.initialize()
        await trio.testing.wait_all_tasks_blocked(0.05)
        assert tasks_below("WebSocketEndpoint.__call__") == [["Engine._write_loop"]] * 2


async def test_the_modern_era_per_message_on_the_same_endpoint() -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    async with serving(demo_server()) as served, socket(served) as peer:
        await peer.send({"jsonrpc": "2.0", "id": 1, "method": "server/discover"})
        discovered = await peer.recv()
        assert discovered["result"]["supportedVersions"] == ["2026-07-28"], discovered
        call = tools_call(2, "echo", {"text": "modern"})
        call["params"]["_meta"] = meta
        await peer.send(call)
        answer = await peer.recv()
        assert answer["id"] == 2
        assert answer["result"]["resultType"] == "complete", answer
        assert answer["result"]["content"] == [{"type": "text", "text": "modern"}]


async def test_a_client_that_does_not_read_holds_up_its_writer_not_the_servers_memory() -> None:
    server = Server("big")
    server.max_queued_bytes = 64 * 1024
    served_calls = 0

    @server.tool()
    async def blob() -> str:
        nonlocal served_calls
        served_calls += 1
        return "x" * 64 * 1024

    async with serving(server) as served, socket(served) as peer:
        assert "result" in await peer.initialize()
        # Ask for far more than the socket's buffers and the engine's queue bound hold, and
        # read nothing: the writer waits for the socket, the engine stops reading requests.
        for rid in range(400):
            await peer.send(tools_call(rid, "blob"))
        await trio.sleep(0.5)
        stalled = served_calls
        await trio.sleep(0.5)
        assert served_calls == stalled < 400
        # And it all flows once the client reads.
        for _ in range(400):
            assert "result" in await peer.recv()
        assert served_calls == 400


async def test_with_ws_ping_interval_a_client_that_never_answers_is_closed_with_1011() -> None:
    options = HttpOptions(websocket=WebSocketOptions(ping_interval=0.2))
    async with serving(demo_server(), options) as served, socket(served) as peer:
        assert "result" in await peer.initialize()
        ping = await peer.recv()
        assert ping["method"] == "ping" and "id" in ping
        with trio.fail_after(5), pytest.raises(ConnectionClosed) as closed:
            while True:
                await peer.ws.get_message()
        assert close_code(closed.value) == 1011
        await eventually(lambda: not served.app.websockets.sockets)


async def test_with_ws_ping_interval_a_client_that_answers_stays() -> None:
    options = HttpOptions(websocket=WebSocketOptions(ping_interval=0.3))
    async with serving(demo_server(), options) as served, socket(served) as peer:
        assert "result" in await peer.initialize()
        for _ in range(3):
            ping = await peer.recv()
            assert ping["method"] == "ping"
            await peer.send({"jsonrpc": "2.0", "id": ping["id"], "result": {}})
        await peer.send(tools_call(1, "echo", {"text": "alive"}))
        while (answer := await peer.recv()).get("method") == "ping":
            await peer.send({"jsonrpc": "2.0", "id": answer["id"], "result": {}})
        assert answer["id"] == 1 and answer["result"]["content"][0]["text"] == "alive"
