"""The 2024-11-05 HTTP+SSE transport, server side, on a real hypercorn, exact wire.

A GET of ``/sse`` opens a session whose first event names the POST URL; POSTs are answered 202
and their answers come down the GET stream. The raw-wire seed checks of stdio
(``tests/interop/test_raw_wire.py``: duplicate id, id-bearing notification, cancel suppression)
have their HTTP+SSE version here, and so has every promise of the other transports.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import httpx
import orjson
import trio

from trio_mcp import Auth, Context, Principal, Server, StaticTokenVerifier
from trio_mcp.http import HttpOptions, LegacySse, Limits
from trio_mcp.http._legacy_sse import SseEndpoint, SseSession
from trio_mcp.protocol._oauth import parse_www_authenticate

from .._http import (
    GUARD,
    Park,
    Served,
    SseComment,
    SseReader,
    call_body,
    cancel_body,
    eventually,
    initialize_body,
    request_body,
    serving,
)
from .test_mount import hypercorn

OLD = "2024-11-05"


@attrs.define
class SsePeer:
    """One HTTP+SSE session spoken by hand: its stream, and its POST URL."""

    served: Served
    reader: SseReader
    endpoint: str
    response: httpx.Response

    @property
    def url(self) -> str:
        return self.served.base + self.endpoint

    async def post(self, body: Any, **headers: str) -> httpx.Response:
        return await self.served.client.post(
            self.url,
            content=body if isinstance(body, bytes) else orjson.dumps(body),
            headers={"content-type": "application/json", **headers},
        )

    async def send(self, body: Any) -> None:
        response = await self.post(body)
        assert response.status_code == 202, response.text
        assert response.text == "Accepted"

    async def recv(self) -> Any:
        return await self.reader.message()

    async def initialize(self, version: str = OLD) -> Any:
        await self.send(initialize_body(version))
        answer = await self.recv()
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer


@asynccontextmanager
async def sse_peer(
    served: Served, *, initialize: bool = True, **headers: str
) -> AsyncIterator[SsePeer]:
    async with served.client.stream("GET", served.base + "/sse", headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        reader = SseReader(response)
        first = await reader.next()
        assert first is not None and first.event == "endpoint"
        peer = SsePeer(served, reader, first.data, response)
        if initialize:
            await peer.initialize()
        yield peer


def sse_sessions(served: Served) -> dict[str, SseSession]:
    """The app's HTTP+SSE sessions, by id."""
    assert isinstance(served.app.sse, SseEndpoint)
    return served.app.sse.sessions


def demo() -> Server:
    server = Server("sse-demo")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    return server


# -- the session -----------------------------------------------------------------------------------


async def test_the_first_event_names_the_endpoint_and_the_session_then_messages_follow() -> None:
    async with serving(demo()) as served, sse_peer(served, initialize=False) as peer:
        path, _, query = peer.endpoint.partition("?")
        assert path == "/messages/"
        name, _, session_id = query.partition("=")
        assert name == "session_id" and len(session_id) == 32  # 128 random bits, in hex
        answer = await peer.initialize()
        assert answer["id"] == "init"
        assert answer["result"]["protocolVersion"] == OLD
        assert answer["result"]["serverInfo"]["name"] == "sse-demo"
        await peer.send(call_body(2, "add", {"a": 2, "b": 3}))
        result = await peer.recv()
        assert result == {
            "jsonrpc": "2.0",
            "id": 2,
            "result": {
                "content": [{"type": "text", "text": "5"}],
                "structuredContent": {"result": 5},
            },
        }


async def test_a_later_handshake_version_is_negotiated_as_asked() -> None:
    async with serving(demo()) as served, sse_peer(served, initialize=False) as peer:
        answer = await peer.initialize("2025-06-18")
        assert answer["result"]["protocolVersion"] == "2025-06-18"


async def test_each_session_has_its_own_unguessable_id() -> None:
    async with serving(demo()) as served, sse_peer(served) as one, sse_peer(served) as two:
        assert one.endpoint != two.endpoint
        assert len(sse_sessions(served)) == 2


async def test_a_batch_is_accepted_and_answered_as_one() -> None:
    async with serving(demo()) as served, sse_peer(served) as peer:
        await peer.send([call_body(1, "add", {"a": 1, "b": 1}), request_body(2, "tools/list")])
        batch = await peer.recv()
        assert isinstance(batch, list)
        assert sorted(item["id"] for item in batch) == [1, 2]


async def test_keepalive_comments_on_an_idle_stream() -> None:
    options = HttpOptions(keepalive_interval=0.05)
    async with serving(demo(), options) as served, sse_peer(served) as peer:
        comments = [await peer.reader.item() for _ in range(2)]
        assert comments == [SseComment("keepalive")] * 2
        await peer.send(call_body(3, "add", {"a": 1, "b": 2}))
        assert (await peer.recv())["id"] == 3


async def test_mounted_under_a_root_path_the_endpoint_names_it() -> None:
    server = demo()
    async with (
        hypercorn(server.http_app(), root_path="/svc") as base,
        httpx.AsyncClient(timeout=GUARD) as http,
        http.stream("GET", base + "/svc/sse") as response,
    ):
        first = await SseReader(response).next()
        assert first is not None and first.event == "endpoint"
        assert first.data.startswith("/svc/messages/?session_id=")
        posted = await http.post(base + first.data, json=request_body(1, "ping"))
        assert posted.status_code == 202


# -- refusals ------------------------------------------------------------------------------------


async def test_refusals_of_the_messages_endpoint() -> None:
    async with serving(demo(), HttpOptions(limits=Limits(max_body_bytes=1000))) as served:
        client = served.client
        messages = served.base + "/messages/"
        ping = request_body(1, "ping")
        missing = await client.post(messages, json=ping)
        assert missing.status_code == 400
        assert "session_id" in missing.json()["error"]["message"]
        unknown = await client.post(messages + "?session_id=" + "0" * 32, json=ping)
        assert unknown.status_code == 404
        async with sse_peer(served) as peer:
            bad_json = await peer.post(b"{not json")
            assert bad_json.status_code == 400
            assert bad_json.json()["error"]["code"] == -32700
            invalid = await peer.post({"jsonrpc": "2.0", "id": 1})
            assert invalid.status_code == 400
            assert invalid.json()["error"]["code"] == -32600
            large = await peer.post(call_body(1, "add", {"a": 1, "b": 1, "pad": "x" * 2000}))
            assert large.status_code == 413
            text = await served.client.post(
                peer.url, content=orjson.dumps(ping), headers={"content-type": "text/plain"}
            )
            assert text.status_code == 415
            get = await served.client.get(peer.url)
            assert get.status_code == 405 and get.headers["allow"] == "POST"
            # None of it reached the engine: the session still answers.
            await peer.send(request_body(7, "ping"))
            assert (await peer.recv()) == {"jsonrpc": "2.0", "id": 7, "result": {}}
        posted = await client.post(served.base + "/sse", json=ping)
        assert posted.status_code == 405 and posted.headers["allow"] == "GET"


async def test_the_host_and_origin_checks_are_streamable_https() -> None:
    async with serving(demo()) as served:
        evil = await served.client.get(
            served.base + "/sse", headers={"origin": "http://evil.example"}
        )
        assert evil.status_code == 403
        assert "Origin" in evil.json()["error"]["message"]
        host = await served.client.get(served.base + "/sse", headers={"host": "evil.example"})
        assert host.status_code == 403
        async with sse_peer(served) as peer:
            refused = await peer.post(request_body(1, "ping"), origin="http://evil.example")
            assert refused.status_code == 403


async def test_the_sse_endpoints_can_be_moved_or_switched_off() -> None:
    options = HttpOptions(legacy_sse=LegacySse(path="/events", messages_path="/post"))
    async with serving(demo(), options) as served:
        assert (await served.client.get(served.base + "/sse")).status_code == 404
        async with served.client.stream("GET", served.base + "/events") as response:
            first = await SseReader(response).next()
            assert first is not None and first.data.startswith("/post?session_id=")
    async with serving(demo(), HttpOptions(legacy_sse=None)) as served:
        assert (await served.client.get(served.base + "/sse")).status_code == 404


async def test_sessions_per_client_are_limited() -> None:
    async with serving(demo(), HttpOptions(limits=Limits(max_sessions_per_client=1))) as served:
        async with sse_peer(served, initialize=False):
            second = await served.client.get(served.base + "/sse")
            assert second.status_code == 429
            # When its session is due to expire: unused, at most unused_session_timeout.
            assert 1 <= int(second.headers["retry-after"]) <= 60
        await eventually(lambda: not sse_sessions(served))
        async with sse_peer(served, initialize=False):
            pass


async def test_a_session_never_initialized_ends_after_unused_session_timeout() -> None:
    options = HttpOptions(keepalive_interval=0.05, limits=Limits(unused_session_timeout=0.2))
    async with serving(demo(), options) as served, sse_peer(served, initialize=False) as peer:
        with trio.fail_after(GUARD):
            assert await peer.reader.rest() == []  # the stream ends, with no message


# -- authorization ---------------------------------------------------------------------------------


async def test_with_auth_get_and_post_need_the_token_and_the_session_is_its_owners() -> None:
    verifier = StaticTokenVerifier(
        {
            "alice-token-0123456789": Principal("alice", scopes=frozenset({"mcp"})),
            "bob-token-0123456789": Principal("bob", scopes=frozenset({"mcp"})),
        }
    )
    server = Server("protected", auth=Auth(verifier, "http://127.0.0.1/mcp", required_scopes="mcp"))

    @server.tool()
    async def whoami(ctx: Context) -> str:
        assert ctx.auth is not None
        return str(ctx.auth.subject)

    async with serving(server) as served:
        bare = await served.client.get(served.base + "/sse")
        assert bare.status_code == 401
        challenge = parse_www_authenticate(bare.headers.get_list("www-authenticate"))[0]
        assert challenge.scheme.lower() == "bearer"
        alice = {"authorization": "Bearer alice-token-0123456789"}
        async with sse_peer(served, initialize=False, **alice) as peer:
            unauthorized = await peer.post(request_body(1, "ping"))
            assert unauthorized.status_code == 401
            assert "www-authenticate" in unauthorized.headers
            # Another principal's token does not reach alice's session: it does not exist.
            other = await peer.post(
                request_body(1, "ping"), authorization="Bearer bob-token-0123456789"
            )
            assert other.status_code == 404
            accepted = await peer.post(initialize_body(OLD), **alice)
            assert accepted.status_code == 202
            assert (await peer.recv())["id"] == "init"
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await peer.post(note, **alice)).status_code == 202
            assert (await peer.post(call_body(2, "whoami"), **alice)).status_code == 202
            answer = await peer.recv()
            assert answer["result"]["content"][0]["text"] == "alice"


# -- what every transport promises -----------------------------------------------------------------


async def test_a_duplicate_in_flight_id_is_refused_and_the_first_request_completes() -> None:
    server = demo()
    park = Park(server)
    async with serving(server) as served, sse_peer(served) as peer:
        await peer.send(call_body(5, "park"))
        await park.entered.wait()
        assert (await peer.recv())["method"] == "notifications/progress"
        await peer.send(call_body(5, "add", {"a": 1, "b": 1}))
        refused = await peer.recv()
        assert refused["id"] == 5 and refused["error"]["code"] == -32600
        park.release.set()
        messages = [await peer.recv(), await peer.recv()]
        assert messages[0]["method"] == "notifications/progress"
        assert messages[1]["id"] == 5
        assert messages[1]["result"]["content"][0]["text"] == "done"
        assert not park.cancelled


async def test_a_notification_method_with_an_id_gets_method_not_found() -> None:
    server = demo()
    park = Park(server)
    async with serving(server) as served, sse_peer(served) as peer:
        await peer.send(call_body(9, "park"))
        await park.entered.wait()
        assert (await peer.recv())["method"] == "notifications/progress"
        # A cancel that carries an id is no notification: refused, and it cancels nothing.
        await peer.send({**cancel_body(9), "id": 10})
        refused = await peer.recv()
        assert refused["id"] == 10 and refused["error"]["code"] == -32601
        park.release.set()
        assert (await peer.recv())["method"] == "notifications/progress"
        assert (await peer.recv())["id"] == 9
        assert not park.cancelled


async def test_a_cancel_stops_the_handler_and_suppresses_the_response() -> None:
    server = demo()
    park = Park(server)
    async with serving(server) as served, sse_peer(served) as peer:
        await peer.send(call_body(4, "park"))
        await park.entered.wait()
        assert (await peer.recv())["method"] == "notifications/progress"
        await peer.send(cancel_body(4))
        await park.finished.wait()
        assert park.cancelled
        # The next message on the stream answers the next request: nothing came for 4.
        await peer.send(request_body(5, "ping"))
        assert (await peer.recv()) == {"jsonrpc": "2.0", "id": 5, "result": {}}


async def test_requests_run_at_once_each_in_its_own_task() -> None:
    server = demo()
    park = Park(server)
    async with serving(server) as served, sse_peer(served) as peer:
        await peer.send(call_body(1, "park"))
        await park.entered.wait()
        assert (await peer.recv())["method"] == "notifications/progress"
        # While 1 waits, 2 is answered.
        await peer.send(call_body(2, "add", {"a": 2, "b": 2}))
        assert (await peer.recv())["id"] == 2
        park.release.set()
        assert (await peer.recv())["method"] == "notifications/progress"
        assert (await peer.recv())["id"] == 1


async def test_a_dropped_get_stream_cancels_that_sessions_work() -> None:
    server = demo()
    park = Park(server)
    async with serving(server) as served:
        async with sse_peer(served) as peer:
            url = peer.url
            await peer.send(call_body(1, "park"))
            await park.entered.wait()
        # The client hung up: the handler is cancelled, the session is gone.
        await park.finished.wait()
        assert park.cancelled
        await eventually(lambda: not sse_sessions(served))
        await eventually(lambda: not served.app.server.connections)
        gone = await served.client.post(url, json=request_body(2, "ping"))
        assert gone.status_code == 404


async def test_a_client_that_does_not_read_has_its_session_ended() -> None:
    """Bounded memory: past ``max_pending_events`` queued for the stream, the session ends
    (its handlers cancelled) rather than queue without end."""
    server = demo()
    flooding = trio.Event()
    cancelled = trio.Event()

    @server.tool()
    async def flood(ctx: Context) -> str:
        flooding.set()
        try:
            for n in range(100_000):
                await ctx.report_progress(n, message="x" * 4096)
        except trio.Cancelled:
            cancelled.set()
            raise
        return "never"

    options = HttpOptions(limits=Limits(max_pending_events=8))
    async with serving(server, options) as served, sse_peer(served) as peer:
        (session,) = sse_sessions(served).values()
        await peer.send(call_body(1, "flood"))
        # Read nothing more: the socket's buffers fill, then the session's queue.
        await flooding.wait()
        await cancelled.wait()
        assert session.overflowed  # ended by its bound, not by anything else
        assert session.transport.queued_bytes <= options.limits.max_pending_bytes
        await eventually(lambda: not sse_sessions(served))


async def test_shutdown_ends_the_streams_and_the_sessions() -> None:
    server = demo()
    park = Park(server)
    options = HttpOptions(shutdown_grace=0.5)
    async with serving(server, options) as served, sse_peer(served) as peer:
        await peer.send(call_body(1, "park"))
        await park.entered.wait()
        assert (await peer.recv())["method"] == "notifications/progress"
        served.shutdown.set()  # hypercorn stops, and runs the lifespan's shutdown
        with trio.fail_after(GUARD), contextlib.suppress(httpx.RemoteProtocolError):
            await peer.reader.rest()  # the stream ends: closed, or cut by hypercorn
        await park.finished.wait()
        assert park.cancelled


async def test_while_draining_new_sessions_and_requests_are_refused_answers_pass() -> None:
    server = demo()
    async with serving(server) as served, sse_peer(served) as peer:
        served.app.begin_drain()
        opened = await served.client.get(served.base + "/sse")
        assert opened.status_code == 503
        refused = await peer.post(request_body(1, "ping"))
        assert refused.status_code == 503 and refused.json()["id"] == 1
        note = {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}
        assert (await peer.post(note)).status_code == 202
