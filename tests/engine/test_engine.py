"""Engine details: outbound cancels by id, routing hints for transports, minimal transports,
whole-line writes, and the legacy era lock."""

from __future__ import annotations

import gc
from collections.abc import Iterable
from typing import Any

import orjson
import pytest
import trio
import trio.testing

from trio_mcp import Context, RequestCancelled, Server, open_client
from trio_mcp.lowlevel import Engine, InFlight, Route
from trio_mcp.protocol._jsonrpc import Notification, Request, RequestId
from trio_mcp.server import ServerConnection
from trio_mcp.transports import (
    BaseTransport,
    LineTransport,
    MemoryTransport,
    OutgoingMessage,
    memory_transport_pair,
)

from ..wire import WirePeer, wire_to


class Recording(BaseTransport):
    """A server-side transport that records the routing hint of every message it sends."""

    def __init__(self, inner: MemoryTransport) -> None:
        self.inner = inner
        self.sent: list[tuple[dict[str, Any], RequestId | None]] = []
        self.suppressed: list[RequestId] = []

    async def send(
        self, data: bytes, *, related_request_id: RequestId | None = None, final: bool = False
    ) -> None:
        self.sent.append((orjson.loads(data), related_request_id))
        await self.inner.send(data)

    async def receive(self) -> bytes:
        return await self.inner.receive()

    def request_suppressed(self, request_id: RequestId) -> None:
        self.suppressed.append(request_id)


def nested_server(outcomes: list[str]) -> Server:
    server = Server("nested")

    @server.tool()
    async def ask(ctx: Context) -> str:
        try:
            await ctx.sample("hi", max_tokens=1)
        except RequestCancelled as exc:
            outcomes.append(f"nested cancelled: {exc.reason}")
            return "gave up"
        return "answered"  # pragma: no cover

    return server


async def test_a_server_cancels_its_own_nested_request_by_id(autojump_clock: Any) -> None:
    outcomes: list[str] = []
    server = nested_server(outcomes)
    async with wire_to(server, initialize=False) as peer:
        await peer.initialize(capabilities={"sampling": {}})
        (connection,) = server.connections
        assert isinstance(connection, ServerConnection)
        for reason in ["timeout", None]:
            await peer.send(
                {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ask"}}
            )
            nested = await peer.recv()
            assert connection.session.cancel(nested["id"], reason)
            told = await peer.recv()
            expected: dict[str, Any] = {"requestId": nested["id"]}
            if reason is not None:
                expected["reason"] = reason
            assert told == {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": expected,
            }
            answer = await peer.recv()
            assert answer["result"]["content"][0]["text"] == "gave up"
        assert outcomes == ["nested cancelled: timeout", "nested cancelled: None"]


@pytest.mark.invariant(3)
async def test_messages_carry_the_request_they_belong_to(autojump_clock: Any) -> None:
    """Streamable HTTP routes by these hints: a nested request and its cancel travel on the
    parent's stream, and the transport hears of a suppressed response."""
    outcomes: list[str] = []
    server = nested_server(outcomes)
    ours, theirs = memory_transport_pair()
    recording = Recording(theirs)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.serve_transport, recording)
        peer = WirePeer(ours)
        await peer.initialize(capabilities={"sampling": {}})
        await peer.send(
            {"jsonrpc": "2.0", "id": "parent", "method": "tools/call", "params": {"name": "ask"}}
        )
        nested = await peer.recv()
        await peer.cancel("parent", "stop")
        await peer.recv()
        assert await peer.recv_within(5) is None
        ours.close()
    assert [(m.get("method", "response"), related) for m, related in recording.sent] == [
        ("response", "init"),
        ("sampling/createMessage", "parent"),
        ("notifications/cancelled", "parent"),
    ]
    assert recording.sent[2][0]["params"] == {"requestId": nested["id"]}
    assert recording.suppressed == ["parent"]


class Minimal(BaseTransport):
    """The least a transport needs: send and receive; the base class gives the rest."""

    def __init__(self, inner: MemoryTransport) -> None:
        self.inner = inner

    async def send(
        self, data: bytes, *, related_request_id: RequestId | None = None, final: bool = False
    ) -> None:
        await self.inner.send(data)

    async def receive(self) -> bytes:
        return await self.inner.receive()


async def test_a_minimal_transport_is_enough(autojump_clock: Any) -> None:
    server = Server("m")
    started = trio.Event()

    @server.tool()
    async def wait() -> str:
        started.set()
        await trio.sleep_forever()
        return ""  # pragma: no cover

    @server.tool()
    async def hello() -> str:
        return "hello"

    ours, theirs = memory_transport_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.serve_transport, Minimal(theirs))
        async with open_client(Minimal(ours)) as client:
            assert (await client.call_tool("hello")).content[0].text == "hello"  # type: ignore[union-attr]
            with trio.move_on_after(1):
                await client.call_tool("wait")
            assert started.is_set()
            assert (await client.call_tool("hello")).content[0].text == "hello"  # type: ignore[union-attr]
        ours.close()
        nursery.cancel_scope.cancel()


class NoDispatch:
    def route(self, request: Request, session: Engine) -> Any:
        raise AssertionError("unexpected request")  # pragma: no cover

    def on_notification(
        self, notification: Notification, session: Engine, principal: Any = None
    ) -> None:
        pass  # pragma: no cover


async def test_a_task_in_the_connections_nursery_ends_with_the_connection() -> None:
    ours, theirs = memory_transport_pair()
    session = Engine(ours, NoDispatch())
    with pytest.raises(RuntimeError, match="not running"):
        session.nursery  # noqa: B018
    ended = trio.Event()

    async def belongs_to_the_connection() -> None:
        try:
            await trio.sleep_forever()
        finally:
            ended.set()

    async with trio.open_nursery() as nursery:
        await nursery.start(session.run)
        session.nursery.start_soon(belongs_to_the_connection)
        await trio.testing.wait_all_tasks_blocked()
        assert not ended.is_set()
        theirs.close()  # the peer goes away: the connection ends, and its task with it
        await session.closed.wait()
    assert ended.is_set()


@pytest.mark.invariant(7)
async def test_concurrent_writers_never_interleave_lines() -> None:
    wire_out = trio.testing.MemorySendStream()
    lines = LineTransport(trio.testing.MemoryReceiveStream(), wire_out)
    session = Engine(lines, NoDispatch())
    async with trio.open_nursery() as nursery:
        await nursery.start(session.run)

        async def chatter(task: int) -> None:
            for n in range(10):
                await session.notify(
                    "notifications/message", {"task": task, "n": n, "pad": "x" * 999}
                )

        async with trio.open_nursery() as writers:
            for task in range(8):
                writers.start_soon(chatter, task)
        await session.flush(5)
        nursery.cancel_scope.cancel()
    frames = [orjson.loads(line) for line in wire_out.get_data_nowait().splitlines()]
    assert len(frames) == 80
    for task in range(8):
        assert [f["params"]["n"] for f in frames if f["params"]["task"] == task] == list(range(10))


async def test_an_enveloped_request_on_a_legacy_session_is_refused() -> None:
    server = Server("era")

    @server.tool()
    async def hello() -> str:
        return "hi"

    async with wire_to(server, initialize=False) as peer:
        counter = await peer.initialize(version="2026-07-28")
        assert counter["result"]["protocolVersion"] == "2025-11-25"
        refused = await peer.request(
            2,
            "tools/list",
            {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                }
            },
        )
        assert refused["error"]["code"] == -32600
        assert "legacy lifecycle" in refused["error"]["message"]
        # Other _meta (a progress token) does not make a request modern.
        plain = await peer.request(3, "tools/list", {"_meta": {"progressToken": "t"}})
        assert [t["name"] for t in plain["result"]["tools"]] == ["hello"]


async def test_a_result_that_cannot_be_serialized_is_a_generic_internal_error(
    autojump_clock: Any,
) -> None:
    """JSON has no 70-bit integers (orjson refuses them): the request, alone or in a batch,
    gets -32603, and the connection goes on."""
    server = Server("huge")

    @server.method("custom/huge")
    async def huge(params: dict[str, Any]) -> dict[str, Any]:
        return {"value": 2**70}

    async with wire_to(server) as peer:
        alone = await peer.request(1, "custom/huge")
        assert alone == {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {"code": -32603, "message": "Internal error"},
        }
        await peer.send(
            [
                {"jsonrpc": "2.0", "id": 2, "method": "custom/huge"},
                {"jsonrpc": "2.0", "id": 3, "method": "ping"},
            ]
        )
        batch = sorted(await peer.recv(), key=lambda r: r["id"])
        assert batch[0]["error"]["code"] == -32603
        assert batch[1] == {"jsonrpc": "2.0", "id": 3, "result": {}}
        assert (await peer.request(4, "ping"))["result"] == {}


class Writers(BaseTransport):
    """Records which task wrote each message; a write blocks while ``hold`` is unset."""

    def __init__(self, inner: MemoryTransport) -> None:
        self.inner = inner
        self.writes: list[tuple[Any, trio.lowlevel.Task]] = []
        self.hold = trio.Event()
        self.hold.set()

    async def send(
        self, data: bytes, *, related_request_id: RequestId | None = None, final: bool = False
    ) -> None:
        self.writes.append((orjson.loads(data).get("id"), trio.lowlevel.current_task()))
        await self.hold.wait()

    async def receive(self) -> bytes:
        return await self.inner.receive()


class Answers:
    """``echo`` answers at once, and records the task it ran in."""

    def __init__(self) -> None:
        self.tasks: dict[Any, trio.lowlevel.Task] = {}

    def route(self, request: Request, session: Engine) -> Any:
        from trio_mcp.lowlevel import Route

        async def echo(record: Any) -> dict[str, Any]:
            self.tasks[record.id] = trio.lowlevel.current_task()
            return {}

        return Route(echo)

    def on_notification(
        self, notification: Notification, session: Engine, principal: Any = None
    ) -> None:
        pass  # pragma: no cover


async def test_a_response_is_written_by_its_own_task_while_the_writer_is_idle() -> None:
    """No hop through the writer when nothing is queued; behind what the writer is writing,
    a response waits its turn, in order."""
    ours, theirs = memory_transport_pair()
    transport, dispatcher = Writers(ours), Answers()
    session = Engine(transport, dispatcher)
    async with trio.open_nursery() as nursery:
        await nursery.start(session.run)
        await theirs.send(orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "echo"}))
        await trio.testing.wait_all_tasks_blocked()
        ((rid, writer),) = transport.writes
        assert rid == 1 and writer is dispatcher.tasks[1]

        transport.hold = trio.Event()  # the writer is now stuck writing a notification
        session.notify_nowait("notifications/message", {"n": 1})
        await trio.testing.wait_all_tasks_blocked()
        await theirs.send(orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "echo"}))
        await trio.testing.wait_all_tasks_blocked()
        assert [rid for rid, _ in transport.writes] == [1, None]  # 2 waits behind it
        transport.hold.set()
        await trio.testing.wait_all_tasks_blocked()
        assert [rid for rid, _ in transport.writes] == [1, None, 2]
        assert transport.writes[2][1] is transport.writes[1][1]  # the writer wrote it
        assert transport.writes[2][1] is not dispatcher.tasks[2]
        nursery.cancel_scope.cancel()


async def test_a_drain_waits_for_a_response_written_in_place() -> None:
    """The input ends while a request's task writes its own response: the session ends only
    once that write is done, and nothing cuts it."""
    ours, theirs = memory_transport_pair()
    transport, dispatcher = Writers(ours), Answers()
    transport.hold = trio.Event()
    session = Engine(transport, dispatcher, drain_timeout=5)
    ended = trio.Event()

    async def run() -> None:
        await session.run()
        ended.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await theirs.send(orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "echo"}))
        await trio.testing.wait_all_tasks_blocked()
        assert [rid for rid, _ in transport.writes] == [1]  # being written, in place
        theirs.close()
        await trio.testing.wait_all_tasks_blocked()
        assert not ended.is_set()  # the drain waits for the write
        transport.hold.set()
        with trio.fail_after(5):
            await ended.wait()
    assert [rid for rid, _ in transport.writes] == [1]


async def test_a_settled_request_keeps_its_cancel_and_refuses_another() -> None:
    # Whether it settled, and why it was cancelled, share one slot of the record.
    cancelled = InFlight(Request(1, "tools/call", None), None)
    assert not (cancelled.settled or cancelled.finished or cancelled.cancel_requested)
    assert cancelled.cancel("why", by="peer")
    assert cancelled.finished and not cancelled.settled
    cancelled.settled = True
    assert cancelled.settled and cancelled.cancel_requested
    assert (cancelled.cancel_reason, cancelled.cancelled_by) == ("why", "peer")
    assert not cancelled.cancel("again")
    assert cancelled.cancel_reason == "why"

    answered = InFlight(Request(2, "tools/call", None), None)
    answered.settled = True
    assert answered.finished and not answered.cancel_requested
    assert not answered.cancel("late")
    assert not answered.cancel_requested and answered.cancel_reason is None


async def test_a_record_holds_its_request_s_fields_and_gives_the_request_as_it_stands() -> None:
    # Held by every request in flight: its id, method and params, not the parsed Request too.
    parsed = Request(7, "tools/call", {"name": "echo"})
    record = InFlight(parsed, None)
    assert (record.id, record.method, record.params) == (7, "tools/call", {"name": "echo"})
    assert record.request == parsed
    assert not any(isinstance(held, Request) for held in gc.get_referents(record))
    # A middleware or a mount hands the handler other params; the record reads them back.
    record.request = Request(7, "tools/call", {"name": "other"})
    assert record.params == {"name": "other"} and record.request.params == {"name": "other"}
    assert InFlight(Request("a", "ping", None), None).params == {}


async def test_each_request_has_a_local_state_of_its_own_made_on_first_use() -> None:
    first = InFlight(Request(1, "tools/call", None), None)
    second = InFlight(Request(2, "tools/call", None), None)
    second.settled = True
    first.local_state["k"] = 1
    assert second.local_state == {}
    assert first.local_state == {"k": 1}
    assert second.settled and not second.cancel_requested
    second.local_state["x"] = 2
    third = InFlight(Request(3, "tools/call", None), None)
    third.settled = True  # the shared record of a settled request is never changed
    assert third.local_state == {}


class Finishing:
    """Routes whose handler gives a raw value that ``returned`` makes the result, answered
    with ``on_cancel``'s result when cancelled."""

    def route(self, request: Request, session: Engine) -> Any:
        async def raw(record: Any) -> int:
            await trio.lowlevel.checkpoint()
            return 41

        return Route(
            raw,
            returned=lambda record, value: {"value": value + 1},
            on_cancel=lambda record: {"cancelled": record.cancel_reason},
        )

    def on_notification(
        self, notification: Notification, session: Engine, principal: Any = None
    ) -> None:
        pass  # pragma: no cover


async def test_a_request_cancelled_before_its_task_starts_keeps_its_route() -> None:
    # The route and the cancel share a slot of the record: a cancel that comes before the
    # task starts must leave the task its route (its handler, its hooks, its on_cancel).
    ours, theirs = memory_transport_pair()
    session = Engine(ours, Finishing())
    async with trio.open_nursery() as nursery:
        await nursery.start(session.run)
        session.feed(Request(1, "raw", None))
        assert session.cancel_incoming(1, "early")
        session.feed(Request(2, "raw", None))
        answers = {}
        for _ in range(2):
            message = orjson.loads(await theirs.receive())
            answers[message["id"]] = message["result"]
        assert answers == {1: {"cancelled": "early"}, 2: {"value": 42}}
        nursery.cancel_scope.cancel()


class Batches(Writers):
    """Records each ``send_many`` as the list of what it was handed."""

    def __init__(self, inner: MemoryTransport) -> None:
        super().__init__(inner)
        self.batches: list[list[OutgoingMessage]] = []

    async def send_many(self, messages: Iterable[OutgoingMessage]) -> None:
        self.batches.append(list(messages))


async def test_answers_and_notifications_queued_together_reach_the_transport_in_one_batch() -> None:
    # What was queued while the writer wrote goes out in order, each message with its hints;
    # a request of ours among them is taken as it is handed over.
    ours, theirs = memory_transport_pair()
    transport, dispatcher = Batches(ours), Answers()
    session = Engine(transport, dispatcher)
    async with trio.open_nursery() as nursery:
        await nursery.start(session.run)
        transport.hold = trio.Event()
        session.notify_nowait("notifications/message", {"n": 0})  # the writer is stuck on it
        await trio.testing.wait_all_tasks_blocked()
        for rid in (1, 2):
            await theirs.send(orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": "echo"}))
        await trio.testing.wait_all_tasks_blocked()
        session.notify_nowait("notifications/message", {"n": 1}, related_request_id=2)
        transport.hold.set()
        await trio.testing.wait_all_tasks_blocked()
        ((answers),) = transport.batches
        assert [
            (orjson.loads(m.data).get("id"), m.related_request_id, m.final) for m in answers
        ] == [
            (1, 1, True),
            (2, 2, True),
            (None, 2, False),
        ]
        assert all(type(m) is OutgoingMessage for m in answers)

        transport.hold = trio.Event()
        session.notify_nowait("notifications/message", {"n": 2})
        await trio.testing.wait_all_tasks_blocked()
        session.notify_nowait("notifications/message", {"n": 3})
        nursery.start_soon(session.request, "ping")
        await trio.testing.wait_all_tasks_blocked()
        transport.hold.set()
        await trio.testing.wait_all_tasks_blocked()
        mixed = transport.batches[1]
        assert [orjson.loads(m.data).get("method") for m in mixed] == [
            "notifications/message",
            "ping",
        ]
        nursery.cancel_scope.cancel()
