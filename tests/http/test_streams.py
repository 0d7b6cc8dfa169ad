"""Streamable HTTP streams through hypercorn: in-flight ids, cancellation, nested requests, the
GET stream, keep-alives and resuming with ``Last-Event-ID``; and the stream runtime on its own
(``http/_streams.py``): listeners, the backlog budget, the writer that feeds the event store."""

from __future__ import annotations

import functools
import gc
import tracemalloc
from typing import Any

import orjson
import pytest
import trio
import trio.testing

from trio_mcp import Server
from trio_mcp._demo import demo_server
from trio_mcp.http import HttpOptions, Limits, MemoryEventStore, Replay, ScaleOut, StreamMeta
from trio_mcp.http._http_session import HttpSession
from trio_mcp.http._streams import (
    NO_STORE,
    ByteBudget,
    EventStream,
    EventWriter,
    Listener,
    MemorySink,
    StreamLimits,
)
from trio_mcp.server import Context

from .._http import (
    VERSION,
    Park,
    Served,
    SseComment,
    SseEvent,
    SseReader,
    asgi_exchange,
    asgi_session,
    call_body,
    cancel_body,
    eventually,
    initialize_body,
    parse_sse,
    progress_messages,
    request_body,
    serving,
)

MIB = 1024 * 1024

CONFLICT = (
    b'{"jsonrpc":"2.0","id":"req-1","error":{"code":-32600,'
    b'"message":"Conflict: Request id is already in flight for this session"}}'
)


def result_text(message: dict[str, Any]) -> str:
    text: str = message["result"]["content"][0]["text"]
    return text


def traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def ids_of(events: list[SseEvent]) -> list[tuple[str, int]]:
    """(stream, seq) of each event id, to check order and duplicates."""
    out = []
    for event in events:
        assert event.id is not None
        _, stream, seq = event.id.split(".")
        out.append((stream, int(seq)))
    return out


# -- 409 -------------------------------------------------------------------------------------------


@pytest.mark.invariant(1)
async def test_duplicate_in_flight_id_gets_409_and_leaves_the_first_request_alone() -> None:
    server = demo_server()
    park = Park(server)
    async with serving(server) as served:
        session = await served.initialize()
        async with served.stream_post(call_body("req-1", "park"), session) as first:
            assert first.response.status_code == 200
            assert (await first.message())["params"]["message"] == "first-frame"
            await park.entered.wait()
            for body in (call_body("req-1", "park"), request_body("req-1", "ping")):
                duplicate = await served.post(body, session)
                assert duplicate.status_code == 409
                assert duplicate.headers["content-type"] == "application/json"
                assert duplicate.content == CONFLICT
            park.release.set()
            rest = await first.rest()
        assert progress_messages(rest) == ["second-frame"]
        assert result_text(rest[-1].json()) == "done"
        assert not park.cancelled
        # Once it has finished, the id may be used again.
        again = await served.call(session, call_body("req-1", "echo", {"text": "again"}))
        assert result_text(again) == "again"


async def test_the_same_id_in_another_session_is_not_a_conflict() -> None:
    server = demo_server()
    park = Park(server)
    async with serving(server) as served:
        one, two = await served.initialize(), await served.initialize()
        async with served.stream_post(call_body(1, "park"), one) as first:
            await park.entered.wait()
            other = await served.call(two, call_body(1, "echo", {"text": "two"}))
            assert result_text(other) == "two"
            park.release.set()
            assert result_text((await first.rest())[-1].json()) == "done"


# -- cancellation ----------------------------------------------------------------------------------


@pytest.mark.invariant(3)
async def test_cancel_ends_the_sse_stream_with_no_response() -> None:
    server = demo_server()
    park = Park(server)
    async with serving(server) as served:
        session = await served.initialize()
        async with served.stream_post(call_body("c1", "park"), session) as reader:
            await park.entered.wait()
            response = await served.post(cancel_body("c1", "user aborted"), session)
            assert response.status_code == 202
            assert response.content == b""
            rest = await reader.rest()
        assert park.cancelled
        assert [e.json() for e in rest if e.data and "id" in e.json()] == []
        # The session goes on.
        assert (await served.call(session, request_body(2, "ping")))["result"] == {}


async def test_a_cancel_reaches_the_handler_before_its_post_is_answered() -> None:
    """The cancelled request's task takes its step, and its handler's cleanup runs, before the
    cancel's POST writes its 202: the server stops the work as soon as it can, and the 202
    does not go first."""
    server = demo_server()
    park = Park(server)
    app = server.http_app()
    async with app.running():
        headers = await asgi_session(app)
        finished_when_answered: list[bool] = []

        def answered(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                finished_when_answered.append(park.finished.is_set())

        async with trio.open_nursery() as nursery:
            call = functools.partial(asgi_exchange, reports_the_end=True)
            nursery.start_soon(call, app, "POST", headers, call_body("c1", "park"))
            await park.entered.wait()
            done = await asgi_exchange(app, "POST", headers, cancel_body("c1"), watch=answered)
            assert done.status == 202
        assert park.cancelled
        assert finished_when_answered == [True]


@pytest.mark.invariant(3)
async def test_cancel_in_json_mode_ends_the_original_post_with_an_empty_202() -> None:
    server = demo_server()
    park = Park(server)
    async with serving(server, HttpOptions(json_response=True)) as served:
        session = await served.initialize()
        original: list[Any] = []

        async def call() -> None:
            original.append(await served.post(call_body("call-1", "park"), session))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            await park.entered.wait()
            response = await served.post(cancel_body("call-1", "user cancelled"), session)
            assert response.status_code == 202
        (response,) = original
        assert response.status_code == 202
        assert response.content == b""
        assert "content-type" not in response.headers
        assert park.cancelled


async def test_json_mode_sends_a_requests_notifications_on_the_get_stream() -> None:
    """A JSON response carries one message: progress goes to the GET stream instead."""
    server = demo_server()
    park = Park(server)
    async with serving(server, HttpOptions(json_response=True)) as served:
        session = await served.initialize()
        async with served.stream_get(session) as listener:
            original: list[Any] = []

            async def call() -> None:
                original.append(await served.post(call_body("j", "park"), session))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                assert (await listener.message())["params"]["message"] == "first-frame"
                park.release.set()
            assert (await listener.message())["params"]["message"] == "second-frame"
        (response,) = original
        assert response.status_code == 200
        assert result_text(response.json()) == "done"


# -- nested requests -------------------------------------------------------------------------------


def sampling_server() -> tuple[Server, trio.Event, list[str]]:
    server = demo_server()
    finished = trio.Event()
    outcome: list[str] = []

    @server.tool()
    async def ask(ctx: Context) -> str:
        try:
            result = await ctx.sample("What is six times seven?", max_tokens=5)
            content = result.content
            assert not isinstance(content, list)
            outcome.append("answered")
            return f"the model said {getattr(content, 'text', '?')}"
        except trio.Cancelled:
            outcome.append("cancelled")
            raise
        finally:
            finished.set()

    return server, finished, outcome


async def test_nested_request_arrives_on_the_tool_stream_and_its_answer_gets_202() -> None:
    server, _, outcome = sampling_server()
    async with serving(server) as served:
        session = await served.initialize(capabilities={"sampling": {}})
        async with served.stream_post(call_body("parent", "ask"), session) as reader:
            nested = await reader.message()
            assert nested["method"] == "sampling/createMessage"
            assert nested["params"]["maxTokens"] == 5
            answer = {
                "jsonrpc": "2.0",
                "id": nested["id"],
                "result": {
                    "role": "assistant",
                    "content": {"type": "text", "text": "42"},
                    "model": "test-model",
                },
            }
            response = await served.post(answer, session)
            assert response.status_code == 202
            assert response.content == b""
            final = await reader.message()
            assert await reader.next() is None
        assert final["id"] == "parent"
        assert result_text(final) == "the model said 42"
        assert outcome == ["answered"]


@pytest.mark.invariant(6)
async def test_cancelling_the_parent_cancels_the_nested_request_on_the_parent_stream() -> None:
    """Seed (a) 14-15: the nested request's cancel goes out on the parent's stream, which
    ends only after it (the engine tells the transport of the suppression in write order)."""
    server, finished, outcome = sampling_server()
    async with serving(server) as served:
        session = await served.initialize(capabilities={"sampling": {}})
        async with served.stream_post(call_body("parent", "ask"), session) as reader:
            nested = await reader.message()
            assert nested["method"] == "sampling/createMessage"
            response = await served.post(cancel_body("parent", "parent aborted"), session)
            assert response.status_code == 202
            await finished.wait()
            rest = [e.json() for e in await reader.rest() if e.data]
        assert outcome == ["cancelled"]
        assert rest == [
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": nested["id"]},
            }
        ]


async def test_cancelling_the_parent_tells_the_client_about_the_nested_request() -> None:
    """With a GET stream open too, the client is told once; the parent gets
    no response, and a late answer to the nested request is harmless."""
    server, finished, outcome = sampling_server()
    async with serving(server) as served:
        session = await served.initialize(capabilities={"sampling": {}})
        async with served.stream_get(session) as listener:
            async with served.stream_post(call_body("parent", "ask"), session) as reader:
                nested = await reader.message()
                response = await served.post(cancel_body("parent"), session)
                assert response.status_code == 202
                await finished.wait()
                on_parent = [e.json() for e in await reader.rest() if e.data]
            cancel = {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": nested["id"]},
            }
            if cancel not in on_parent:
                assert await listener.message() == cancel
        assert outcome == ["cancelled"]
        assert all("result" not in m and "error" not in m for m in on_parent)
        # A late answer to the cancelled nested request is accepted and ignored.
        late = {"jsonrpc": "2.0", "id": nested["id"], "result": {}}
        assert (await served.post(late, session)).status_code == 202


# -- the GET stream --------------------------------------------------------------------------------


async def test_get_stream_receives_list_changed() -> None:
    server = demo_server()
    async with serving(server) as served:
        session = await served.initialize()
        async with served.stream_get(session) as listener:
            assert listener.response.status_code == 200
            assert listener.response.headers["content-type"] == "text/event-stream"

            @server.tool()
            async def late_tool() -> str:
                return "late"

            event = await listener.next()
            assert event is not None and event.id is not None
            assert event.id.startswith(session + ".0.")
            assert event.json() == {
                "jsonrpc": "2.0",
                "method": "notifications/tools/list_changed",
            }
        result = await served.call(session, request_body(1, "tools/list"))
        assert "late_tool" in {tool["name"] for tool in result["result"]["tools"]}


async def test_list_changed_waits_for_the_next_get_when_none_is_open() -> None:
    server = demo_server()
    async with serving(server) as served:
        session = await served.initialize()
        server.remove_tool("echo")
        async with served.stream_get(session) as listener:
            assert (await listener.message())["method"] == "notifications/tools/list_changed"


@pytest.mark.invariant(2)
async def test_a_second_get_replaces_the_first() -> None:
    server = demo_server()
    async with serving(server) as served:
        session = await served.initialize()
        async with served.stream_get(session) as first:
            assert first.response.status_code == 200
            async with served.stream_get(session) as second:
                assert second.response.status_code == 200
                assert await first.rest() == []  # the first response has ended
                # Its handler has let go (only the second is active) and left the second's
                # registration alone: removal is by identity.
                await eventually(lambda: served.app.sessions[session].active == 1)
                server.remove_tool("echo")
                assert (await second.message())["method"] == "notifications/tools/list_changed"


async def test_idle_streams_get_keepalive_comments() -> None:
    server = demo_server()
    park = Park(server)
    async with serving(server, HttpOptions(keepalive_interval=0.2)) as served:
        session = await served.initialize()
        async with served.stream_get(session) as listener:
            item = await listener.item()
            assert item == SseComment("keepalive")
        async with served.stream_post(call_body(1, "park"), session) as reader:
            await park.entered.wait()
            while not isinstance(item := await reader.item(), SseComment):
                assert item is not None
            park.release.set()
            assert result_text((await reader.rest())[-1].json()) == "done"


# -- resuming --------------------------------------------------------------------------------------


def stepper_server() -> tuple[Server, list[trio.Event]]:
    """A tool that reports progress 1..4, each after the test opens its gate."""
    server = demo_server()
    gates = [trio.Event() for _ in range(4)]

    @server.tool()
    async def steps(ctx: Context) -> str:
        for number, gate in enumerate(gates, 1):
            await gate.wait()
            await ctx.report_progress(number, 4, f"step {number}")
        return "all steps"

    return server, gates


async def test_resume_a_cut_stream_with_last_event_id() -> None:
    """Cut after the first progress event; the request goes on (a disconnect is not a cancel) and
    a GET with Last-Event-ID gets exactly what was missed, then the rest, then the result."""
    server, gates = stepper_server()
    async with serving(server) as served:
        session = await served.initialize()
        gates[0].set()
        async with served.stream_post(call_body("r", "steps"), session) as reader:
            prime = await reader.next()
            assert prime is not None and prime.data == "" and prime.id is not None
            first = await reader.next()
            assert first is not None and first.json()["params"]["message"] == "step 1"
        assert first.id is not None
        gates[1].set()  # produced while nobody listens
        async with served.stream_get(session, last_event_id=first.id) as resumed:
            assert resumed.response.status_code == 200
            step2 = await resumed.next()
            assert step2 is not None
            gates[2].set()
            gates[3].set()
            events = [step2, *await resumed.rest()]
        assert progress_messages(events) == ["step 2", "step 3", "step 4"]
        assert events[-1].json()["result"]["content"][0]["text"] == "all steps"
        assert len(events) == 4
        seen = ids_of([first, *events])
        assert len({stream for stream, _ in seen}) == 1
        assert [seq for _, seq in seen] == sorted({seq for _, seq in seen})


async def test_resume_after_the_request_finished_replays_from_the_store() -> None:
    server, gates = stepper_server()
    async with serving(server) as served:
        session = await served.initialize()
        gates[0].set()
        async with served.stream_post(call_body("r", "steps"), session) as reader:
            await reader.next()  # priming
            first = await reader.next()
            assert first is not None and first.id is not None
        for gate in gates[1:]:
            gate.set()
        state = served.app.sessions[session]
        await eventually(lambda: state.engine.in_flight("r") is None and not state.request_streams)
        async with served.stream_get(session, last_event_id=first.id) as resumed:
            events = await resumed.rest()
        assert progress_messages(events) == ["step 2", "step 3", "step 4"]
        assert events[-1].json()["result"]["content"][0]["text"] == "all steps"
        # That resume carried the stream to its end: nothing is left to resume, and the store
        # has let it go.
        prime_id = first.id.rsplit(".", 1)[0] + ".0"
        headers = served.headers(session, accept="text/event-stream", last_event_id=prime_id)
        response = await served.client.get(served.url, headers=headers)
        assert response.status_code == 400
        assert response.json()["error"]["message"] == "Bad Request: unknown Last-Event-ID"


async def test_unknown_or_foreign_last_event_id_gets_400(demo_http: Served) -> None:
    session = await demo_http.initialize()
    other = await demo_http.initialize()
    response = await demo_http.post(call_body(1, "echo", {"text": "x"}), other)
    foreign = parse_sse(response.text)[-1].id
    assert foreign is not None and foreign.startswith(other + ".")
    # Strictly ASCII digits, bounded, and never past what the stream has sent: "\xb2" arrives
    # as a superscript two, which passes str.isdigit() and fails int().
    bad: list[str | bytes] = ["garbage", "a.b.c", foreign, f"{session}.r99.0", "nope.0.1"]
    bad += [f"{session}.0.".encode() + b"\xb2", f"{session}.0.1\u00b2".encode("latin-1")]
    bad += [f"{session}.0.+1", f"{session}.0.-1", f"{session}.0.1_0", f"{session}.0.0x1"]
    bad += [f"{session}.0.{'9' * 20}", f"{session}.0.99", f"{session}.0.", f"{session}.0.1.2"]
    for value in bad:
        headers = demo_http.headers(session, accept="text/event-stream")
        pairs = [(k.encode(), v.encode()) for k, v in headers.items()]
        pairs.append((b"last-event-id", value if isinstance(value, bytes) else value.encode()))
        response = await demo_http.client.get(demo_http.url, headers=pairs)
        assert response.status_code == 400, value
        assert "Last-Event-ID" in response.json()["error"]["message"]
    assert not demo_http.errors


async def test_request_streams_are_primed_from_2025_11_25_on(demo_http: Served) -> None:
    """Priming events (empty data) are new in 2025-11-25; older clients may choke on them."""
    for version, primed in (("2025-06-18", False), (VERSION, True)):
        session = await demo_http.initialize(version)
        response = await demo_http.post(
            call_body(1, "echo", {"text": "x"}), session, version=version
        )
        events = parse_sse(response.text)
        assert (events[0].data == "") is primed, version
    response = await demo_http.post(initialize_body(), version=None)
    assert all(e.data for e in parse_sse(response.text))


async def test_an_answer_known_whole_has_its_length_and_a_running_one_streams_in_chunks() -> None:
    """A request answered by the time its SSE response starts goes out whole, with its
    ``Content-Length`` (no chunk framing for hypercorn, a proxy or the client to do); one
    still running streams in chunks, its events as they come, and ends with its answer."""
    server = demo_server()
    park = Park(server)
    async with serving(server) as served:
        opened = await served.post(initialize_body(), version=None)
        assert opened.headers["content-length"] == str(len(opened.content))
        session = await served.initialize()
        response = await served.post(call_body(1, "echo", {"text": "whole"}), session)
        assert response.headers["content-type"] == "text/event-stream"
        assert response.headers["content-length"] == str(len(response.content))
        assert "transfer-encoding" not in response.headers
        events = parse_sse(response.text)
        assert events[0].data == ""  # primed all the same: a client may still resume it
        assert result_text(events[-1].json()) == "whole"
        async with served.stream_post(call_body(2, "park"), session) as reader:
            assert reader.response.headers["transfer-encoding"] == "chunked"
            assert "content-length" not in reader.response.headers
            await park.entered.wait()
            park.release.set()
            rest = await reader.rest()
        assert progress_messages(rest) == ["first-frame", "second-frame"]
        assert result_text(rest[-1].json()) == "done"
    assert not served.errors


@pytest.mark.invariant(11)
async def test_resuming_a_live_stream_past_its_kept_events_gets_400() -> None:
    """If the ring buffer already dropped what the client missed, a silent gap would lose
    messages: the resume is refused instead, while the request is still running."""
    server, gates = stepper_server()
    async with serving(
        server,
        HttpOptions(scale_out=ScaleOut(event_store=MemoryEventStore(max_events_per_stream=1))),
    ) as served:
        session = await served.initialize()
        gates[0].set()
        async with served.stream_post(call_body("r", "steps"), session) as reader:
            await reader.next()  # priming
            first = await reader.next()
            assert first is not None and first.id is not None
        gates[1].set()
        gates[2].set()
        state = served.app.sessions[session]
        stream = state.request_streams["r"]
        await eventually(lambda: stream.seq >= 3)
        headers = served.headers(session, accept="text/event-stream")
        headers["last-event-id"] = first.id
        response = await served.client.get(served.url, headers=headers)
        assert response.status_code == 400
        assert "no longer kept" in response.json()["error"]["message"]
        gates[3].set()


# -- bounded buffers -------------------------------------------------------------------------------


def chatty_server(steps: int, size: int = 16) -> Server:
    """A tool that reports progress ``steps`` times (messages of ``size`` bytes), then answers."""
    server = demo_server()

    @server.tool()
    async def chatty(ctx: Context) -> str:
        for step in range(steps):
            await ctx.report_progress(step, message=f"{step:08}".ljust(size, "."))
        return "chatted"

    return server


@pytest.mark.invariant(11)
async def test_json_mode_keeps_no_progress_for_a_get_that_never_came() -> None:
    """A JSON response cannot carry a request's progress, and with no GET open there is nobody
    to give it to: 200 calls leave nothing queued, and a later GET gets none of it stale."""
    server = chatty_server(steps=30)
    async with serving(server, HttpOptions(json_response=True)) as served:
        session = await served.initialize()
        for rid in range(200):
            response = await served.post(call_body(rid, "chatty"), session)
            assert result_text(response.json()) == "chatted"
        state = served.app.sessions[session]
        assert not state.standalone.backlog
        assert state.standalone.seq == 0
        store = served.app.store
        assert isinstance(store, MemoryEventStore)
        assert len(store) == 0
        assert store.held_bytes == 0
        # The last response counts as pending until its POST's handler lets go of it.
        await eventually(lambda: served.app.budget.used == 0)
        async with served.stream_get(session) as listener:
            server.remove_tool("echo")
            assert await listener.message() == {
                "jsonrpc": "2.0",
                "method": "notifications/tools/list_changed",
            }


async def test_json_mode_keeps_a_server_request_for_the_next_get() -> None:
    """A nested request waits for its answer, so unlike progress it is kept for a GET to come."""
    server, _, outcome = sampling_server()
    async with serving(server, HttpOptions(json_response=True)) as served:
        session = await served.initialize(capabilities={"sampling": {}})
        state = served.app.sessions[session]
        original: list[Any] = []

        async def call() -> None:
            original.append(await served.post(call_body("parent", "ask"), session))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            await eventually(lambda: len(state.standalone.backlog) == 1)
            async with served.stream_get(session) as listener:
                nested = await listener.message()
            assert nested["method"] == "sampling/createMessage"
            answer = {
                "jsonrpc": "2.0",
                "id": nested["id"],
                "result": {
                    "role": "assistant",
                    "content": {"type": "text", "text": "42"},
                    "model": "test-model",
                },
            }
            assert (await served.post(answer, session)).status_code == 202
        (response,) = original
        assert result_text(response.json()) == "the model said 42"
        assert outcome == ["answered"]


def list_changes(server: Server, count: int) -> None:
    """``count`` list-changed notifications to every session, each 58 bytes on the wire."""
    for _ in range(count):
        server.notify_list_changed("tools")


async def test_the_get_backlog_keeps_the_newest_events_within_its_bounds() -> None:
    """What waits for a GET that is not open is bounded in count and bytes per session, the
    oldest dropped first; the GET then gets the newest ones."""
    server = demo_server()
    options = HttpOptions(limits=Limits(max_backlog_events=5, max_backlog_bytes=1000))
    async with serving(server, options) as served:
        session = await served.initialize()
        state = served.app.sessions[session]
        list_changes(server, 100)
        await eventually(lambda: state.standalone.seq == 100)
        assert len(state.standalone.backlog) == 5
        async with served.stream_get(session) as listener:
            got = [await listener.next() for _ in range(5)]
        assert [event.id for event in got if event is not None] == [
            f"{session}.0.{seq}" for seq in range(96, 101)
        ]
    options = HttpOptions(limits=Limits(max_backlog_bytes=200))
    async with serving(server, options) as served:
        session = await served.initialize()
        state = served.app.sessions[session]
        list_changes(server, 100)
        await eventually(lambda: state.standalone.seq == 100)
        assert len(state.standalone.backlog) == 3
        assert state.standalone.backlog_bytes <= 200


def all_at(states: list[HttpSession], seq: int) -> bool:
    return all(state.standalone.seq == seq for state in states)


async def test_the_backlogs_of_all_sessions_share_one_bound() -> None:
    """Past ``max_buffered_bytes`` for all the sessions' backlogs together, the oldest event of
    them all goes first: each session keeps its newest."""
    server = demo_server()
    async with serving(server, HttpOptions(limits=Limits(max_buffered_bytes=1000))) as served:
        sessions = [await served.initialize() for _ in range(4)]
        states = [served.app.sessions[session] for session in sessions]
        for number in range(1, 51):  # one at a time, so that the sessions' events interleave
            list_changes(server, 1)
            await eventually(functools.partial(all_at, states, number))
        kept = [state.standalone.backlog_bytes for state in states]
        assert sum(kept) <= 1000
        assert served.app.budget.used == sum(kept)
        assert max(kept) - min(kept) <= 58  # each keeps its newest, about a quarter
        waiting = len(states[-1].standalone.backlog)
        async with served.stream_get(sessions[-1]) as listener:
            events = [await listener.next() for _ in range(waiting)]
        assert [event.id for event in events if event is not None][-1] == f"{sessions[-1]}.0.50"
        assert served.app.budget.used == sum(kept[:-1])


def flood_server(count: int, size: int) -> tuple[Server, trio.Event]:
    """A tool that reports progress ``count`` times with ``size``-byte messages, then answers."""
    server = demo_server()
    done = trio.Event()

    @server.tool()
    async def flood(ctx: Context) -> str:
        for step in range(count):
            await ctx.report_progress(step, message="x" * size)
        done.set()
        return "flooded"

    return server, done


async def flooded_stream(served: Served, session: str, reader: SseReader) -> EventStream:
    """The stream of the ``flood`` call ``reader`` made, once its first event has arrived."""
    state = served.app.sessions[session]
    await eventually(lambda: "f" in state.request_streams)
    stream = state.request_streams["f"]
    prime = await reader.next()
    assert prime is not None and prime.data == ""
    return stream


@pytest.mark.invariant(11)
async def test_a_client_that_does_not_read_its_stream_is_cut_before_memory_grows() -> None:
    """25 MiB of progress to a client that reads none of it: past ``max_pending_bytes`` waiting
    to be written, its connection is ended after what it has, and the rest goes only to the
    (bounded) store. The server's memory stays bounded meanwhile."""
    server, done = flood_server(400, 64 * 1024)
    options = HttpOptions(
        limits=Limits(max_pending_bytes=MIB),
        scale_out=ScaleOut(event_store=MemoryEventStore(max_stream_bytes=2 * MIB)),
    )
    async with serving(server, options) as served:
        session = await served.initialize()
        tracemalloc.start()
        try:
            before = traced()
            async with served.stream_post(call_body("f", "flood"), session) as reader:
                stream = await flooded_stream(served, session, reader)
                await done.wait()
                await eventually(lambda: stream.finished)
                after = traced()
                cut = stream.listener is None
        finally:
            tracemalloc.stop()
        assert after - before < 40 * MIB, (before, after)
        assert cut  # the client was not reading
        assert served.app.budget.used == 0


async def test_a_client_cut_for_not_reading_resumes_where_it_stopped() -> None:
    server, done = flood_server(400, 64 * 1024)
    store = MemoryEventStore(
        max_events_per_stream=1000, max_stream_bytes=64 * MIB, max_bytes=64 * MIB
    )
    options = HttpOptions(
        limits=Limits(max_pending_bytes=MIB), scale_out=ScaleOut(event_store=store)
    )
    async with serving(server, options) as served:
        session = await served.initialize()
        async with served.stream_post(call_body("f", "flood"), session) as reader:
            stream = await flooded_stream(served, session, reader)
            await done.wait()
            await eventually(lambda: stream.finished)
            assert stream.listener is None
            # What was on its way still arrives, then the response ends, without the result.
            first = await reader.rest()
        assert first and all(e.json()["method"] == "notifications/progress" for e in first)
        last = first[-1].id
        assert last is not None
        async with served.stream_get(session, last_event_id=last) as resumed:
            rest = await resumed.rest()
        assert rest[-1].json()["result"]["content"][0]["text"] == "flooded"
        seqs = [seq for _, seq in ids_of([*first, *rest])]
        assert seqs == list(range(1, 402))


async def test_a_request_whose_client_is_away_queues_nothing_beyond_the_store() -> None:
    """While its client is away, a request's events go to the (bounded) store only: 12.5 MiB of
    progress to nobody leaves the server's memory within the store's bound."""
    server = demo_server()
    gate, flooded = trio.Event(), trio.Event()

    @server.tool()
    async def away(ctx: Context) -> str:
        await gate.wait()
        for step in range(200):
            await ctx.report_progress(step, message="x" * 64 * 1024)
        flooded.set()
        await trio.sleep_forever()
        return "never"  # pragma: no cover

    options = HttpOptions(scale_out=ScaleOut(event_store=MemoryEventStore(max_stream_bytes=MIB)))
    async with serving(server, options) as served:
        session = await served.initialize()
        state = served.app.sessions[session]
        tracemalloc.start()
        try:
            before = traced()
            async with served.stream_post(call_body("a", "away"), session) as reader:
                assert (await reader.next()) is not None  # priming
            stream = state.request_streams["a"]
            await eventually(lambda: stream.listener is None)
            gate.set()
            await flooded.wait()
            await eventually(lambda: stream.seq == 200)
            after = traced()
        finally:
            tracemalloc.stop()
        assert after - before < 16 * MIB, (before, after)
        assert not stream.backlog
        assert (await served.post(cancel_body("a"), session)).status_code == 202


@pytest.mark.invariant(11)
async def test_a_session_runs_a_bounded_number_of_requests_at_once() -> None:
    server = demo_server()
    gate = trio.Event()

    @server.tool()
    async def wait() -> str:
        await gate.wait()
        return "waited"

    async with serving(server, HttpOptions(limits=Limits(max_requests_per_session=2))) as served:
        session = await served.initialize()
        state = served.app.sessions[session]
        answers: list[Any] = []

        async def call(rid: int) -> None:
            answers.append(await served.call(session, call_body(rid, "wait")))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call, 1)
            nursery.start_soon(call, 2)
            await eventually(lambda: len(state.request_streams) == 2)
            refused = await served.post(call_body(3, "wait"), session)
            assert refused.status_code == 429
            assert refused.headers["retry-after"] == "1"
            assert refused.json() == {
                "jsonrpc": "2.0",
                "id": 3,
                "error": {
                    "code": -32600,
                    "message": "Too Many Requests: this session already has 2 requests in "
                    "flight, the limit; retry when one has finished",
                },
            }
            gate.set()
        assert [result_text(answer) for answer in answers] == ["waited", "waited"]
        assert result_text(await served.call(session, call_body(3, "wait"))) == "waited"


async def test_a_request_answered_at_once_is_one_write_with_its_priming_event() -> None:
    """The priming event and the response of a request that ends at once go out in one body
    (one write on the connection, not one for each); a slow request's priming event goes out
    alone first, so that its client can resume before the answer."""
    gate = trio.Event()
    server = Server("writes", "1.0")

    @server.tool()
    async def echo(text: str) -> str:
        return text

    @server.tool()
    async def slow() -> str:
        await gate.wait()
        return "late"

    app = server.http_app()
    async with app.running():
        headers = await asgi_session(app)
        for rid in range(1, 21):  # the scheduler's order varies from one round to the next
            fast = await asgi_exchange(app, "POST", headers, call_body(rid, "echo", {"text": "x"}))
            (only,) = fast.chunks
            prime, answer = parse_sse(only.decode())
            assert prime.data == "" and prime.id is not None and answer.id is not None
            assert orjson.loads(answer.data)["id"] == rid

        async with trio.open_nursery() as nursery:
            done: list[Any] = []

            async def call_slow() -> None:
                body = call_body(99, "slow")
                done.append(await asgi_exchange(app, "POST", headers, body, reports_the_end=True))

            nursery.start_soon(call_slow)
            await eventually(
                lambda: (
                    bool(app.sessions)
                    and any(session.engine.in_flight(99) for session in app.sessions.values())
                )
            )
            await trio.testing.wait_all_tasks_blocked()
            gate.set()
        first, last = done[0].chunks
        assert [event.data for event in parse_sse(first.decode())] == [""]
        assert result_text(orjson.loads(parse_sse(last.decode())[0].data)) == "late"


# -- the stream runtime, without HTTP: listeners, the backlog budget, the writer -------------------


def events(replay: Replay | None) -> list[tuple[int, bytes]] | None:
    return replay.events if replay is not None else None


async def test_a_listener_hands_over_in_order_and_a_cut_ends_it_after_what_it_had() -> None:
    listener = Listener()
    got: list[object] = []

    async def take() -> None:
        try:
            while True:
                await listener.wait()
                got.append(listener.receive_nowait())
        except trio.EndOfChannel:
            got.append("end")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(take)
        await trio.testing.wait_all_tasks_blocked()  # waiting: nothing sent yet
        listener.send_nowait(("1", b"a"))
        listener.send_nowait(("2", b"b"))
        assert len(listener) == 2  # sent, not yet taken
        await trio.testing.wait_all_tasks_blocked()
        assert got == [("1", b"a"), ("2", b"b")] and len(listener) == 0
        listener.send_nowait(None)
        listener.close()
    assert got == [("1", b"a"), ("2", b"b"), None, "end"]
    with pytest.raises(trio.ClosedResourceError):
        listener.send_nowait(("3", b"c"))
    with pytest.raises(trio.EndOfChannel):
        listener.receive_nowait()


async def test_a_listener_whose_waiter_was_cancelled_still_delivers(mock_clock: Any) -> None:
    mock_clock.autojump_threshold = 0
    listener = Listener()
    with trio.move_on_after(1):
        await listener.wait()  # cancelled while waiting: it must forget its waiter
    assert not listener.ready()
    with pytest.raises(trio.WouldBlock):
        listener.receive_nowait()
    listener.send_nowait(("1", b"a"))
    assert listener.ready()
    with trio.fail_after(1):
        await listener.wait()  # something is there: no wait
    assert listener.receive_nowait() == ("1", b"a")
    listener.close()
    assert listener.ready()  # the cut is there to take


def test_the_shared_backlog_order_does_not_grow_with_events_taken_by_gets() -> None:
    """Events taken by a GET leave entries behind in the app-wide order of backlog events: they
    are swept out, so that order stays as small as what is queued."""
    budget = ByteBudget(10_000)
    limits = StreamLimits(backlog_events=5_000)
    stream = EventStream("s", "0", NO_STORE, limits=limits, budget=budget)
    for _ in range(5_000):
        stream.push(b"x" * 10)
        stream.push(b"y" * 10)
        stream.detach(stream.attach())
    assert budget.used == 0
    assert len(budget._order) <= 100
    for _ in range(2_000):  # twice what the budget holds: the oldest go, the order follows
        stream.push(b"z" * 10)
    assert budget.used == stream.backlog_bytes == 10_000
    assert len(budget._order) <= 2 * len(stream.backlog) + 64


async def test_a_full_writer_queue_loses_that_streams_resumability_never_blocks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The writer is behind (not even running yet): pushes never wait; the stream whose event
    found the queue full can no longer be resumed, and says so in the log; the others are
    stored whole once the writer runs."""
    store = MemoryEventStore()
    writer = EventWriter(store, max_queued=4)
    kept = EventStream("s", "r1", writer, meta=StreamMeta("s"))
    kept.push(b"1")
    kept.push(b"2")
    lost = EventStream("s", "r2", writer, meta=StreamMeta("s"))
    for _ in range(5):
        lost.push(b"x")  # never blocks
    assert writer.is_lost(lost.stream_id)
    assert "can no longer be resumed" in caplog.text
    async with trio.open_nursery() as nursery:
        await nursery.start(writer.run)
        await writer.flush()
        assert events(await store.replay(kept.stream_id, 0)) == [(1, b"1"), (2, b"2")]
        assert await store.replay(lost.stream_id, 0) is None
        nursery.cancel_scope.cancel()


async def test_the_apps_own_memory_store_is_written_at_once_never_lost() -> None:
    """An app's own MemoryEventStore is written in the caller, with no writer running: what a
    stream pushed is in the store at once, in order, its end too; forgotten, it is gone."""
    store = MemoryEventStore()
    writer = EventWriter(store, max_queued=1)  # a queue that would lose the second write
    sink = MemorySink(store, writer)
    stream = EventStream("s", "r1", sink, meta=StreamMeta("s"))
    stream.open()
    for data in (b"1", b"2", b"3"):
        stream.push(data)
    stream.finish(responded=True)
    replay = await store.replay(stream.stream_id, 0)
    assert replay is not None and replay.finished
    assert events(replay) == [(1, b"1"), (2, b"2"), (3, b"3")]
    assert not sink.is_lost(stream.stream_id)
    stream.delivered()
    assert await store.replay(stream.stream_id, 0) is None


async def test_an_app_writes_a_memory_store_at_once_and_any_other_through_its_writer() -> None:
    """A store of any other class (a subclass may wait in its writes) keeps the writer."""

    class Subclassed(MemoryEventStore):
        pass

    assert isinstance(Server("s").http_app().sink, MemorySink)
    given = Server("s").http_app(HttpOptions(scale_out=ScaleOut(event_store=Subclassed())))
    assert given.sink is given.writer


class _CountingStore(MemoryEventStore):
    """A store the app's writer writes (any class but the app's own): what it was asked, in
    order; with ``hold``, each ``open`` waits for it (a slow store)."""

    def __init__(self, hold: trio.Event | None = None) -> None:
        super().__init__()
        self.asked: list[tuple[str, str]] = []
        self.hold = hold

    async def open(self, stream_id: str, meta: StreamMeta) -> None:
        self.asked.append(("open", stream_id))
        if self.hold is not None:
            await self.hold.wait()
        await super().open(stream_id, meta)

    async def append(self, stream_id: str, seq: int, data: bytes) -> None:
        self.asked.append(("append", stream_id))
        await super().append(stream_id, seq, data)

    async def finish(self, stream_id: str) -> None:
        self.asked.append(("finish", stream_id))
        await super().finish(stream_id)

    async def forget(self, stream_id: str) -> None:
        self.asked.append(("forget", stream_id))
        await super().forget(stream_id)


def _answered(writer: EventWriter, key: str) -> EventStream:
    """A request's stream that got its one event and ended (not delivered yet)."""
    stream = EventStream("s", key, writer, meta=StreamMeta("s"))
    stream.push(b"answer")
    stream.finish(responded=True)
    return stream


async def test_a_stream_delivered_in_its_window_is_not_written_when_a_delete_wakes_the_writer(
    mock_clock: trio.testing.MockClock,
) -> None:
    """A stream written and then delivered wakes the writer to delete it; the stream answered
    at that moment still gets its coalescing window, and delivered within it costs the store
    nothing. (The writer used to write at once whatever was queued when a delete woke it: a
    busy server wrote and deleted a share of its young streams for nothing.)"""
    store = _CountingStore()
    writer = EventWriter(store, coalesce=0.005)
    async with trio.open_nursery() as nursery:
        await nursery.start(writer.run)
        old = _answered(writer, "r1")
        await trio.testing.wait_all_tasks_blocked()  # the writer waits out the window...
        mock_clock.jump(0.01)  # ...past which the stream is written
        await trio.testing.wait_all_tasks_blocked()
        written = [(kind, old.stream_id) for kind in ("open", "append", "finish")]
        assert store.asked == written
        old.delivered()  # its delete wakes the writer...
        young = _answered(writer, "r2")  # ...beside a stream answered at that moment
        await trio.testing.wait_all_tasks_blocked()
        young.delivered()  # within its window
        mock_clock.jump(0.01)
        await trio.testing.wait_all_tasks_blocked()
        await writer.flush()
        nursery.cancel_scope.cancel()
    assert store.asked == [*written, ("forget", old.stream_id)]


def test_the_apps_writer_gathers_writes_for_the_window_its_options_give() -> None:
    coalesce = ScaleOut(event_store_coalesce=0.05)
    assert Server("w").http_app(HttpOptions(scale_out=coalesce)).writer.coalesce == 0.05
    assert Server("w").http_app().writer.coalesce == ScaleOut().event_store_coalesce == 0.02


async def test_a_stream_forgotten_while_it_is_written_stops_there_and_leaves_the_store(
    mock_clock: trio.testing.MockClock,
) -> None:
    """A slow store: the stream delivered while its first write is made gets no more writes,
    and what was written of it is deleted; a stream handed over meanwhile is written after."""
    hold = trio.Event()
    store = _CountingStore(hold)
    writer = EventWriter(store, coalesce=0.005)
    async with trio.open_nursery() as nursery:
        await nursery.start(writer.run)
        first = _answered(writer, "r1")
        await trio.testing.wait_all_tasks_blocked()
        mock_clock.jump(0.01)
        await trio.testing.wait_all_tasks_blocked()
        assert store.asked == [("open", first.stream_id)]  # held there
        first.delivered()
        later = EventStream("s", "r2", writer, meta=StreamMeta("s"))
        later.push(b"1")
        hold.set()
        mock_clock.jump(0.01)
        await writer.flush()
        assert await store.replay(first.stream_id, 0) is None
        replay = await store.replay(later.stream_id, 0)
        assert replay is not None and events(replay) == [(1, b"1")]
        nursery.cancel_scope.cancel()
    assert store.asked == [
        ("open", first.stream_id),
        ("forget", first.stream_id),
        ("open", later.stream_id),
        ("append", later.stream_id),
    ]


async def test_a_flush_answers_once_what_came_before_it_is_in_the_store() -> None:
    """A flush cuts the coalescing window short: everything handed over before it is written,
    in each stream's order, when it returns; a session's end too."""
    store = _CountingStore()
    writer = EventWriter(store, coalesce=60.0)
    async with trio.open_nursery() as nursery:
        await nursery.start(writer.run)
        streams = [EventStream("s", f"r{n}", writer, meta=StreamMeta("s")) for n in (1, 2)]
        for data in (b"1", b"2"):
            for stream in streams:
                stream.push(data)
        streams[0].finish(responded=True)
        await store.keep_alive(["s"])
        writer.end_session("s")
        await trio.testing.wait_all_tasks_blocked()  # the writer is in its window
        with trio.fail_after(5):  # a hang guard: the window alone is a minute
            await writer.flush()
        for stream in streams:
            replay = await store.replay(stream.stream_id, 0)
            assert replay is not None and events(replay) == [(1, b"1"), (2, b"2")]
            assert replay.finished is (stream is streams[0])
        assert not await store.session_alive("s")
        nursery.cancel_scope.cancel()
