"""Replicas: with a shared session store, a worker serves a request of a session another worker
opened, from its record, with no new ``initialize``; what one worker's copy changes, the
others follow; a DELETE on any worker ends it everywhere. With a relay, the client's response
to a server request and a cancel reach the worker whose copy needs them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

import attrs
import pytest
import trio

from trio_mcp import Server
from trio_mcp.http import (
    HttpOptions,
    Limits,
    MemoryEventStore,
    MemorySessionStore,
    Relay,
    ScaleOut,
    SessionRecord,
)
from trio_mcp.http._relay import MemoryRelay
from trio_mcp.protocol._errors import ProtocolError
from trio_mcp.server import Context

from .._http import (
    GUARD,
    VERSION,
    Park,
    Served,
    call_body,
    cancel_body,
    eventually,
    parse_sse,
    request_body,
    serving,
)
from ..auth.test_gate import (
    ALICE_REFRESHED,
    ALICE_TOKEN,
    BOB_TOKEN,
    open_session,
    post,
    protected,
)

FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def chatty_server() -> Server:
    server = Server("chatty")

    @server.tool()
    async def chatty(ctx: Context) -> str:
        """Logs at two levels, and says which client it serves."""
        await ctx.info("fine")
        await ctx.error("bad")
        info = ctx.client_info
        return info.name if info is not None else "?"

    @server.tool()
    async def ask(ctx: Context) -> str:
        """Asks the client a name (a request the client answers with a POST)."""
        answer = await ctx.elicit("Your name?", FORM)
        return str((answer.content or {}).get("name"))

    @server.resource("x://1")
    def one() -> str:
        return "one"

    return server


@asynccontextmanager
async def two_workers(
    servers: tuple[Server, Server] | None = None,
    *,
    relay: bool | Relay = True,
    json: bool = False,
    store: MemorySessionStore | None = None,
    record_cache: float = 1.0,
) -> AsyncIterator[tuple[Served, Served, MemorySessionStore]]:
    store = store or MemorySessionStore()
    shared = (MemoryRelay() if relay else None) if isinstance(relay, bool) else relay
    first, second = servers or (chatty_server(), chatty_server())

    def options(node: str) -> HttpOptions:
        scale_out = ScaleOut(
            session_store=store, node_id=node, relay=shared, record_cache=record_cache
        )
        return HttpOptions(json_response=json, scale_out=scale_out)

    async with (
        serving(first, options("a")) as a,
        serving(second, options("b")) as b,
    ):
        yield a, b, store


async def logged(served: Served, session: str, rid: int) -> tuple[list[str], object]:
    response = await served.post(call_body(rid, "chatty"), session)
    assert response.status_code == 200, response.text
    messages = [e.json() for e in parse_sse(response.text) if e.data]
    logs = [m["params"]["data"] for m in messages if m.get("method") == "notifications/message"]
    return logs, messages[-1]["result"]["content"][0]["text"]


async def test_a_session_opened_on_one_worker_is_served_by_another() -> None:
    async with two_workers() as (a, b, _):
        session = await a.initialize(capabilities={"roots": {}})
        assert session.startswith("a.")
        logs, client = await logged(b, session, 1)
        assert (logs, client) == (["fine", "bad"], "raw-http")
        replica = b.app.sessions[session]
        assert replica.replica and not a.app.sessions[session].replica
        state = replica.connection.state
        assert state.protocol_version == VERSION and state.initialized
        assert state.client_capabilities.roots is not None
        # A second initialize is refused there as on the worker that opened it.
        with pytest.raises(ProtocolError, match="already initialized"):
            state.check_initialize()


async def test_set_level_on_one_worker_applies_to_logs_another_sends() -> None:
    async with two_workers() as (a, b, _):
        session = await a.initialize()
        assert (await logged(b, session, 1))[0] == ["fine", "bad"]  # b holds a replica now
        level = await a.call(session, request_body(2, "logging/setLevel", {"level": "error"}))
        assert level["result"] == {}
        assert (await logged(b, session, 3))[0] == ["bad"]
        sub = await a.call(session, request_body(4, "resources/subscribe", {"uri": "x://1"}))
        assert sub["result"] == {}
        await b.call(session, request_body(5, "ping"))
        assert b.app.sessions[session].connection.subscriptions == {"x://1"}


class CountedStore(MemorySessionStore):
    """Counts the record reads that serve a request (``touch``: read, expiry pushed); with
    ``hold`` set, a read takes the record at once and hands it back when ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        #: The sessions of each ``touch_many``, which the requests' reads do not count.
        self.renewed: list[list[str]] = []
        self.hold = False
        self.holding = trio.Event()
        self.release = trio.Event()

    async def touch_many(
        self, session_ids: Sequence[str], ttl: float
    ) -> list[SessionRecord | None]:
        self.renewed.append(list(session_ids))
        return [await MemorySessionStore.touch(self, session_id, ttl) for session_id in session_ids]

    async def touch(self, session_id: str, ttl: float) -> SessionRecord | None:
        self.reads += 1
        record = await super().touch(session_id, ttl)
        if self.hold:
            self.hold = False
            self.holding.set()
            await self.release.wait()
        return record


class Uncounted(MemoryRelay):
    """A relay that cannot say how many it reached, and loses every announcement."""

    async def send(self, node: str | None, message: bytes) -> None:  # type: ignore[override]
        if b'"k":"changed"' not in message and b'"k":"end"' not in message:
            await super().send(node, message)


async def test_with_a_relay_a_record_read_stands_for_the_requests_that_follow() -> None:
    store = CountedStore()
    async with two_workers(store=store, record_cache=60) as (a, b, _):
        session = await a.initialize()
        await b.call(session, request_body(1, "ping"))  # builds the replica from the record
        read = store.reads
        for rid in range(2, 7):
            assert (await b.call(session, request_body(rid, "ping")))["result"] == {}
        assert store.reads == read
        # A change is answered once every copy dropped its reading: the next request reads.
        level = await a.call(session, request_body(7, "logging/setLevel", {"level": "error"}))
        assert level["result"] == {}
        read = store.reads
        assert (await logged(b, session, 8))[0] == ["bad"]
        assert store.reads == read + 1
        # So is an end: the copy that read the record a moment ago is gone with it.
        assert (await a.client.delete(a.url, headers=a.headers(session))).status_code == 200
        gone = await b.post(request_body(9, "ping"), session)
        assert gone.status_code == 404


async def test_readings_in_use_are_renewed_together_before_they_lapse() -> None:
    store = CountedStore()
    async with two_workers(store=store, record_cache=1.0) as (a, b, _):
        used, left = await a.initialize(), await a.initialize()
        await b.call(used, request_body(1, "ping"))  # each replica built from its record
        await b.call(left, request_body(2, "ping"))
        await b.call(used, request_body(3, "ping"))  # served on its reading
        reads = store.reads
        await eventually(lambda: bool(store.renewed))
        # Read again before it lapsed; the one no request used since its reading is left to
        # lapse, for its next request (if any) to read.
        assert store.renewed[0] == [used]
        assert (await b.call(used, request_body(4, "ping")))["result"] == {}
        assert store.reads == reads  # renewed: the request was served on it, no read of its own
        await eventually(lambda: b.app.sessions[left].record_until < trio.current_time())
        assert (await b.call(left, request_body(5, "ping")))["result"] == {}
        assert store.reads == reads + 1
        assert all(left not in ids for ids in store.renewed)


async def test_a_renewal_that_finds_the_record_gone_ends_the_copy() -> None:
    store = CountedStore()
    async with two_workers(store=store, record_cache=1.0) as (a, b, _):
        session = await a.initialize()
        await b.call(session, request_body(1, "ping"))
        await b.call(session, request_body(2, "ping"))
        await store.delete(session)  # as when it expires, or a DELETE no relay told of
        await eventually(lambda: session not in b.app.sessions)
        assert store.renewed == [[session]]
        assert (await b.post(request_body(3, "ping"), session)).status_code == 404


class Lagging(MemoryRelay):
    """A relay that delivers a moment after it was sent to, as one across a network does."""

    def __init__(self, nursery: trio.Nursery) -> None:
        super().__init__()
        self._nursery = nursery

    async def send(self, node: str | None, message: bytes) -> int:
        targets = list(self._nodes.values()) if node is None else [self._nodes.get(node, [])]
        delivers = [d for ds in targets for d in ds]

        async def later() -> None:
            await trio.sleep(0.05)
            for deliver in delivers:
                deliver(message)

        self._nursery.start_soon(later)
        await trio.lowlevel.checkpoint()
        return len(delivers)


@pytest.mark.parametrize(
    ("relay_in", "record_cache"),
    [
        # Every worker's word is waited for, though it comes after the announcement's send.
        pytest.param(Lagging, 60.0, id="words-that-come-late"),
        # No word can be counted (the announcement is lost): every reading lapses first.
        pytest.param(lambda _: Uncounted(), 0.3, id="no-word-to-count"),
    ],
)
async def test_a_change_is_answered_once_no_earlier_reading_stands(
    relay_in: Callable[[trio.Nursery], Relay], record_cache: float
) -> None:
    async with (
        trio.open_nursery() as nursery,
        two_workers(relay=relay_in(nursery), record_cache=record_cache) as (a, b, _),
    ):
        session = await a.initialize()
        assert (await logged(b, session, 1))[0] == ["fine", "bad"]
        level = await a.call(session, request_body(2, "logging/setLevel", {"level": "error"}))
        assert level["result"] == {}
        assert (await logged(b, session, 3))[0] == ["bad"]


async def test_a_reading_made_before_a_change_is_not_kept() -> None:
    store = CountedStore()
    async with two_workers(store=store, record_cache=60) as (a, b, _):
        session = await a.initialize()
        async with trio.open_nursery() as nursery:
            store.hold = True  # b's first request reads the record, then waits
            first: list[list[str]] = []

            async def before() -> None:
                first.append((await logged(b, session, 1))[0])

            nursery.start_soon(before)
            await store.holding.wait()
            level = await a.call(session, request_body(2, "logging/setLevel", {"level": "error"}))
            assert level["result"] == {}
            store.release.set()
        assert first == [["fine", "bad"]]  # it came before the change was answered
        assert (await logged(b, session, 3))[0] == ["bad"]


class Flaky(MemoryRelay):
    """A relay whose subscriber the test takes down (None) and brings back (a new number)."""

    def __init__(self) -> None:
        super().__init__()
        self.now: int | None = 0

    def hearing(self) -> int | None:
        return self.now


async def test_a_reading_stands_only_while_the_relay_could_have_missed_nothing() -> None:
    store, relay = CountedStore(), Flaky()
    async with two_workers(store=store, relay=relay, record_cache=60) as (a, b, _):
        session = await a.initialize()
        assert (await logged(b, session, 1))[0] == ["fine", "bad"]
        record = await store.get(session)
        assert record is not None
        relay.now = None  # b's subscriber is down: an announcement now would not reach it
        await store.put(session, attrs.evolve(record, log_level="error"), 60)
        read = store.reads
        assert (await logged(b, session, 2))[0] == ["bad"]
        assert (await logged(b, session, 3))[0] == ["bad"]
        assert store.reads == read + 2  # nothing read while it is down is kept
        relay.now = 1  # back, on a new connection
        await logged(b, session, 4)
        read = store.reads
        await logged(b, session, 5)
        assert store.reads == read  # read under the new connection: it stands


async def test_without_a_relay_the_record_is_read_before_every_request() -> None:
    store = CountedStore()
    async with two_workers(relay=False, store=store) as (a, b, _):
        session = await a.initialize()
        await b.call(session, request_body(1, "ping"))
        read = store.reads
        for rid in range(2, 7):
            await b.call(session, request_body(rid, "ping"))
        assert store.reads == read + 5


async def test_a_delete_on_any_worker_ends_the_session_everywhere() -> None:
    async with two_workers() as (a, b, store):
        session = await a.initialize()
        await b.call(session, request_body(1, "ping"))
        response = await b.client.delete(b.url, headers=b.headers(session))
        assert response.status_code == 200
        assert await store.get(session) is None
        for served in (a, b):
            response = await served.post(request_body(2, "ping"), session)
            assert response.status_code == 404, response.text
            assert session not in served.app.sessions


async def test_an_unknown_or_forged_session_is_404_on_every_worker() -> None:
    async with two_workers() as (a, b, _):
        await a.initialize()
        for forged in ("a.0123456789abcdef0123456789abcdef", "b.nothing", "x" * 300):
            response = await b.post(request_body(1, "ping"), forged)
            assert response.status_code == 404
        assert not b.app.sessions


async def test_concurrent_first_requests_build_one_replica() -> None:
    async with two_workers() as (a, b, _):
        session = await a.initialize()
        built: list[object] = []
        async with trio.open_nursery() as nursery:
            for rid in range(5):

                async def one(rid: int = rid) -> None:
                    answer = await b.call(session, request_body(rid, "ping"))
                    assert answer["result"] == {}
                    built.append(b.app.sessions[session])

                nursery.start_soon(one)
        assert len(built) == 5 and len(set(map(id, built))) == 1


async def test_a_response_to_a_server_request_posted_to_another_worker_reaches_it() -> None:
    async with two_workers() as (a, b, _):
        session = await a.initialize(capabilities={"elicitation": {}})
        async with a.stream_post(call_body(1, "ask"), session) as reader:
            asked = await reader.message()
            assert asked["method"] == "elicitation/create"
            assert asked["id"] == "a/1"  # the id names the worker whose copy waits
            answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept"}}
            answer["result"]["content"] = {"name": "Ada"}
            response = await b.post(answer, session)
            assert response.status_code == 202
            result = await reader.message()
        assert result["result"]["content"][0]["text"] == "Ada"
        assert session in b.app.sessions  # b relayed it from its own copy


async def test_without_a_relay_such_a_response_is_not_carried() -> None:
    async with two_workers(relay=False) as (a, b, _):
        session = await a.initialize(capabilities={"elicitation": {}})
        async with a.stream_post(call_body(1, "ask"), session) as reader:
            asked = await reader.message()
            answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "decline"}}
            assert (await b.post(answer, session)).status_code == 202
            with trio.move_on_after(0.3) as waited:
                await reader.message()
            assert waited.cancelled_caught  # b has no such request, and a never heard of it


async def test_a_cancel_posted_to_another_worker_stops_the_handler() -> None:
    first, second = chatty_server(), chatty_server()
    park = Park(first)
    Park(second)
    async with two_workers((first, second)) as (a, b, _):
        session = await a.initialize()
        async with a.stream_post(call_body(7, "park"), session) as reader:
            await park.entered.wait()
            assert (await b.post(cancel_body(7), session)).status_code == 202
            with trio.fail_after(GUARD):
                await park.finished.wait()
            assert park.cancelled
            rest = await reader.rest()
        assert all("result" not in e.json() for e in rest if e.data)


@pytest.mark.parametrize("record_cache", [1.0, 0.0])
async def test_a_delete_elsewhere_ends_this_workers_copy_at_once(record_cache: float) -> None:
    """With a record cache or without (where no copy keeps a reading, but the end still
    reaches them all)."""
    async with two_workers(record_cache=record_cache) as (a, b, _):
        session = await a.initialize()
        response = await b.client.delete(b.url, headers=b.headers(session))
        assert response.status_code == 200
        await eventually(lambda: session not in a.app.sessions)


async def test_a_request_on_one_worker_reaches_the_get_stream_held_by_another() -> None:
    """JSON responses carry one message: a tool's elicitation goes to the session's GET stream,
    which another worker's copy holds; the answer, POSTed there, comes back."""
    async with two_workers(json=True) as (a, b, store):
        session = await a.initialize(capabilities={"elicitation": {}})
        async with a.stream_get(session) as get:
            await eventually(lambda: a.app.sessions[session].standalone.listener is not None)
            record = None
            while record is None or record.get_node != "a":
                await trio.sleep(0.01)
                record = await store.get(session)
            result: dict[str, object] = {}
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    result.update(await b.call(session, call_body(1, "ask")))

                nursery.start_soon(call)
                asked = await get.message()
                assert asked["method"] == "elicitation/create" and asked["id"] == "b/1"
                answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept"}}
                answer["result"]["content"] = {"name": "Grace"}
                assert (await a.post(answer, session)).status_code == 202
        assert result["result"]["content"][0]["text"] == "Grace"  # type: ignore[index]


async def test_only_the_owner_gets_a_replica_built() -> None:
    """Under authorization, another principal's request for the session is an unknown
    session on every worker (404), and builds nothing; the owner's, by a refreshed token,
    is served."""
    store, relay = MemorySessionStore(), MemoryRelay()
    (first, _), (second, _) = protected(), protected()

    def options(node: str) -> HttpOptions:
        return HttpOptions(scale_out=ScaleOut(session_store=store, node_id=node, relay=relay))

    async with serving(first, options("a")) as a, serving(second, options("b")) as b:
        session = await open_session(a, ALICE_TOKEN)
        assert (await store.get(session)) is not None
        ping = request_body(1, "ping")
        assert (await post(b, ping, BOB_TOKEN, session)).status_code == 404
        assert session not in b.app.sessions
        assert (await post(a, ping, BOB_TOKEN, session)).status_code == 404
        assert session in a.app.sessions  # a stranger's request ends nothing
        assert (await post(b, ping, ALICE_REFRESHED, session)).status_code == 200
        assert b.app.sessions[session].owner == a.app.sessions[session].owner


async def test_a_replica_built_for_a_refused_request_expires_idle() -> None:
    async with two_workers() as (a, b, _):
        session = await a.initialize()
        bad = b.headers(session, version="1999-01-01")
        response = await b.client.post(
            b.url, content=b'{"jsonrpc":"2.0","id":1,"method":"ping"}', headers=bad
        )
        assert response.status_code == 400
        replica = b.app.sessions[session]
        assert replica.idle_deadline < float("inf")  # it expires with the idle timeout


async def test_a_session_busy_on_one_worker_past_the_idle_timeout_stays_everywhere() -> None:
    first, second = chatty_server(), chatty_server()
    park = Park(first)
    store = MemorySessionStore()

    def options(node: str) -> HttpOptions:
        return HttpOptions(
            limits=Limits(session_idle_timeout=0.6),
            scale_out=ScaleOut(session_store=store, node_id=node),
        )

    async with serving(first, options("a")) as a, serving(second, options("b")) as b:
        session = await a.initialize()
        async with a.stream_post(call_body("p", "park"), session) as reader:
            await park.entered.wait()
            await trio.sleep(1.5)  # past the idle timeout, with no request of the session
            assert "result" in await b.call(session, request_body(1, "ping"))
            park.release.set()
            await reader.rest()


async def test_a_worker_that_stops_hands_its_sessions_over() -> None:
    records, events = MemorySessionStore(), MemoryEventStore()

    def options(node: str) -> HttpOptions:
        scale_out = ScaleOut(session_store=records, event_store=events, node_id=node)
        return HttpOptions(scale_out=scale_out)

    async with serving(chatty_server(), options("b")) as b:
        async with serving(chatty_server(), options("a")) as a:
            session = await a.initialize()
            held = a.app.sessions[session]
            assert a.app.fleet is not None
            await a.app.fleet.hold_get(held)  # its GET stream is held on a
            record = await records.get(session)
            assert record is not None and record.get_node == "a"
        # a stopped: the record stays, naming no holder of the GET stream now.
        record = await records.get(session)
        assert record is not None and record.get_node is None
        assert (await b.call(session, request_body(1, "ping")))["result"] == {}
