"""The Streamable HTTP client against a real hypercorn on loopback.

ASGI wrappers around the app record what reached the server, or change it (cut a stream,
answer with an error, hold a request), so each test sees the wire as the server saw it.
"""

from __future__ import annotations

import functools
import socket
import struct
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson
import pytest
import trio

from trio_mcp import (
    ConnectionClosed,
    Context,
    CreateMessageRequestParams,
    CreateMessageResult,
    HttpTarget,
    ProtocolError,
    RequestRecord,
    Server,
    TextContent,
    open_client,
)
from trio_mcp._demo import demo_server
from trio_mcp.http import HttpOptions
from trio_mcp.protocol import SESSION_EXPIRED

from .._http import (
    GUARD,
    App,
    Message,
    Receive,
    Recorder,
    Scope,
    Seen,
    Send,
    only,
    serving_app,
    text_of,
)
from .._ports import free_port as _free_port

# -- the everyday paths ----------------------------------------------------------------------------


async def test_tools_calls_and_progress_over_sse() -> None:
    app = demo_server().http_app()
    with trio.fail_after(GUARD):
        async with serving_app(app) as url, open_client(url) as client:
            assert [tool.name for tool in await client.list_tools()] == ["echo", "add", "sleep"]
            assert text_of(await client.call_tool("echo", {"text": "hi"})) == "hi"
            assert text_of(await client.call_tool("add", {"a": 2, "b": 3})) == "5"
            progress: list[tuple[float, float | None]] = []
            result = await client.call_tool(
                "sleep", {"seconds": 0.3}, on_progress=lambda p, t, m: progress.append((p, t))
            )
            assert text_of(result) == "slept 0.3s"
            assert progress == [(0.1, 0.3), (0.2, 0.3), (0.3, 0.3)]
            assert client.protocol_version == "2025-11-25"


async def test_json_response_mode() -> None:
    app = Recorder(demo_server().http_app(HttpOptions(json_response=True)))
    with trio.fail_after(GUARD):
        async with serving_app(app) as url, open_client(url) as client:
            assert len(await client.list_tools()) == 3
            assert text_of(await client.call_tool("add", {"a": 1.5, "b": 1})) == "2.5"
            assert text_of(await client.call_tool("echo", {"text": "json"})) == "json"
    assert [s.status for s in app.posts("tools/call")] == [200, 200]


@pytest.mark.invariant(6)
async def test_a_cancelled_caller_cancels_the_handler_on_the_server() -> None:
    started = trio.Event()
    records: list[RequestRecord] = []
    recorded = trio.Event()
    handler_cancelled = trio.Event()

    def on_request(record: RequestRecord) -> None:
        records.append(record)
        if record.method == "tools/call":
            recorded.set()

    server = Server("blocker", on_request=on_request)

    @server.tool()
    async def block() -> str:
        started.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            handler_cancelled.set()
            raise
        return "unreachable"

    with trio.fail_after(GUARD):
        async with serving_app(server.http_app()) as url, open_client(url) as client:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.call_tool, "block", {})
                await started.wait()
                nursery.cancel_scope.cancel()
            await handler_cancelled.wait()
            await recorded.wait()
            call = [r for r in records if r.method == "tools/call"]
            assert call[0].cancelled
            # The connection is still good.
            await client.ping()


class HoldTheCall(Recorder):
    """Holds the tools/call POST (up to a second) to let a cancel overtake it if it can."""

    def __init__(self, app: App) -> None:
        super().__init__(app)
        self.order: list[str] = []
        self.call_arrived = trio.Event()
        self.cancel_arrived = trio.Event()

    async def handle(self, seen: Seen, scope: Scope, receive: Receive, send: Send) -> None:
        if seen.rpc_method == "notifications/cancelled":
            self.order.append("cancel")
            self.cancel_arrived.set()
        elif seen.rpc_method == "tools/call":
            self.call_arrived.set()
            with trio.move_on_after(1.0):  # long enough for an unordered cancel to arrive
                await self.cancel_arrived.wait()

            async def started(message: Message) -> None:
                if message["type"] == "http.response.start":
                    self.order.append("call answered")
                await send(message)

            await self.app(scope, receive, started)
            return
        await self.app(scope, receive, send)


@pytest.mark.invariant(7)
async def test_a_cancel_never_overtakes_its_request() -> None:
    handler_cancelled = trio.Event()
    server = Server("blocker")

    @server.tool()
    async def block() -> str:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            handler_cancelled.set()
            raise
        return "unreachable"

    app = HoldTheCall(server.http_app())
    with trio.fail_after(GUARD):
        async with serving_app(app) as url, open_client(url) as client:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.call_tool, "block", {})
                await app.call_arrived.wait()
                nursery.cancel_scope.cancel()
            await handler_cancelled.wait()
    assert app.order == ["call answered", "cancel"]


async def test_nested_sampling_is_answered_by_post() -> None:
    server = Server("asker")

    @server.tool()
    async def ask(question: str, ctx: Context) -> str:
        answer = await ctx.sample(question, max_tokens=10)
        assert isinstance(answer.content, TextContent)
        return answer.content.text

    asked: list[CreateMessageRequestParams] = []

    async def on_sample(params: CreateMessageRequestParams) -> CreateMessageResult:
        asked.append(params)
        return CreateMessageResult(role="assistant", content=TextContent("42"), model="m")

    app = Recorder(server.http_app())
    with trio.fail_after(GUARD):
        async with serving_app(app) as url, open_client(url, on_sample=on_sample) as client:
            result = await client.call_tool("ask", {"question": "meaning?"})
            assert text_of(result) == "42"
    assert len(asked) == 1
    answers = [s for s in app.seen if s.method == "POST" and "result" in (s.json or {})]
    assert len(answers) == 1
    assert answers[0].json["result"]["model"] == "m"
    assert answers[0].status == 202


async def test_the_get_stream_delivers_server_notifications() -> None:
    inner = demo_server().http_app()
    app = Recorder(inner)
    got = trio.Event()
    methods: list[str] = []

    def on_notification(method: str, params: Any) -> None:
        methods.append(method)
        got.set()

    with trio.fail_after(GUARD):
        async with serving_app(app) as url, open_client(url, on_notification=on_notification):
            # Not tied to any request: it goes on the session's standalone (GET) stream.
            inner.sessions[only(inner.sessions)].connection.send_list_changed("tools")
            await got.wait()
    assert methods == ["notifications/tools/list_changed"]
    gets = [s for s in app.seen if s.method == "GET"]
    assert gets
    assert gets[0].headers["accept"] == "text/event-stream"
    assert "mcp-session-id" in gets[0].headers


async def test_server_notify_list_changed_reaches_http_clients() -> None:
    server = demo_server()
    got = trio.Event()
    with trio.fail_after(GUARD):
        async with (
            serving_app(server.http_app()) as url,
            open_client(url, on_notification=lambda method, params: got.set()),
        ):
            server.notify_list_changed("tools")
            await got.wait()


# -- headers, the session and closing --------------------------------------------------------------


class CounterOffer(Recorder):
    """Makes the server see an unknown offered version, so it counter-offers its latest."""

    async def handle(self, seen: Seen, scope: Scope, receive: Receive, send: Send) -> None:
        if seen.rpc_method == "initialize":
            body = seen.body.replace(b'"2025-06-18"', b'"1999-01-01"')
            given = False

            async def rewritten() -> Message:
                nonlocal given
                if given:
                    return await receive()
                given = True
                return {"type": "http.request", "body": body, "more_body": False}

            await self.app(scope, rewritten, send)
            return
        await self.app(scope, receive, send)


async def test_headers_follow_the_negotiated_version_and_session() -> None:
    inner = demo_server().http_app()
    app = CounterOffer(inner)
    with trio.fail_after(GUARD):
        async with serving_app(app) as url, httpx.AsyncClient() as http:
            async with open_client(
                HttpTarget(
                    url,
                    headers={"Authorization": "Bearer t0k", "Mcp-Session-Id": "mine"},
                    http_client=http,
                ),
                protocol_version="2025-06-18",
            ) as client:
                assert client.protocol_version == "2025-11-25"  # the counter-offer is adopted
                await client.list_tools()
                session_id = only(inner.sessions)
            assert not http.is_closed  # a client we were given is left open
    initialize, *rest = app.seen
    assert initialize.rpc_method == "initialize"
    assert "mcp-protocol-version" not in initialize.headers
    assert "mcp-session-id" not in initialize.headers
    assert initialize.headers["accept"] == "application/json, text/event-stream"
    assert initialize.headers["content-type"] == "application/json"
    assert initialize.headers["authorization"] == "Bearer t0k"
    assert rest
    for seen in rest:
        assert seen.headers["mcp-protocol-version"] == "2025-11-25", seen
        assert seen.headers["mcp-session-id"] == session_id, seen
        assert seen.headers["authorization"] == "Bearer t0k", seen
    assert rest[0].rpc_method == "notifications/initialized"
    deletes = [s for s in rest if s.method == "DELETE"]
    assert len(deletes) == 1
    assert deletes[0].status == 200
    assert inner.sessions == {}


async def test_a_forgotten_session_is_renewed_and_safe_requests_repeated() -> None:
    records: list[RequestRecord] = []
    server = demo_server()
    server.on_request = records.append
    inner = server.http_app()
    app = Recorder(inner)
    with trio.fail_after(GUARD):
        async with serving_app(app) as url, open_client(url) as client:
            first = only(inner.sessions)
            inner.sessions.pop(first).close()
            # Two safe requests at once: one new session for both, both repeated.
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.list_tools)
                nursery.start_soon(client.ping)
            second = only(inner.sessions)
            assert second != first
            assert len(app.posts("initialize")) == 2
            renewal = app.posts("initialize")[1]
            assert "mcp-session-id" not in renewal.headers
            assert renewal.json["params"] == app.posts("initialize")[0].json["params"]
            lists = app.posts("tools/list")
            assert [(s.headers["mcp-session-id"], s.status) for s in lists] == [
                (first, 404),
                (second, 200),
            ]
            initialized = app.posts("notifications/initialized")
            assert initialized[-1].headers["mcp-session-id"] == second

            # tools/call is not repeated: it fails alone, and the next call works.
            inner.sessions.pop(second).close()
            with pytest.raises(ProtocolError) as info:
                await client.call_tool("echo", {"text": "lost"})
            assert info.value.code == SESSION_EXPIRED
            assert info.value.message.startswith("Session expired:")
            assert text_of(await client.call_tool("echo", {"text": "kept"})) == "kept"
    calls = [r for r in records if r.method == "tools/call"]
    assert len(calls) == 1


class CutFirstCall(Recorder):
    """Ends the first tools/call response stream right after its first message event, and
    shortens the server's retry so the test does not wait a second."""

    def __init__(self, app: App) -> None:
        super().__init__(app)
        self.cut = False
        self.first_event_id: str | None = None

    async def handle(self, seen: Seen, scope: Scope, receive: Receive, send: Send) -> None:
        if seen.rpc_method != "tools/call" or self.cut:
            await self.app(scope, receive, send)
            return
        self.cut = True
        ended = False

        async def cutting(message: Message) -> None:
            nonlocal ended
            if ended:
                raise OSError("the client went away")  # what the app sees on a dead socket
            if message["type"] == "http.response.body":
                body = message.get("body", b"").replace(b"retry: 1000", b"retry: 20")
                message = {**message, "body": body}
                if b"event: message" in body:
                    for line in body.split(b"\n"):
                        if line.startswith(b"id: "):
                            self.first_event_id = line[4:].decode()
                    await send(message)
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    ended = True
                    return
            await send(message)

        await self.app(scope, receive, cutting)


async def test_a_cut_response_stream_is_resumed_with_last_event_id() -> None:
    app = CutFirstCall(demo_server().http_app())
    with trio.fail_after(GUARD):
        async with serving_app(app) as url, open_client(url) as client:
            progress: list[float] = []
            result = await client.call_tool(
                "sleep", {"seconds": 0.5}, on_progress=lambda p, t, m: progress.append(p)
            )
            assert text_of(result) == "slept 0.5s"
            assert progress == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert app.first_event_id is not None
    resumes = [s for s in app.seen if s.method == "GET" and "last-event-id" in s.headers]
    assert resumes[0].headers["last-event-id"] == app.first_event_id
    assert resumes[0].status == 200


class Refuse(Recorder):
    """Answers tools/call POSTs with a fixed HTTP error."""

    def __init__(self, app: App, status: int, body: bytes, content_type: bytes) -> None:
        super().__init__(app)
        self.status = status
        self.response_body = body
        self.content_type = content_type

    async def handle(self, seen: Seen, scope: Scope, receive: Receive, send: Send) -> None:
        if seen.rpc_method != "tools/call":
            await self.app(scope, receive, send)
            return
        headers = [(b"content-type", self.content_type)]
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": self.response_body})


async def test_an_http_error_status_is_a_protocol_error_not_a_hang() -> None:
    app = Refuse(demo_server().http_app(), 500, b"boom", b"text/plain")
    with trio.fail_after(GUARD):
        async with serving_app(app) as url, open_client(url) as client:
            with pytest.raises(ProtocolError) as info:
                await client.call_tool("echo", {"text": "x"})
            assert info.value.code == -32603
            assert info.value.message == "HTTP 500: Internal Server Error"
            assert info.value.data == {"httpStatus": 500}
            assert len(await client.list_tools()) == 3  # only that request failed


async def test_a_request_answered_202_with_no_response_fails_instead_of_waiting() -> None:
    """A request's answer comes on its own POST or never: a bare 202 (a server that dropped the
    request as it stopped) is the caller's error at once, not a wait for an answer elsewhere."""
    app = Refuse(demo_server().http_app(), 202, b"", b"text/plain")
    with trio.fail_after(GUARD):
        async with serving_app(app) as url, open_client(url) as client:
            with pytest.raises(ProtocolError) as info:
                await client.call_tool("echo", {"text": "x"})
            assert info.value.code == -32603
            assert info.value.message == (
                "the server accepted the request (HTTP 202) but will send no response to it"
            )
            assert info.value.data == {"httpStatus": 202}
            assert len(await client.list_tools()) == 3  # only that request failed


async def test_an_http_error_with_a_json_rpc_body_keeps_its_error() -> None:
    body = orjson.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Bad Request: no"}}
    )
    app = Refuse(demo_server().http_app(), 400, body, b"application/json")
    with trio.fail_after(GUARD):
        async with serving_app(app) as url, open_client(url) as client:
            with pytest.raises(ProtocolError) as info:
                await client.call_tool("echo", {"text": "x"})
            assert (info.value.code, info.value.message) == (-32600, "Bad Request: no")


async def test_a_404_saying_method_not_found_is_not_an_expired_session() -> None:
    body = orjson.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32601, "message": "Method not found"}}
    )
    app = Refuse(demo_server().http_app(), 404, body, b"application/json")
    with trio.fail_after(GUARD):
        async with serving_app(app) as url, open_client(url) as client:
            with pytest.raises(ProtocolError) as info:
                await client.call_tool("echo", {"text": "x"})
            assert info.value.code == -32601
    assert len(app.posts("initialize")) == 1


async def test_no_server_is_a_connection_error() -> None:
    with trio.fail_after(GUARD), pytest.raises(ConnectionClosed):
        async with open_client(f"http://127.0.0.1:{_free_port()}/mcp"):
            pass  # pragma: no cover


async def test_a_lost_request_post_fails_only_that_request() -> None:
    """A connection failure on one POST is that request's error; the session goes on."""
    inner = demo_server().http_app()
    async with serving_app(inner) as url:
        real = httpx.AsyncHTTPTransport()

        class FlakyTransport(httpx.AsyncBaseTransport):
            async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
                if b'"tools/call"' in request.content:
                    raise httpx.ConnectError("refused", request=request)
                return await real.handle_async_request(request)

        with trio.fail_after(GUARD):
            async with (
                httpx.AsyncClient(transport=FlakyTransport()) as http,
                open_client(HttpTarget(url, http_client=http)) as client,
            ):
                with pytest.raises(ProtocolError) as info:
                    await client.call_tool("echo", {"text": "x"})
                assert "ConnectError" in info.value.message
                assert len(await client.list_tools()) == 3


@asynccontextmanager
async def _demo_behind_a_resetting_relay(
    marker: bytes, *, after_quiet: float | None = None
) -> AsyncIterator[tuple[str, list[bytes], list[str]]]:
    """The demo server behind a TCP relay that resets, once, the connection whose bytes first
    carry ``marker`` (before passing them on), as a busy server or a proxy does; with
    ``after_quiet``, only once they come after that many seconds of silence on a connection
    that carried bytes before (as a server closing an idle connection meets a request sent
    at that moment). Yields the relay's URL, the bytes of the connection it reset and the
    methods the server ran."""
    server = demo_server()
    ran: list[str] = []
    server.on_request = lambda record: ran.append(record.method)
    reset: list[bytes] = []

    async def pump(source: trio.SocketStream, sink: trio.SocketStream, watch: bool) -> None:
        seen = b""
        last = trio.current_time()
        async for chunk in source:
            quiet, last = trio.current_time() - last, trio.current_time()
            seen += chunk
            idle = after_quiet is None or (quiet >= after_quiet and len(seen) > len(chunk))
            if watch and not reset and marker in seen and idle:
                reset.append(seen)
                source.socket.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                raise trio.BrokenResourceError  # the RST: closed with nothing lingering
            await sink.send_all(chunk)

    async def relay(client: trio.SocketStream) -> None:
        backend = await trio.open_tcp_stream(upstream.host, upstream.port or 80)
        try:
            async with trio.open_nursery() as nursery:

                async def one_way(a: trio.SocketStream, b: trio.SocketStream, w: bool) -> None:
                    try:
                        await pump(a, b, w)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        pass
                    nursery.cancel_scope.cancel()

                nursery.start_soon(one_way, client, backend, True)
                nursery.start_soon(one_way, backend, client, False)
        finally:
            await backend.aclose()
            await client.aclose()

    async with serving_app(server.http_app()) as url, trio.open_nursery() as nursery:
        upstream = httpx.URL(url)
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, host="127.0.0.1"), relay, 0
        )
        port = listeners[0].socket.getsockname()[1]
        yield str(upstream.copy_with(port=port)), reset, ran
        nursery.cancel_scope.cancel()


async def test_a_discovery_lost_to_a_connection_reset_is_sent_again() -> None:
    """A server that resets the connection of a ``server/discover`` before answering (a full
    backlog, a proxy) costs one more POST, not the connection: discovery changes nothing."""
    with trio.fail_after(GUARD):
        async with (
            _demo_behind_a_resetting_relay(b'"server/discover"') as (url, reset, ran),
            open_client(url, mode="modern") as client,
        ):
            assert len(await client.list_tools()) == 3
    assert len(reset) == 1 and b'"server/discover"' in reset[0]
    assert ran.count("server/discover") == 1


async def test_a_tool_call_lost_to_a_connection_reset_is_not_sent_again() -> None:
    """Nothing says whether a reset request ran: a call, which may change things, fails with
    the reset and is not repeated; the connection goes on."""
    with trio.fail_after(GUARD):
        async with (
            _demo_behind_a_resetting_relay(b'"tools/call"') as (url, reset, ran),
            open_client(url, mode="modern") as client,
        ):
            with pytest.raises(ProtocolError) as info:
                await client.call_tool("echo", {"text": "once"})
            assert "HTTP request failed" in info.value.message
            assert text_of(await client.call_tool("echo", {"text": "twice"})) == "twice"
    assert len(reset) == 1
    assert ran.count("tools/call") == 1  # the second; the first never ran


async def test_a_connection_idle_past_four_seconds_is_not_reused() -> None:
    """hypercorn, uvicorn and Node close a connection idle 5 s; a request sent on it at that
    moment meets the close, and a call cannot be sent again. The client lets an idle
    connection go after 4 s: a call made after a longer pause goes on a new connection, where
    a pooled one would be reset here (the relay resets bytes that come after 4.2 s of quiet on
    a connection)."""
    with trio.fail_after(GUARD):
        async with (
            _demo_behind_a_resetting_relay(b'"tools/call"', after_quiet=4.2) as (url, reset, ran),
            open_client(url, mode="modern") as client,
        ):
            assert text_of(await client.call_tool("echo", {"text": "before"})) == "before"
            await trio.sleep(4.4)
            assert text_of(await client.call_tool("echo", {"text": "after"})) == "after"
    assert reset == []
    assert ran.count("tools/call") == 2


async def test_headers_are_only_for_urls() -> None:
    with pytest.raises(TypeError, match=r"headers= is an option of an HTTP .*HttpTarget\(url"):
        async with open_client(demo_server(), headers={"a": "b"}):
            pass  # pragma: no cover


async def test_the_command_line_speaks_http() -> None:
    async with serving_app(demo_server().http_app()) as url:
        with trio.fail_after(GUARD):
            listed = await trio.run_process(
                [sys.executable, "-m", "trio_mcp", "tools", url], capture_stdout=True
            )
            called = await trio.run_process(
                [sys.executable, "-m", "trio_mcp", "call", url, "add", '{"a": 2, "b": 40}'],
                capture_stdout=True,
            )
    assert b"echo(text: string)" in listed.stdout
    assert called.stdout.strip() == b"42"
