"""The transport contract: what every transport provides, and the defaults of the base class."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import trio
import trio.testing

from trio_mcp.http._http_session import HttpSession
from trio_mcp.lowlevel import (
    BaseSender,
    BaseTransport,
    Engine,
    MemoryTransport,
    OutgoingMessage,
    Route,
    Sender,
    Transport,
)
from trio_mcp.protocol import Notification, Request, RequestId
from trio_mcp.transports import LineTransport, ProcessTransport
from trio_mcp.transports._http_client import StreamableHttpTransport


class Recorder(BaseTransport):
    """Only what a transport must write; records each send with its hints."""

    def __init__(self) -> None:
        self.sent: list[tuple[bytes, RequestId | None, bool]] = []
        self.gate: trio.Event | None = None
        self.closed = trio.Event()

    async def send(
        self, data: bytes, *, related_request_id: RequestId | None = None, final: bool = False
    ) -> None:
        self.sent.append((data, related_request_id, final))
        if self.gate is not None:
            await self.gate.wait()
        await trio.lowlevel.checkpoint()

    async def receive(self) -> bytes:
        await self.closed.wait()
        raise trio.EndOfChannel


class NoRequests:
    """A dispatcher for an engine that is only ever the one asking."""

    def route(self, request: Request, session: Engine) -> Route:
        raise AssertionError("no request expected")  # pragma: no cover

    def on_notification(
        self, notification: Notification, session: Engine, principal: Any = None
    ) -> None:
        pass  # pragma: no cover


def test_send_and_receive_are_required() -> None:
    class OnlySends(BaseTransport):
        async def send(
            self, data: bytes, *, related_request_id: RequestId | None = None, final: bool = False
        ) -> None:
            pass  # pragma: no cover

    with pytest.raises(TypeError, match="receive"):
        OnlySends()  # type: ignore[abstract]


@pytest.mark.parametrize(
    "cls", [MemoryTransport, LineTransport, ProcessTransport, StreamableHttpTransport]
)
def test_every_transport_the_engine_reads_conforms(cls: type[Any]) -> None:
    assert issubclass(cls, BaseTransport)
    assert issubclass(cls, Transport)


def test_the_http_servers_transport_is_a_sender_the_engine_never_reads() -> None:
    assert issubclass(HttpSession, BaseSender)
    assert issubclass(HttpSession, Sender)
    assert not issubclass(HttpSession, Transport)


async def test_send_many_sends_each_message_in_turn_with_its_hints() -> None:
    recorder = Recorder()
    await recorder.send_many(
        [
            OutgoingMessage(b"a"),
            OutgoingMessage(b"b", related_request_id=7),
            OutgoingMessage(b"c", related_request_id="r", final=True),
        ]
    )
    assert recorder.sent == [(b"a", None, False), (b"b", 7, False), (b"c", "r", True)]


async def test_send_many_takes_a_message_only_when_the_one_before_is_written() -> None:
    recorder = Recorder()
    taken: list[tuple[int, int]] = []

    def messages() -> Iterator[OutgoingMessage]:
        for data in [b"a", b"b", b"c"]:
            taken.append((len(taken), len(recorder.sent)))
            yield OutgoingMessage(data)

    await recorder.send_many(messages())
    assert taken == [(0, 0), (1, 1), (2, 2)]


async def test_send_many_of_nothing_writes_nothing() -> None:
    recorder = Recorder()
    await recorder.send_many([])
    assert recorder.sent == []
    stream = trio.testing.MemorySendStream()
    lines = LineTransport(trio.testing.memory_stream_one_way_pair()[1], stream)
    await lines.send_many(iter([]))
    with pytest.raises(trio.WouldBlock):
        stream.get_data_nowait()


async def test_a_line_transport_writes_a_batch_at_once() -> None:
    stream = trio.testing.MemorySendStream()
    lines = LineTransport(trio.testing.memory_stream_one_way_pair()[1], stream)
    await lines.send_many([OutgoingMessage(b"1"), OutgoingMessage(b"2", related_request_id=1)])
    assert stream.get_data_nowait() == b"1\n2\n"


def test_request_suppressed_does_nothing_by_default() -> None:
    recorder = Recorder()
    recorder.request_suppressed(1)
    assert recorder.sent == []


async def test_the_engine_hands_a_queued_batch_over_with_every_hint() -> None:
    recorder = Recorder()
    session = Engine(recorder, NoRequests())
    async with trio.open_nursery() as nursery:
        await nursery.start(session.run)
        # Queued with no checkpoint in between: the writer finds them together.
        session.notify_nowait("notifications/a")
        session.notify_nowait("notifications/b", related_request_id=3)
        session.notify_nowait("notifications/c", related_request_id="x")
        await trio.testing.wait_all_tasks_blocked()
        recorder.closed.set()
    assert [(orjson.loads(data)["method"], related) for data, related, _ in recorder.sent] == [
        ("notifications/a", None),
        ("notifications/b", 3),
        ("notifications/c", "x"),
    ]


async def test_a_request_withdrawn_behind_a_slow_write_never_reaches_the_wire() -> None:
    """Invariant 6 through the default send_many: the request was queued in the same batch as
    a message whose write blocks; its caller gives up meanwhile, so neither the request nor a
    cancel for it is written."""
    recorder = Recorder()
    recorder.gate = trio.Event()
    session = Engine(recorder, NoRequests())
    async with trio.open_nursery() as nursery:
        await nursery.start(session.run)
        asking = trio.CancelScope()

        async def ask() -> None:
            with asking:
                # Both queued with no checkpoint between: the writer takes them as one batch.
                session.notify_nowait("notifications/first")
                await session.request("tools/list")

        nursery.start_soon(ask)
        await trio.testing.wait_all_tasks_blocked()
        assert len(recorder.sent) == 1  # the writer is stuck in the first write
        asking.cancel()
        await trio.testing.wait_all_tasks_blocked()
        recorder.gate.set()
        await trio.testing.wait_all_tasks_blocked()
        recorder.closed.set()
    assert [orjson.loads(data)["method"] for data, _, _ in recorder.sent] == ["notifications/first"]
