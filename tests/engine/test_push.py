"""The engine's push entry: a session that is never read, fed message by message (HTTP's shape)."""

from __future__ import annotations

import functools
from typing import Any

import orjson
import pytest
import trio

from trio_mcp.lowlevel import BaseSender, Engine, InFlight, Route
from trio_mcp.protocol._jsonrpc import JSONObject, Notification, Request, RequestId


class Pushed(BaseSender):
    """A transport with no ``receive``: it only records what the engine sends."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.wrote = trio.Event()

    async def send(
        self, data: bytes, *, related_request_id: RequestId | None = None, final: bool = False
    ) -> None:
        self.sent.append(orjson.loads(data))
        self.wrote.set()

    async def next_sent(self) -> dict[str, Any]:
        with trio.fail_after(5):
            while not self.sent:
                self.wrote = trio.Event()
                await self.wrote.wait()
        return self.sent.pop(0)


class Parking:
    """``echo`` answers at once; ``park`` runs until it is cancelled."""

    def __init__(self) -> None:
        self.parked = trio.Event()
        self.cancelled: list[str] = []

    def route(self, request: Request, session: Engine) -> Route:
        return Route(self._echo if request.method == "echo" else self._park)

    def on_notification(
        self, notification: Notification, session: Engine, principal: Any = None
    ) -> None:
        pass

    async def _echo(self, record: InFlight) -> JSONObject:
        await trio.lowlevel.checkpoint()
        return dict(record.params)

    async def _park(self, record: InFlight) -> JSONObject:
        self.parked.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.cancelled.append(str(record.id))
            raise
        raise AssertionError("unreachable")  # pragma: no cover


async def test_a_pushed_session_answers_what_it_is_fed() -> None:
    transport, dispatcher = Pushed(), Parking()
    session = Engine(transport, dispatcher)
    async with trio.open_nursery() as nursery:
        await nursery.start(functools.partial(session.run, pull=False))
        assert session.idle
        session.feed(Request(1, "echo", {"x": 1}))
        assert not session.idle  # registered synchronously, before any checkpoint
        assert await transport.next_sent() == {"jsonrpc": "2.0", "id": 1, "result": {"x": 1}}
        assert session.idle
        session.feed_eof()
    assert session.is_closed


async def test_feed_eof_cancels_what_is_in_flight_and_ends_the_run() -> None:
    transport, dispatcher = Pushed(), Parking()
    session = Engine(transport, dispatcher, drain_timeout=5)
    async with trio.open_nursery() as nursery:
        await nursery.start(functools.partial(session.run, pull=False))
        session.feed(Request("p", "park", None))
        await dispatcher.parked.wait()
        assert not session.idle and session.in_flight("p") is not None
        with trio.fail_after(5):
            session.feed_eof()
            await session.closed.wait()
    # The run ended by itself: nothing cancelled the nursery from outside.
    assert dispatcher.cancelled == ["p"]
    assert session.idle and transport.sent == []


async def test_an_invalid_frame_fed_is_answered_at_once() -> None:
    transport = Pushed()
    session = Engine(transport, Parking())
    async with trio.open_nursery() as nursery:
        await nursery.start(functools.partial(session.run, pull=False))
        session.feed(Request(7, "notifications/initialized", None))
        answer = await transport.next_sent()
        assert answer["id"] == 7 and answer["error"]["code"] == -32601
        assert session.idle
        session.feed_eof()


async def test_a_transport_with_no_receive_cannot_be_pulled() -> None:
    session = Engine(Pushed(), Parking())
    with pytest.raises(BaseExceptionGroup) as raised:
        await session.run()
    assert raised.group_contains(TypeError, match="run its session with pull=False")


class Delivered(BaseSender):
    """A transport whose writes never wait: the engine hands it each message in the task that
    decided it (``deliver``), and never calls ``send``."""

    def __init__(self) -> None:
        self.log: list[tuple[Any, ...]] = []

    async def send(
        self, data: bytes, *, related_request_id: RequestId | None = None, final: bool = False
    ) -> None:
        raise AssertionError("a delivering transport is never sent to")

    def deliver(self, data: bytes, related_request_id: RequestId | None, final: bool) -> None:
        self.log.append((orjson.loads(data), related_request_id, final))

    def request_suppressed(self, request_id: RequestId) -> None:
        self.log.append(("suppressed", request_id))


async def test_a_delivering_transport_gets_each_message_in_the_deciding_task() -> None:
    transport = Delivered()
    session = Engine(transport, Parking())
    async with trio.open_nursery() as nursery:
        await nursery.start(functools.partial(session.run, pull=False))
        session.notify_nowait("notifications/message", {"n": 1}, related_request_id=3)
        # No writer in between: it is there before any checkpoint.
        assert transport.log == [
            ({"jsonrpc": "2.0", "method": "notifications/message", "params": {"n": 1}}, 3, False)
        ]
        session.feed(Request(7, "notifications/initialized", None))
        assert transport.log[-1][0]["error"]["code"] == -32601
        session.feed_eof()


async def test_serve_one_runs_the_request_in_the_callers_task_and_closes() -> None:
    transport, dispatcher = Delivered(), Parking()
    session = Engine(transport, dispatcher)
    caller = trio.lowlevel.current_task()
    seen: list[trio.lowlevel.Task] = []

    class Here(Parking):
        async def _echo(self, record: InFlight) -> JSONObject:
            seen.append(trio.lowlevel.current_task())
            return await super()._echo(record)

    session.dispatcher = Here()
    async with trio.open_nursery() as nursery:
        await session.serve_one(Request(1, "echo", {"x": 1}), nursery)
    assert seen == [caller]
    assert transport.log == [({"jsonrpc": "2.0", "id": 1, "result": {"x": 1}}, 1, True)]
    assert session.is_closed and session.idle


async def test_serve_one_cancelled_by_id_is_suppressed_in_order() -> None:
    transport, dispatcher = Delivered(), Parking()
    session = Engine(transport, dispatcher)
    async with trio.open_nursery() as nursery:

        async def cancel_when_parked() -> None:
            await dispatcher.parked.wait()
            assert session.cancel_incoming("p", "bye")

        nursery.start_soon(cancel_when_parked)
        await session.serve_one(Request("p", "park", None), nursery)
    assert dispatcher.cancelled == ["p"]
    assert transport.log == [("suppressed", "p")]


async def test_serve_one_refuses_a_notification_method_with_an_id() -> None:
    transport = Delivered()
    session = Engine(transport, Parking())
    async with trio.open_nursery() as nursery:
        await session.serve_one(Request(9, "notifications/cancelled", None), nursery)
    ((answer, related, final),) = transport.log
    assert answer["error"]["code"] == -32601 and related == 9 and final


async def test_serve_one_needs_a_delivering_transport() -> None:
    session = Engine(Pushed(), Parking())
    async with trio.open_nursery() as nursery:
        with pytest.raises(TypeError, match="a transport that delivers"):
            await session.serve_one(Request(1, "echo", None), nursery)
