"""Streamable HTTP sessions through hypercorn: creation, DELETE, idle expiry, the cap, stateless
mode, shutdown with requests in flight, and memory that stays flat under many requests."""

from __future__ import annotations

import collections
import gc
import tracemalloc
import types
import weakref
from typing import Any

import httpx
import orjson
import pytest
import trio
import trio.lowlevel
import trio.testing
from trio.testing import MockClock

from trio_mcp import Server
from trio_mcp._demo import demo_server
from trio_mcp._lazy_event import LazyEvent
from trio_mcp.http import HostRules, HttpOptions, Limits, McpHttpApp
from trio_mcp.http._http_session import HttpSession
from trio_mcp.http._legacy_sse import SseSession
from trio_mcp.http._websocket import SocketSession
from trio_mcp.server import Context

from .._http import (
    BOTH,
    GUARD,
    VERSION,
    Park,
    Served,
    asgi_exchange,
    call_body,
    error_of,
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


def _abc_cache_entry(obj: object) -> bool:
    """Whether ``obj`` belongs to an ABC's subclass caches: a weak reference to a class, or the
    callback that removes one. Those caches are emptied whenever any ABC registers a class (an
    import can) and refill on the next isinstance checks, so their size says nothing about what
    a request left behind."""
    if type(obj) is weakref.ReferenceType:
        return isinstance(obj(), type)
    return type(obj) is types.BuiltinMethodType and (
        type(getattr(obj, "__self__", None)) is weakref.ReferenceType
    )


def _module_of(obj: object) -> str:
    # Some libraries' classes make ``__module__`` a property of their own: not a module name.
    module = type(obj).__module__
    return module if isinstance(module, str) else ""


async def live_objects() -> tuple[int, collections.Counter[str]]:
    """All gc-tracked objects, and how many of them are trio_mcp's own, by type, at the fixed
    point of :func:`settle`: trio_mcp's own must come back to exactly where they were, and the
    total stays within a small bound (it is exact in practice; the bound leaves room for a
    connection the HTTP client may replace)."""
    await settle()
    objects = [o for o in gc.get_objects() if not _abc_cache_entry(o)]
    ours = collections.Counter(
        type(o).__qualname__ for o in objects if _module_of(o).startswith("trio_mcp")
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


async def test_a_session_keeps_its_attributes_in_slots_not_an_instance_dict(
    demo_http: Served,
) -> None:
    """A session has some thirty attributes: past the count an instance dict shares its keys
    for, so that a dict of its own cost every session 1.3 KB, a tenth of an idle one. Slots
    hold them whatever their count (every base class has slots too, or the dict comes back)."""
    session_id = await demo_http.initialize()
    session = demo_http.app.sessions[session_id]
    assert not hasattr(session, "__dict__")


@pytest.mark.parametrize("kind", [HttpSession, SseSession, SocketSession])
def test_no_kind_of_session_has_an_instance_dict(kind: type) -> None:
    assert kind.__dictoffset__ == 0  # every class of it, up to object, has slots


async def test_an_idle_session_makes_a_trio_event_only_for_what_its_task_waits_on(
    demo_http: Served,
) -> None:
    """An idle session's task waits for its input to end; its own end, its engine's, its
    writer's, its standalone stream's and its ``initialize`` are waited on by nobody while it
    is idle, and a ``trio.Event`` (its set of waiters) costs each about 260 bytes."""
    session_id = await demo_http.initialize()
    session = demo_http.app.sessions[session_id]
    await trio.testing.wait_all_tasks_blocked()
    made = [
        name
        for name, event in [
            ("session ended", session.ended),
            ("engine closed", session.engine.closed),
            ("writer done", session.engine._writer_done),
            ("standalone stream done", session.standalone.done),
            ("initialized", session.connection._initialized),
        ]
        if not isinstance(event, LazyEvent) or event._event is not None
    ]
    assert made == []
    assert session.engine._input_ended._event is not None  # what its task waits on


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
#
# hypercorn runs in the test's own Trio run, so these run on a MockClock too: its rate is 1 (time
# flows as usual, so the hang guards and hypercorn's own timers work) and the timeouts are a
# minute, so nothing expires on its own during a test; a session expires when the test jumps the
# clock past its deadline, and only then. Before a jump the test waits for the state it means to
# test (no request or stream counted as open), never for a duration.

TIMEOUT = 60.0
PAST = TIMEOUT + 1
#: The hang guard on a mock clock counts the jumps too: a real 30 s, plus jumps of up to 800 s.
JUMPING_GUARD = GUARD + 800


def flowing(clock: MockClock) -> MockClock:
    clock.rate = 1
    return clock


async def jump(clock: MockClock, seconds: float) -> None:
    """Move the clock, then wait until every task has done what that made due: sessions past
    their deadline end, and hypercorn closes the connections past its keep-alive timeout, so
    that the client's pool cannot hand the next request one of them."""
    clock.jump(seconds)
    await trio.testing.wait_all_tasks_blocked()


async def settled(served: Served) -> None:
    """Wait until no session has a request or a stream open: the server's side of each exchange
    has ended (and restarted its session's timeout), not only the client's."""
    await eventually(
        lambda: all(s.active == 0 and s.engine.idle for s in served.app.sessions.values())
    )


async def expired(served: Served, session: str) -> None:
    """Wait (on an event) until a session the clock has passed has ended and been forgotten."""
    state = served.app.sessions.get(session)
    if state is not None:
        await state.ended.wait()
    assert session not in served.app.sessions


async def test_an_idle_session_expires(mock_clock: MockClock) -> None:
    clock = flowing(mock_clock)
    options = HttpOptions(limits=Limits(session_idle_timeout=TIMEOUT))
    async with serving(demo_server(), options, guard=JUMPING_GUARD) as served:
        session = await served.initialize()
        assert (await served.call(session, request_body(1, "ping")))["result"] == {}
        await settled(served)
        await jump(clock, TIMEOUT - 1)
        assert (await served.call(session, request_body(2, "ping")))["result"] == {}
        await settled(served)
        await jump(clock, TIMEOUT - 1)  # the request above restarted the timeout
        assert session in served.app.sessions
        await jump(clock, 2)
        await expired(served, session)
        response = await served.post(request_body(3, "ping"), session)
        assert response.status_code == 404
        await eventually(lambda: not served.app.server.connections)
        assert len(served.app.store) == 0  # type: ignore[arg-type]


async def test_activity_keeps_a_session_alive(mock_clock: MockClock) -> None:
    """A session with an open GET stream, or a request in flight, does not expire: the clock is
    moved past every deadline, and only the control session, with nothing open, goes."""
    clock = flowing(mock_clock)
    server = demo_server()
    park = Park(server)
    options = HttpOptions(limits=Limits(session_idle_timeout=TIMEOUT))
    async with serving(server, options, guard=JUMPING_GUARD) as served:
        listening = await served.initialize()
        working = await served.initialize()
        control = await served.initialize()
        async with served.stream_get(listening) as listener:
            assert listener.response.status_code == 200
            async with served.stream_post(call_body("w", "park"), working) as reader:
                await park.entered.wait()
                await eventually(lambda: served.app.sessions[listening].active == 1)
                await jump(clock, PAST)
                await expired(served, control)
                assert listening in served.app.sessions
                assert working in served.app.sessions
                park.release.set()
                assert (await reader.rest())[-1].json()["result"]["content"][0]["text"] == "done"
            server.remove_tool("echo")
            assert (await listener.message())["method"] == "notifications/tools/list_changed"
        # Once nothing is going on, both expire.
        await settled(served)
        await jump(clock, PAST)
        await eventually(lambda: not served.app.sessions)


async def test_a_session_whose_get_client_went_away_can_expire(mock_clock: MockClock) -> None:
    """hypercorn reports the disconnect; the GET stream lets go of the session."""
    clock = flowing(mock_clock)
    options = HttpOptions(limits=Limits(session_idle_timeout=TIMEOUT))
    async with serving(demo_server(), options, guard=JUMPING_GUARD) as served:
        session = await served.initialize()
        state = served.app.sessions[session]
        async with served.stream_get(session) as listener:
            assert listener.response.status_code == 200
            assert state.active == 1
        await eventually(lambda: state.active == 0)
        await jump(clock, PAST)
        await expired(served, session)


async def test_a_request_that_finishes_after_its_client_left_lets_the_session_expire(
    mock_clock: MockClock,
) -> None:
    """The POST's client went away (not a cancel: the tool goes on); when the request ends
    with nobody listening, the session can still go idle and expire."""
    clock = flowing(mock_clock)
    server = demo_server()
    park = Park(server)
    options = HttpOptions(limits=Limits(session_idle_timeout=TIMEOUT))
    async with serving(server, options, guard=JUMPING_GUARD) as served:
        session = await served.initialize()
        async with served.stream_post(call_body("p", "park"), session) as reader:
            await park.entered.wait()
            assert (await reader.message())["params"]["message"] == "first-frame"
        state = served.app.sessions[session]
        await eventually(lambda: state.active == 0)  # the POST's relay noticed
        await jump(clock, PAST)
        assert session in served.app.sessions  # the request is still running
        park.release.set()
        await park.finished.wait()
        assert not park.cancelled
        await settled(served)
        await jump(clock, PAST)
        await expired(served, session)


async def test_a_session_due_before_every_other_expires_at_its_own_time(
    mock_clock: MockClock,
) -> None:
    """One task watches every session, asleep until the soonest due time: a session opened
    later but due sooner (never used, so the shorter unused timeout) wakes it sooner."""
    clock = flowing(mock_clock)
    options = HttpOptions(
        limits=Limits(session_idle_timeout=10 * TIMEOUT, unused_session_timeout=TIMEOUT)
    )
    async with serving(demo_server(), options, guard=JUMPING_GUARD) as served:
        used = await served.initialize()
        assert (await served.call(used, request_body(1, "ping")))["result"] == {}
        await settled(served)
        await jump(clock, PAST)  # looked at once: due again ten timeouts after the ping
        assert used in served.app.sessions
        unused = await served.initialize()
        await settled(served)
        await jump(clock, PAST)
        with trio.fail_after(5):
            await expired(served, unused)
        assert used in served.app.sessions


@pytest.mark.invariant(11)
async def test_a_never_used_session_expires_at_the_unused_timeout(mock_clock: MockClock) -> None:
    """A session that carried no request after its handshake lives ``unused_session_timeout``
    from its opening, whatever else it is sent; a request or a GET makes it a used one, which
    keeps the (longer) idle timeout."""
    clock = flowing(mock_clock)
    options = HttpOptions(
        limits=Limits(session_idle_timeout=5 * TIMEOUT, unused_session_timeout=TIMEOUT)
    )
    async with serving(demo_server(), options, guard=JUMPING_GUARD) as served:
        unused = await served.initialize()  # initialize and notifications/initialized only
        pinged = await served.initialize()
        listened = await served.initialize()
        assert (await served.call(pinged, request_body(1, "ping")))["result"] == {}
        async with served.stream_get(listened) as listener:
            assert listener.response.status_code == 200
        await settled(served)
        await jump(clock, TIMEOUT - 1)
        # Notifications are not use: they do not move the unused deadline.
        note = {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}
        assert (await served.post(note, unused)).status_code == 202
        await jump(clock, 2)
        await expired(served, unused)
        assert pinged in served.app.sessions and listened in served.app.sessions
        await jump(clock, 5 * TIMEOUT)
        await expired(served, pinged)
        await expired(served, listened)


# -- limits ----------------------------------------------------------------------------------------


def retry_after(response: httpx.Response) -> int:
    value = response.headers["retry-after"]
    assert value.isascii() and value.isdigit(), value
    return int(value)


def from_address(address: str) -> httpx.AsyncClient:
    """A client whose connections come from another loopback address (all of 127/8 is ours)."""
    return httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(local_address=address))


@pytest.mark.invariant(11)
async def test_one_client_cannot_take_every_session(mock_clock: MockClock) -> None:
    """Past its own limit a client gets 429 with Retry-After (when its first session is due to
    expire); another address still gets a session, and a DELETE makes room again."""
    clock = flowing(mock_clock)
    options = HttpOptions(
        limits=Limits(max_sessions=10, max_sessions_per_client=2, unused_session_timeout=TIMEOUT)
    )
    async with serving(demo_server(), options, guard=JUMPING_GUARD) as served:
        first = await served.initialize()
        second = await served.initialize()
        assert (await served.call(second, request_body(1, "ping")))["result"] == {}
        await settled(served)
        await jump(clock, 20)
        response = await served.post(initialize_body(), version=None)
        assert response.status_code == 429
        error = error_of(response)
        assert error["code"] == -32600 and "limit" in error["message"]
        assert response.json()["id"] == "init"
        # The first session, never used, is due 60 s after its opening: some 40 s from now.
        assert TIMEOUT - 20 - 5 <= retry_after(response) <= TIMEOUT - 20
        async with from_address("127.0.0.2") as other:
            response = await other.post(
                served.url, content=orjson.dumps(initialize_body()), headers=served.headers()
            )
            assert response.status_code == 200
            assert "mcp-session-id" in response.headers
        response = await served.client.delete(served.url, headers=served.headers(first))
        assert response.status_code == 200
        await served.initialize()
        assert len(served.app.sessions) == 3


async def test_a_forwarded_address_counts_only_when_configured() -> None:
    """Without ``client_address_header`` a client cannot dodge its limit by naming itself;
    with it, the proxy's header (its last value, the one the proxy wrote) is the client."""
    body = orjson.dumps(initialize_body())
    options = HttpOptions(limits=Limits(max_sessions_per_client=1))
    async with serving(demo_server(), options) as served:
        for forwarded in ("10.0.0.1", "10.0.0.2"):
            headers = served.headers(version=None, x_forwarded_for=forwarded)
            response = await served.client.post(served.url, content=body, headers=headers)
        assert response.status_code == 429
    options = HttpOptions(
        limits=Limits(max_sessions_per_client=1),
        hosts=HostRules(client_address_header="X-Forwarded-For"),
    )
    async with serving(demo_server(), options) as served:
        statuses = []
        for forwarded in ("10.0.0.1", "1.2.3.4, 10.0.0.2", "10.0.0.2", "10.0.0.1, 10.0.0.3"):
            headers = served.headers(version=None, x_forwarded_for=forwarded)
            response = await served.client.post(served.url, content=body, headers=headers)
            statuses.append(response.status_code)
        assert statuses == [200, 200, 429, 200]
        owners = sorted(s.client for s in served.app.sessions.values())
        assert owners == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    # The key is a function of the request: a principal, say, once there is one.
    options = HttpOptions(
        limits=Limits(max_sessions_per_client=1, client_key=lambda scope: "everyone")
    )
    async with serving(demo_server(), options) as served:
        assert (await served.post(initialize_body(), version=None)).status_code == 200
        async with from_address("127.0.0.3") as other:
            response = await other.post(served.url, content=body, headers=served.headers())
        assert response.status_code == 429


async def test_the_session_cap_says_when_a_session_is_next_due_to_expire(
    mock_clock: MockClock,
) -> None:
    """503's Retry-After is the time to the earliest expiry of any session: a used session
    expires an idle timeout after its last request, an unused one at its unused deadline, and a
    busy one not at all."""
    clock = flowing(mock_clock)
    server = demo_server()
    park = Park(server)
    options = HttpOptions(
        limits=Limits(
            max_sessions=2, session_idle_timeout=10 * TIMEOUT, unused_session_timeout=TIMEOUT
        )
    )
    async with serving(server, options, guard=JUMPING_GUARD) as served:
        used = await served.initialize()
        assert (await served.call(used, request_body(1, "ping")))["result"] == {}
        unused = await served.initialize()
        await settled(served)
        response = await served.post(initialize_body(), version=None)
        assert response.status_code == 503
        assert TIMEOUT - 5 <= retry_after(response) <= TIMEOUT
        async with served.stream_post(call_body("p", "park"), unused) as reader:
            await park.entered.wait()
            # Now the unused one is busy; the used one is due at its idle timeout.
            response = await served.post(initialize_body(), version=None)
            assert 10 * TIMEOUT - 5 <= retry_after(response) <= 10 * TIMEOUT
            async with served.stream_post(call_body("q", "park"), used) as other:
                await eventually(lambda: served.app.sessions[used].active == 1)
                # Nothing is due: the time a session may stay unused.
                response = await served.post(initialize_body(), version=None)
                assert retry_after(response) == TIMEOUT
                park.release.set()
                await other.rest()
            await reader.rest()
        await settled(served)
        await jump(clock, 10 * TIMEOUT + 1)
        await eventually(lambda: not served.app.sessions)
        await served.initialize()


# -- a request racing the session's end ------------------------------------------------------------


async def asgi(
    app: McpHttpApp,
    method: str,
    headers: dict[str, str],
    body: Any = None,
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP request served by ``app`` in this task: the status, the headers and the body."""
    done = await asgi_exchange(app, method, headers, body)
    return done.status, done.headers, done.body


@pytest.mark.parametrize("kind", ["request", "notification", "get", "delete"])
async def test_a_request_racing_idle_expiry_gets_404_never_500(
    mock_clock: MockClock, kind: str
) -> None:
    """The clock passes a session's deadline; its task then needs several scheduling rounds to
    end. A request is made at each of those points in turn (after 0, 1, 2... checkpoints), until
    the session is gone: every one is refused with 404, decided before the engine sees it.
    Without that, the first ones revive the session (a GET holds it open for good) and the
    later ones reach an engine whose nursery is closed: 'Nursery is closed to new arrivals', a
    500 (on the real clock, about once in 1,200 requests). The timeout is a minute: nothing
    but the test's jump reaches it."""
    clock = flowing(mock_clock)
    app = demo_server().http_app(HttpOptions(limits=Limits(session_idle_timeout=TIMEOUT)))
    messages = {
        "request": ("POST", request_body(1, "ping")),
        "notification": ("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"}),
        "get": ("GET", None),
        "delete": ("DELETE", None),
    }
    method, body = messages[kind]
    base = {"accept": BOTH, "content-type": "application/json"}
    outcomes: dict[int, object] = {}
    async with app.running():
        for steps in range(100):
            status, reply, _ = await asgi(app, "POST", base, initialize_body())
            assert status == 200
            session_id = reply["mcp-session-id"]
            session = app.sessions[session_id]
            clock.jump(PAST)
            for _ in range(steps):
                await trio.lowlevel.checkpoint()
            gone = session.ended.is_set()
            headers = {**base, "mcp-session-id": session_id, "mcp-protocol-version": VERSION}
            # Set after the jump, so it counts real time only: a request let into the session
            # would hold it open, where a refused one takes microseconds.
            with trio.move_on_after(5):
                outcomes[steps] = "held the session open"
                try:
                    status, _, data = await asgi(app, method, headers, body)
                except Exception as exc:  # what hypercorn would answer 500 for
                    outcomes[steps] = repr(exc)
                else:
                    refused = status == 404 and b"Session not found" in data
                    outcomes[steps] = 404 if refused else (status, data[:80])
                await session.ended.wait()
            if gone:
                break
    assert set(outcomes.values()) == {404}, outcomes
    assert len(outcomes) > 2  # the window was crossed, not only its two ends
    assert not app.sessions


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


async def test_sessions_created_and_expired_leave_nothing_behind(mock_clock: MockClock) -> None:
    """1,000 sessions come and go: no session, connection, stored event or trio_mcp object is
    left, and the gc-tracked total stays flat (fewer than one object per 20 sessions). Allocated
    bytes are traced over 200 more (tracing every allocation makes each one ~4x slower); one
    kept session would be ~10 kB, and the bound is 1 kB per session. They expire when the clock
    is moved past their timeout, once each batch is in."""
    clock = flowing(mock_clock)
    options = HttpOptions(
        limits=Limits(session_idle_timeout=TIMEOUT, max_sessions_per_client=10_000)
    )
    async with serving(demo_server(), options, guard=600 + 40 * PAST) as served:
        app = served.app

        async def create(count: int) -> None:
            # In batches of 200: a few hundred live at once, as on the real clock with a short
            # timeout (thousands at once would make every gc pass slower).
            for done in range(count):
                response = await served.post(initialize_body(), version=None)
                assert response.status_code == 200
                assert "mcp-session-id" in response.headers
                if done % 200 == 199 or done == count - 1:
                    await settled(served)
                    await jump(clock, PAST)
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
    async with serving(Server("capped"), HttpOptions(limits=Limits(max_sessions=1))) as served:
        statuses: list[int] = []

        async def initialize() -> None:
            response = await served.post(initialize_body(VERSION), version=None)
            statuses.append(response.status_code)

        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(initialize)
        assert sorted(statuses) == [200, 503, 503, 503]
        assert len(served.app.sessions) == 1
