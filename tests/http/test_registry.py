"""One session registry for every transport, on a real hypercorn: the caps count Streamable HTTP
sessions, HTTP+SSE sessions and sockets together, per client (the principal when there is one)
and in all; one idle expiry closes an HTTP+SSE session and a socket as it ends a Streamable
HTTP session; one drain waits for the requests of all three and ends them with one error."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson
import pytest
import trio
import trio.testing
from trio.testing import MockClock
from trio_websocket import ConnectionClosed

from trio_mcp import Auth, Principal, Server, StaticTokenVerifier
from trio_mcp.http import HttpOptions, Limits
from trio_mcp.http._http_session import HttpSession
from trio_mcp.http._sessions import CUT_BY_SHUTDOWN

from .._http import GUARD, Park, Served, SseReader, call_body, initialize_body, serving
from .test_legacy_sse import SsePeer, sse_peer, sse_sessions
from .test_sessions import JUMPING_GUARD, PAST, TIMEOUT, flowing, jump
from .test_websocket import Peer, close_code, rejected, socket, tools_call, ws_url

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef"
ALICE_PRINCIPAL = Principal("alice", scopes=frozenset({"mcp"}))
BOB_PRINCIPAL = Principal("bob", scopes=frozenset({"mcp"}))


def parks() -> tuple[Server, dict[str, Park]]:
    """A server with one parking tool per transport, so that each is released on its own."""
    server = Server("registry")
    return server, {name: Park(server, name) for name in ("http", "sse", "ws")}


async def sse_status(served: Served, **headers: str) -> int:
    """The status of a ``GET /sse`` (a 200 is closed at once)."""
    async with served.client.stream("GET", served.base + "/sse", headers=headers) as response:
        return response.status_code


async def ws_status(served: Served, **headers: str) -> int:
    extra = [(k.encode(), v.encode()) for k, v in headers.items()]
    return (await rejected(ws_url(served), subprotocols=["mcp"], extra_headers=extra)).status_code


# -- the caps, across the three transports ---------------------------------------------------------


async def test_a_client_at_its_cap_on_streamable_http_opens_no_sse_session_and_no_socket() -> None:
    options = HttpOptions(limits=Limits(max_sessions_per_client=2))
    async with serving(Server("capped"), options) as served:
        first = await served.initialize()
        await served.initialize()
        assert await sse_status(served) == 429
        assert await ws_status(served) == 429
        assert not sse_sessions(served) and not served.app.websockets.sockets
        # A session ended makes room, on any transport.
        response = await served.client.delete(served.url, headers=served.headers(first))
        assert response.status_code == 200
        async with sse_peer(served):
            assert await ws_status(served) == 429
            refused = await served.post(initialize_body(), version=None)
            assert refused.status_code == 429


async def test_sse_sessions_and_sockets_count_against_the_streamable_http_cap() -> None:
    options = HttpOptions(limits=Limits(max_sessions_per_client=2))
    async with serving(Server("capped"), options) as served:
        async with sse_peer(served), socket(served):
            refused = await served.post(initialize_body(), version=None)
            assert refused.status_code == 429
            assert "Streamable HTTP, HTTP+SSE and WebSocket together" in refused.text
        await served.initialize()


async def test_the_global_cap_holds_across_the_three_transports() -> None:
    options = HttpOptions(limits=Limits(max_sessions=3))
    async with serving(Server("capped"), options) as served:
        await served.initialize()
        async with sse_peer(served), socket(served):
            assert len(served.app.registry) == 3
            refused = await served.post(initialize_body(), version=None)
            assert refused.status_code == 503
            assert await sse_status(served) == 503
            assert await ws_status(served) == 503
            assert len(served.app.registry) == 3


def two_users() -> Server:
    verifier = StaticTokenVerifier(
        {
            ALICE: ALICE_PRINCIPAL,
            BOB: BOB_PRINCIPAL,
        }
    )
    return Server("users", auth=Auth(verifier, "http://127.0.0.1/mcp", required_scopes="mcp"))


async def test_two_principals_behind_one_address_each_get_their_own_cap() -> None:
    async with serving(
        two_users(), HttpOptions(limits=Limits(max_sessions_per_client=2))
    ) as served:
        alice = {"authorization": f"Bearer {ALICE}"}
        bob = {"authorization": f"Bearer {BOB}"}

        async def initialize(token: dict[str, str]) -> httpx.Response:
            headers = {**served.headers(version=None), **token}
            body = orjson.dumps(initialize_body())
            return await served.client.post(served.url, content=body, headers=headers)

        assert (await initialize(alice)).status_code == 200
        async with sse_peer(served, initialize=False, **alice):
            # Alice holds her two (over two transports); Bob, on the same address, has his own.
            assert (await initialize(alice)).status_code == 429
            assert await ws_status(served, **alice) == 429
            assert (await initialize(bob)).status_code == 200
            async with socket(served, headers=bob) as peer:
                assert "result" in await peer.initialize()
                assert (await initialize(bob)).status_code == 429
            clients = {s.client for s in served.app.registry.sessions()}
            keys = {"principal:" + p.identity for p in (ALICE_PRINCIPAL, BOB_PRINCIPAL)}
            assert clients == keys


async def test_a_client_key_hook_sees_the_principal_and_an_old_one_the_scope_alone() -> None:
    seen: list[Principal | None] = []

    def by_principal(scope: Any, principal: Principal | None) -> str:
        seen.append(principal)
        return "everyone"

    options = HttpOptions(limits=Limits(max_sessions_per_client=1, client_key=by_principal))
    async with serving(two_users(), options) as served:
        async with sse_peer(served, initialize=False, authorization=f"Bearer {ALICE}"):
            assert await ws_status(served, authorization=f"Bearer {BOB}") == 429
        assert [p.subject if p else None for p in seen] == ["alice", "bob"]
    options = HttpOptions(limits=Limits(max_sessions_per_client=1, client_key=lambda scope: "one"))
    async with (
        serving(two_users(), options) as served,
        sse_peer(served, initialize=False, authorization=f"Bearer {ALICE}"),
    ):
        assert await ws_status(served, authorization=f"Bearer {BOB}") == 429
        assert [s.client for s in served.app.registry.sessions()] == ["one"]


# -- one idle expiry -------------------------------------------------------------------------------


async def test_an_idle_sse_session_expires_and_its_stream_ends(mock_clock: MockClock) -> None:
    """Used, then idle past ``session_idle_timeout``: the stream ends, the session is gone. A
    request before the deadline moves it."""
    clock = flowing(mock_clock)
    options = HttpOptions(
        keepalive_interval=10 * TIMEOUT, limits=Limits(session_idle_timeout=TIMEOUT)
    )
    async with (
        serving(Server("idle"), options, guard=JUMPING_GUARD) as served,
        sse_peer(served) as peer,
    ):
        await ping_sse(peer, 1)
        await jump(clock, TIMEOUT - 1)
        await ping_sse(peer, 2)  # used again: the timeout starts over
        await jump(clock, TIMEOUT - 1)
        assert sse_sessions(served)
        await jump(clock, 2)
        with trio.fail_after(GUARD):
            assert await peer.reader.rest() == []  # the stream ends, cleanly
        assert not sse_sessions(served) and len(served.app.registry) == 0
        assert (await peer.post(call_body(3, "x"))).status_code == 404


async def test_sessions_ended_before_they_are_due_are_not_kept_by_the_expiry_schedule() -> None:
    """One task watches every session's due time from a schedule; a session deleted first
    leaves its entry there, stale and holding nothing, until the schedule is rebuilt without
    them, once the stale outnumber the live: 300 sessions opened and deleted are all freed, and
    the schedule holds the live one and a few stale."""
    options = HttpOptions(limits=Limits(max_sessions_per_client=1_000))
    async with serving(Server("brief"), options) as served:
        registry = served.app.registry
        kept = await served.initialize()  # a live one, due in half an hour
        for _ in range(300):
            session_id = await served.initialize()
            response = await served.client.delete(served.url, headers=served.headers(session_id))
            assert response.status_code == 200
        await trio.testing.wait_all_tasks_blocked()
        gc.collect()
        sessions = [o for o in gc.get_objects() if type(o) is HttpSession]
        assert [session.id for session in sessions] == [kept]
        live = [entry for entry in registry._schedule if entry[2] is not None]
        assert [entry[2].id for entry in live] == [kept]
        assert len(registry._schedule) <= 2 * 64


async def ping_sse(peer: SsePeer, rid: int) -> None:
    await peer.send({"jsonrpc": "2.0", "id": rid, "method": "ping"})
    assert await peer.recv() == {"jsonrpc": "2.0", "id": rid, "result": {}}


async def test_an_idle_socket_is_closed_with_1001(mock_clock: MockClock) -> None:
    clock = flowing(mock_clock)
    options = HttpOptions(limits=Limits(session_idle_timeout=TIMEOUT))
    async with (
        serving(Server("idle"), options, guard=JUMPING_GUARD) as served,
        socket(served) as peer,
    ):
        assert "result" in await peer.initialize()
        await ping_ws(peer, 1)
        await jump(clock, TIMEOUT - 1)
        await ping_ws(peer, 2)
        await jump(clock, TIMEOUT - 1)
        assert served.app.websockets.sockets
        await jump(clock, 2)
        with trio.fail_after(GUARD), pytest.raises(ConnectionClosed) as closed:
            await peer.ws.get_message()
        assert close_code(closed.value) == 1001
        assert closed.value.reason is not None and "idle" in str(closed.value.reason.reason)
        with trio.fail_after(GUARD):
            while served.app.websockets.sockets:  # noqa: ASYNC110 - no event to wait on
                await trio.sleep(0.01)


async def ping_ws(peer: Peer, rid: int) -> None:
    await peer.send({"jsonrpc": "2.0", "id": rid, "method": "ping"})
    assert await peer.recv() == {"jsonrpc": "2.0", "id": rid, "result": {}}


async def test_a_socket_that_sends_no_request_closes_at_the_unused_timeout(
    mock_clock: MockClock,
) -> None:
    clock = flowing(mock_clock)
    options = HttpOptions(
        limits=Limits(session_idle_timeout=10 * TIMEOUT, unused_session_timeout=TIMEOUT)
    )
    async with (
        serving(Server("idle"), options, guard=JUMPING_GUARD) as served,
        socket(served) as peer,
    ):
        await jump(clock, PAST)
        with trio.fail_after(GUARD), pytest.raises(ConnectionClosed) as closed:
            await peer.ws.get_message()
        assert close_code(closed.value) == 1001


async def test_a_socket_with_a_request_in_flight_does_not_expire(mock_clock: MockClock) -> None:
    clock = flowing(mock_clock)
    server, park = parks()
    async with (
        serving(
            server, HttpOptions(limits=Limits(session_idle_timeout=TIMEOUT)), guard=JUMPING_GUARD
        ) as served,
        socket(served) as peer,
    ):
        assert "result" in await peer.initialize()
        await peer.send(call_body(1, "ws"))
        assert (await peer.recv())["method"] == "notifications/progress"
        await park["ws"].entered.wait()
        await jump(clock, 3 * TIMEOUT)
        assert served.app.websockets.sockets
        park["ws"].release.set()
        messages = [await peer.recv(), await peer.recv()]
        assert messages[-1]["result"]["content"][0]["text"] == "done"


# -- one drain -------------------------------------------------------------------------------------


@asynccontextmanager
async def three_parked(
    served: Served, park: dict[str, Park]
) -> AsyncIterator[tuple[SseReader, SsePeer, Peer]]:
    """A request parked on each transport: a Streamable HTTP POST (its SSE stream), an
    HTTP+SSE session's, and a socket's; each has sent its first progress message."""
    session = await served.initialize()
    async with (
        served.stream_post(call_body("h", "http"), session) as http,
        sse_peer(served) as sse,
        socket(served) as ws,
    ):
        assert (await http.message())["method"] == "notifications/progress"
        await sse.send(call_body("s", "sse"))
        assert (await sse.recv())["method"] == "notifications/progress"
        assert "result" in await ws.initialize()
        await ws.send(call_body("w", "ws"))
        assert (await ws.recv())["method"] == "notifications/progress"
        yield http, sse, ws


async def test_a_drain_waits_for_the_requests_of_every_transport() -> None:
    server, park = parks()
    async with serving(server) as served, three_parked(served, park) as (http, sse, ws):
        drained = trio.Event()
        async with trio.open_nursery() as nursery:

            async def drain() -> None:
                await served.app.drain(grace=GUARD)
                drained.set()

            nursery.start_soon(drain)
            for name in ("http", "sse", "ws"):
                # Every request still parked holds the drain, whichever transport it came on.
                await trio.testing.wait_all_tasks_blocked()
                assert not drained.is_set(), name
                park[name].release.set()
            with trio.fail_after(GUARD):
                await drained.wait()
        assert last_result(await http.rest()) == "done"
        assert (await sse.recv())["method"] == "notifications/progress"
        assert (await sse.recv())["result"]["content"][0]["text"] == "done"
        assert (await ws.recv())["method"] == "notifications/progress"
        assert (await ws.recv())["result"]["content"][0]["text"] == "done"


def last_result(events: Any) -> str:
    messages = [e.json() for e in events if e.data]
    return str(messages[-1]["result"]["content"][0]["text"])


async def test_a_drain_ends_what_still_runs_on_every_transport_with_one_retry_error() -> None:
    server, park = parks()
    cut = {"code": -32603, "message": CUT_BY_SHUTDOWN, "data": {"retry": True}}
    async with serving(server) as served, three_parked(served, park) as (http, sse, ws):
        served.app.begin_drain()
        # New work is refused alike: a new request on an open socket too.
        await ws.send(tools_call(9, "http"))
        refused = await ws.recv()
        assert refused["id"] == 9 and refused["error"]["data"] == {"retry": True}
        assert refused["error"]["message"].startswith("Service Unavailable: this server is")
        posted = await sse.post(tools_call(8, "http"))
        assert posted.status_code == 503 and posted.json()["error"] == refused["error"]
        with trio.fail_after(GUARD):
            await served.app.drain(grace=0.1)
        with trio.fail_after(GUARD):
            http_messages = [e.json() for e in await http.rest() if e.data]
            sse_answer = await sse.recv()
            ws_answer = await ws.recv()
        assert http_messages[-1] == {"jsonrpc": "2.0", "id": "h", "error": cut}
        assert sse_answer == {"jsonrpc": "2.0", "id": "s", "error": cut}
        assert ws_answer == {"jsonrpc": "2.0", "id": "w", "error": cut}
        assert all(p.cancelled for p in park.values())


# -- one answer per condition ----------------------------------------------------------------------


async def test_a_lifespan_that_did_not_run_is_one_503_on_every_transport() -> None:
    async with serving(Server("unstarted"), lifespan=False) as served:
        posted = await served.post(initialize_body(), version=None)
        opened = await served.client.get(served.base + "/sse")
        refusal = await rejected(ws_url(served), subprotocols=["mcp"])
        assert (posted.status_code, opened.status_code, refusal.status_code) == (503, 503, 503)
        assert refusal.body is not None
        bodies = [posted.json(), opened.json(), orjson.loads(refusal.body)]
        assert bodies[0] == bodies[1] == bodies[2]
        assert "lifespan did not run" in bodies[0]["error"]["message"]


async def test_draining_is_one_503_on_every_transport() -> None:
    async with serving(Server("draining")) as served:
        session = await served.initialize()
        served.app.begin_drain()
        get = await served.client.get(
            served.url, headers=served.headers(session, accept="text/event-stream")
        )
        opened = await served.client.get(served.base + "/sse")
        refusal = await rejected(ws_url(served), subprotocols=["mcp"])
        ws_headers = {bytes(k).decode(): bytes(v).decode() for k, v in refusal.headers}
        for status, headers in (
            (get.status_code, get.headers),
            (opened.status_code, opened.headers),
        ):
            assert status == 503
            assert (headers["retry-after"], headers["connection"]) == ("1", "close")
        assert refusal.status_code == 503 and ws_headers["retry-after"] == "1"
        assert refusal.body is not None
        assert get.json() == opened.json() == orjson.loads(refusal.body)
        assert get.json()["error"]["data"] == {"retry": True}
