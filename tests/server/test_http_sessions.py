"""Streamable HTTP sessions through hypercorn: creation, DELETE, idle expiry, the cap, stateless
mode, shutdown with requests in flight, and memory that stays flat under many requests."""

from __future__ import annotations

import collections
import gc
import tracemalloc

import pytest
import trio
import trio.lowlevel
import trio.testing

from trio_mcp import Server
from trio_mcp._demo import demo_server
from trio_mcp.server import Context, HttpOptions

from .._http import (
    VERSION,
    Park,
    Served,
    call_body,
    eventually,
    initialize_body,
    parse_sse,
    progress_messages,
    request_body,
    serving,
)


async def settle() -> None:
    """A fixed point to measure at: every task blocked, trio's stale deadline entries pruned,
    garbage collected.

    Each cancel scope with a deadline leaves a stale entry (a tuple holding the scope) in trio's
    deadline heap when it exits; trio prunes them only once they outnumber the live ones by
    1,000, so up to a few thousand objects come and go with the load. Opening and leaving 2,100
    scopes with a deadline, then letting the run loop turn once, makes it prune now.
    """
    await trio.testing.wait_all_tasks_blocked()
    far = trio.current_time() + 3_600
    for _ in range(2_100):
        with trio.CancelScope(deadline=far):  # noqa: ASYNC100 - entered only for its entry
            pass
    await trio.lowlevel.checkpoint()
    gc.collect()
    gc.collect()


async def traced() -> int:
    await settle()
    return tracemalloc.get_traced_memory()[0]


async def live_objects() -> tuple[int, collections.Counter[str]]:
    """All gc-tracked objects, and how many of them are trio_mcp's own, by type, at the fixed
    point of :func:`settle`: trio_mcp's own must come back to exactly where they were, and the
    total stays within a small bound (it is exact in practice; the bound leaves room for a
    connection the HTTP client may replace)."""
    await settle()
    objects = gc.get_objects()
    ours = collections.Counter(
        type(o).__qualname__ for o in objects if type(o).__module__.startswith("trio_mcp")
    )
    return len(objects), ours


# -- creation and DELETE ---------------------------------------------------------------------------


async def test_only_a_successful_initialize_mints_a_session(demo_http: Served) -> None:
    body = initialize_body()
    del body["params"]["clientInfo"]
    response = await demo_http.post(body, version=None)
    assert response.status_code == 200
    assert "mcp-session-id" not in response.headers
    message = response.json()
    assert message["id"] == "init"
    assert message["error"]["code"] == -32602
    assert demo_http.app.sessions == {}
    # The refused session's engine ends and leaves nothing behind.
    await eventually(lambda: not demo_http.app.server.connections)
    assert len(demo_http.app.store) == 0  # type: ignore[arg-type]


async def test_delete_ends_the_session_and_cancels_its_requests() -> None:
    server = demo_server()
    park = Park(server)
    async with serving(server) as served:
        session = await served.initialize()
        async with served.stream_post(call_body("p", "park"), session) as reader:
            await park.entered.wait()
            response = await served.client.delete(served.url, headers=served.headers(session))
            assert response.status_code == 200
            assert response.content == b""
            await park.finished.wait()
            rest = await reader.rest()
        assert park.cancelled
        assert all("result" not in e.json() for e in rest if e.data)
        for method in ("POST", "GET", "DELETE"):
            headers = served.headers(session, accept="application/json, text/event-stream")
            response = await served.client.request(
                method,
                served.url,
                content=b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
                headers=headers,
            )
            assert response.status_code == 404, method
        assert served.app.sessions == {}
        await eventually(lambda: not served.app.server.connections)
        assert len(served.app.store) == 0  # type: ignore[arg-type]


async def test_delete_without_a_session_id_gets_400(demo_http: Served) -> None:
    response = await demo_http.client.delete(demo_http.url, headers=demo_http.headers())
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "Bad Request: Missing session ID"


# -- idle expiry -----------------------------------------------------------------------------------


async def test_an_idle_session_expires() -> None:
    async with serving(demo_server(), HttpOptions(session_idle_timeout=0.5)) as served:
        session = await served.initialize()
        await eventually(lambda: session not in served.app.sessions)
        response = await served.post(request_body(1, "ping"), session)
        assert response.status_code == 404
        await eventually(lambda: not served.app.server.connections)
        assert len(served.app.store) == 0  # type: ignore[arg-type]


def expire_soon(served: Served, seconds: float = 0.5) -> None:
    """Shorten the idle timeout once the setup is done, so a slow machine cannot expire a
    session between two setup steps; it applies from each session's next touch."""
    served.app.options.session_idle_timeout = seconds


async def test_activity_keeps_a_session_alive() -> None:
    """A session with an open GET stream, or a request in flight, does not expire. Each is
    touched under the short timeout, then compared with a control session created after: if a
    busy one could expire, it would go first."""
    server = demo_server()
    park = Park(server)
    async with serving(server) as served:
        listening = await served.initialize()
        working = await served.initialize()
        async with served.stream_get(listening) as listener:
            assert listener.response.status_code == 200
            async with served.stream_post(call_body("w", "park"), working) as reader:
                await park.entered.wait()
                expire_soon(served)
                for session in (listening, working):
                    assert (await served.call(session, request_body(1, "ping")))["result"] == {}
                control = await served.initialize()
                await eventually(lambda: control not in served.app.sessions)
                assert listening in served.app.sessions
                assert working in served.app.sessions
                park.release.set()
                assert (await reader.rest())[-1].json()["result"]["content"][0]["text"] == "done"
            server.remove_tool("echo")
            assert (await listener.message())["method"] == "notifications/tools/list_changed"
        # Once nothing is going on, both expire.
        await eventually(lambda: not served.app.sessions)


async def test_a_session_whose_get_client_went_away_can_expire() -> None:
    """hypercorn reports the disconnect; the GET stream lets go of the session."""
    async with serving(demo_server()) as served:
        session = await served.initialize()
        async with served.stream_get(session) as listener:
            assert listener.response.status_code == 200
            expire_soon(served)
        await eventually(lambda: session not in served.app.sessions)


async def test_a_request_that_finishes_after_its_client_left_lets_the_session_expire() -> None:
    """The POST's client went away (not a cancel: the tool goes on); when the request ends
    with nobody listening, the session can still go idle and expire."""
    server = demo_server()
    park = Park(server)
    async with serving(server) as served:
        session = await served.initialize()
        async with served.stream_post(call_body("p", "park"), session) as reader:
            await park.entered.wait()
            assert (await reader.message())["params"]["message"] == "first-frame"
            expire_soon(served)
        state = served.app.sessions[session]
        await eventually(lambda: state.active == 0)  # the POST's relay noticed
        park.release.set()
        await park.finished.wait()
        assert not park.cancelled
        await eventually(lambda: session not in served.app.sessions)


# -- stateless -------------------------------------------------------------------------------------


def sampling_tool(server: Server) -> None:
    @server.tool()
    async def ask(ctx: Context) -> str:
        result = await ctx.sample("hello?", max_tokens=5)
        return str(result)


async def test_stateless_mode_serves_every_post_on_its_own() -> None:
    server = demo_server()
    sampling_tool(server)
    async with serving(server, HttpOptions(stateless=True)) as served:
        response = await served.post(call_body(1, "echo", {"text": "hi"}), version=None)
        assert response.status_code == 200
        assert "mcp-session-id" not in response.headers
        (event,) = parse_sse(response.text)
        assert event.json()["result"]["content"][0]["text"] == "hi"
        # initialize works too, and mints nothing.
        response = await served.post(initialize_body(), version=None)
        assert response.status_code == 200
        assert "mcp-session-id" not in response.headers
        assert parse_sse(response.text)[0].json()["result"]["protocolVersion"]
        # Notifications are accepted and go nowhere.
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        response = await served.post(note)
        assert response.status_code == 202 and response.content == b""
        # There is no back channel: a nested request fails inside the tool.
        response = await served.post(call_body(2, "ask"))
        result = parse_sse(response.text)[-1].json()["result"]
        assert result["isError"] is True
        for method in ("GET", "DELETE"):
            response = await served.client.request(
                method, served.url, headers=served.headers(accept="text/event-stream")
            )
            assert response.status_code == 405, method
            assert response.headers["allow"] == "POST"
        assert served.app.sessions == {}


async def test_stateless_json_mode() -> None:
    async with serving(demo_server(), HttpOptions(stateless=True, json_response=True)) as served:
        headers = served.headers(accept="application/json")
        response = await served.post(call_body(1, "add", {"a": 1, "b": 2}), headers=headers)
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        assert response.json()["result"]["structuredContent"] == {"result": 3}


async def test_stateless_client_disconnect_cancels_the_handler() -> None:
    """The handler runs inside the POST's own task: a client that leaves cancels it."""
    server = demo_server()
    park = Park(server)
    async with serving(server, HttpOptions(stateless=True)) as served:
        async with served.stream_post(call_body(1, "park")) as reader:
            assert (await reader.message())["params"]["message"] == "first-frame"
            await park.entered.wait()
        await park.finished.wait()
        assert park.cancelled


async def test_stateless_memory_is_steady_over_many_requests() -> None:
    """1,500 stateless requests after a warm-up leave no trio_mcp object and, of all gc-tracked
    objects, fewer than one per 20 requests (measured at a fixed point: see :func:`settle`)."""
    async with serving(demo_server(), HttpOptions(stateless=True), guard=600) as served:
        body = call_body(1, "echo", {"text": "steady"})

        async def burst(count: int) -> None:
            for _ in range(count):
                response = await served.post(body)
                assert response.status_code == 200

        await burst(300)  # warm-up: pools, caches, interned strings
        before, ours_before = await live_objects()
        await burst(1_500)
        after, ours_after = await live_objects()
        assert served.app.sessions == {}
        assert len(served.app.store) == 0  # type: ignore[arg-type]
        assert not served.app.server.connections
        assert ours_after == ours_before
        # One leaked object per 20 requests would be 75.
        assert after - before < 75, (before, after)


async def test_sessions_created_and_expired_leave_nothing_behind() -> None:
    """1,000 sessions come and go: no session, connection, stored event or trio_mcp object is
    left, and the gc-tracked total stays flat (fewer than one object per 20 sessions). Allocated
    bytes are traced over 200 more (tracing every allocation makes each one ~4x slower); one
    kept session would be ~10 kB, and the bound is 1 kB per session."""
    async with serving(demo_server(), HttpOptions(session_idle_timeout=0.05), guard=600) as served:
        app = served.app

        async def create(count: int) -> None:
            for _ in range(count):
                response = await served.post(initialize_body(), version=None)
                assert response.status_code == 200
                assert "mcp-session-id" in response.headers
            await eventually(lambda: not app.sessions and not app.server.connections)

        await create(200)
        before, ours_before = await live_objects()
        await create(1_000)
        after, ours_after = await live_objects()
        assert len(app.store) == 0  # type: ignore[arg-type]
        assert ours_after == ours_before
        # One leaked object per 20 sessions would be 50.
        assert after - before < 50, (before, after)
        tracemalloc.start()
        try:
            traced_before = await traced()
            await create(200)
            traced_after = await traced()
        finally:
            tracemalloc.stop()
        assert traced_after - traced_before < 200_000, (traced_before, traced_after)


# -- shutdown --------------------------------------------------------------------------------------


async def test_shutdown_with_requests_in_flight() -> None:
    """hypercorn's shutdown: at its graceful deadline the open SSE responses end properly (not
    cut), then the app's shutdown cancels the parked tool (its finally runs) and serve returns."""
    server = demo_server()
    park = Park(server)
    async with serving(server, HttpOptions(shutdown_grace=1.0), graceful_timeout=0.5) as served:
        session = await served.initialize()
        ended: list[str] = []

        async def listen() -> None:
            async with served.stream_get(session) as listener:
                assert await listener.rest() == []
            ended.append("get")

        async def call() -> None:
            async with served.stream_post(call_body("p", "park"), session) as reader:
                rest = await reader.rest()
            assert progress_messages(rest) == ["first-frame"]
            ended.append("post")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(listen)
            nursery.start_soon(call)
            await park.entered.wait()
            await eventually(lambda: served.app.sessions[session].active == 2)
            served.shutdown.set()
            await served.stopped.wait()
        assert park.cancelled
        assert sorted(ended) == ["get", "post"]
        assert served.app.sessions == {}


async def test_an_initialize_without_an_id_gets_202_and_no_session() -> None:
    """Seed (e) 6: a notification named initialize asks for nothing and mints nothing."""
    async with serving(Server("idless")) as served:
        body = initialize_body(VERSION)
        del body["id"]
        response = await served.post(body, version=None)
        assert response.status_code == 202
        assert "mcp-session-id" not in response.headers
        assert response.content == b""
        assert served.app.sessions == {}


@pytest.mark.invariant(11)
async def test_concurrent_initializes_cannot_overshoot_the_session_cap() -> None:
    async with serving(Server("capped"), HttpOptions(max_sessions=1)) as served:
        statuses: list[int] = []

        async def initialize() -> None:
            response = await served.post(initialize_body(VERSION), version=None)
            statuses.append(response.status_code)

        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(initialize)
        assert sorted(statuses) == [200, 503, 503, 503]
        assert len(served.app.sessions) == 1
