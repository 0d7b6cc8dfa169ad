"""A cancel at every point of a request's life leaves exactly one outcome and no leaked task."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
import pytest
import trio
import trio.testing

from trio_mcp import Context, Server, open_client
from trio_mcp.protocol._jsonrpc import RequestId
from trio_mcp.server import ServerConnection
from trio_mcp.transports import BaseTransport, MemoryTransport, memory_transport_pair

from ..wire import WirePeer


class GatedTransport(BaseTransport):
    """Wraps a transport; while ``open`` is False, writes wait at the gate."""

    def __init__(self, inner: MemoryTransport) -> None:
        self.inner = inner
        self.open = True
        self._changed = trio.Event()
        self.waiting = 0
        self.blocked = trio.Event()

    def set_open(self, value: bool) -> None:
        self.open = value
        self._changed.set()
        self._changed = trio.Event()

    async def send(
        self, data: bytes, *, related_request_id: RequestId | None = None, final: bool = False
    ) -> None:
        while not self.open:
            self.waiting += 1
            self.blocked.set()
            await self._changed.wait()
            self.waiting -= 1
        await self.inner.send(data, related_request_id=related_request_id)

    async def receive(self) -> bytes:
        return await self.inner.receive()

    def close(self) -> None:
        self.inner.close()


def race_server(log: list[str]) -> Server:
    server = Server("race")

    @server.tool()
    async def instant() -> str:
        log.append("instant ran")
        return "instant"

    @server.tool()
    async def parked(ctx: Context) -> str:
        log.append("parked started")
        try:
            await trio.sleep_forever()
        finally:
            log.append(f"parked cancelled={ctx.cancelled}")
        return "never"  # pragma: no cover

    @server.tool()
    async def nested(ctx: Context) -> str:
        log.append("nested started")
        await ctx.list_roots()
        return "never"  # pragma: no cover

    return server


@asynccontextmanager
async def gated_wire(server: Server) -> AsyncIterator[tuple[WirePeer, GatedTransport, Any]]:
    ours, theirs = memory_transport_pair()
    gate = GatedTransport(theirs)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.serve_transport, gate)
        peer = WirePeer(ours)
        await peer.initialize(capabilities={"roots": {}})
        (connection,) = server.connections
        yield peer, gate, connection
        ours.close()
        nursery.cancel_scope.cancel()


async def assert_clean(connection: ServerConnection) -> None:
    # A response may be written by its request's own task, which then still has to end: the
    # peer can read the response a scheduling round before that.
    await trio.testing.wait_all_tasks_blocked()
    session = connection.session
    assert session._in_flight == {}
    assert session._pending == {}
    # Only the writer remains (and the ordered-notification worker, once a job started it).
    assert session._nursery is not None
    assert len(session._nursery.child_tasks) == (1 if session._ordered_send is None else 2)


def call(rid: Any, name: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name}}


def cancel(rid: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}}


@pytest.mark.invariant(1)
async def test_cancel_before_dispatch(autojump_clock: Any) -> None:
    log: list[str] = []
    async with gated_wire(race_server(log)) as (peer, _gate, connection):
        # Both frames are read before the handler task first runs.
        await peer.send_raw(orjson.dumps(call(1, "parked")))
        await peer.send_raw(orjson.dumps(cancel(1)))
        assert await peer.recv_within(5) is None
        assert log in ([], ["parked started", "parked cancelled=True"])
        await assert_clean(connection)


async def test_cancel_during_the_handler(autojump_clock: Any) -> None:
    log: list[str] = []
    async with gated_wire(race_server(log)) as (peer, _gate, connection):
        await peer.send(call(1, "parked"))
        await trio.sleep(1)
        await peer.send(cancel(1))
        assert await peer.recv_within(5) is None
        assert log == ["parked started", "parked cancelled=True"]
        await assert_clean(connection)


@pytest.mark.invariant(6)
async def test_cancel_during_a_nested_request(autojump_clock: Any) -> None:
    log: list[str] = []
    async with gated_wire(race_server(log)) as (peer, _gate, connection):
        await peer.send(call(1, "nested"))
        nested = await peer.recv()
        assert nested["method"] == "roots/list"
        await peer.send(cancel(1))
        assert await peer.recv() == {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": nested["id"]},
        }
        assert await peer.recv_within(5) is None
        await assert_clean(connection)


@pytest.mark.invariant(3)
async def test_a_handler_that_finishes_after_the_cancel_is_still_suppressed(
    autojump_clock: Any,
) -> None:
    """The cancel came first, so it decides: a result returned after it (from a shielded
    section, with no checkpoint left) is not sent."""
    server = Server("shielded")
    entered, release = trio.Event(), trio.Event()

    @server.tool()
    async def commit() -> str:
        with trio.CancelScope(shield=True):
            entered.set()
            await release.wait()
        return "committed"

    async with gated_wire(server) as (peer, _gate, connection):
        await peer.send(call(1, "commit"))
        await entered.wait()
        await peer.send(cancel(1))
        await trio.sleep(1)
        release.set()
        assert await peer.recv_within(5) is None
        assert (await peer.request(2, "ping"))["result"] == {}
        await assert_clean(connection)


@pytest.mark.invariant(3)
async def test_cancel_after_the_result_is_decided_but_before_it_is_written(
    autojump_clock: Any,
) -> None:
    log: list[str] = []
    async with gated_wire(race_server(log)) as (peer, gate, connection):
        gate.set_open(False)
        await peer.send(call(1, "instant"))
        await gate.blocked.wait()  # the response is decided and waits at the gate
        await peer.send(cancel(1))
        await trio.sleep(1)
        gate.set_open(True)
        response = await peer.recv()
        assert response["id"] == 1 and response["result"]["content"][0]["text"] == "instant"
        assert await peer.recv_within(5) is None
        assert log == ["instant ran"]
        await assert_clean(connection)


@pytest.mark.invariant(3)
async def test_cancel_after_the_response_is_written(autojump_clock: Any) -> None:
    log: list[str] = []
    async with gated_wire(race_server(log)) as (peer, _gate, connection):
        response = await peer.request(1, "tools/call", {"name": "instant"})
        assert "result" in response
        await peer.send(cancel(1))
        assert await peer.recv_within(5) is None
        await assert_clean(connection)


@pytest.mark.invariant(6)
@pytest.mark.invariant(7)
async def test_client_cancel_before_and_after_the_write(autojump_clock: Any) -> None:
    """Request A is being written (held at the gate) and B is queued behind it. Cancelling both
    callers: B never reaches the wire; A is followed by its cancel."""
    ours, theirs = memory_transport_pair()
    gate = GatedTransport(ours)
    peer = WirePeer(theirs)
    async with trio.open_nursery() as nursery:

        async def handshake() -> None:
            init = await peer.recv()
            await peer.send(
                {
                    "jsonrpc": "2.0",
                    "id": init["id"],
                    "result": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "serverInfo": {"name": "p", "version": "1"},
                    },
                }
            )
            await peer.recv()

        nursery.start_soon(handshake)
        async with open_client(gate) as client:
            await trio.sleep(1)
            gate.set_open(False)
            scope_a, scope_b = trio.CancelScope(), trio.CancelScope()

            async def ask(scope: trio.CancelScope, rid: str) -> None:
                with scope:
                    await client.ping(request_id=rid)

            async with trio.open_nursery() as calls:
                calls.start_soon(ask, scope_a, "A")
                await trio.sleep(1)
                calls.start_soon(ask, scope_b, "B")
                await trio.sleep(1)
                assert gate.waiting == 1
                scope_b.cancel()
                scope_a.cancel()
            gate.set_open(True)
            frames = [await peer.recv(), await peer.recv()]
            assert frames == [
                {"jsonrpc": "2.0", "id": "A", "method": "ping"},
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": "A"},
                },
            ]
            assert await peer.recv_within(5) is None
            assert client.session._pending == {}
