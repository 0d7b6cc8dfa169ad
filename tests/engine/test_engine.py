"""Engine details: outbound cancels by id, routing hints for transports, minimal transports,
whole-line writes, and the legacy era lock."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import trio
import trio.testing

from trio_mcp import Context, RequestCancelled, Server, open_client
from trio_mcp.lowlevel import Session
from trio_mcp.protocol._jsonrpc import Notification, Request, RequestId
from trio_mcp.server import ServerConnection
from trio_mcp.transports import BaseTransport, LineTransport, MemoryTransport, memory_transport_pair

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
    def route(self, request: Request, session: Session) -> Any:
        raise AssertionError("unexpected request")  # pragma: no cover

    def on_notification(self, notification: Notification, session: Session) -> None:
        pass  # pragma: no cover


@pytest.mark.invariant(7)
async def test_concurrent_writers_never_interleave_lines() -> None:
    wire_out = trio.testing.MemorySendStream()
    lines = LineTransport(trio.testing.MemoryReceiveStream(), wire_out)
    session = Session(lines, NoDispatch())
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
