"""Client-side behaviour against a scripted raw peer: seed-behaviors (b) and (e) 35-38."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_mcp
from trio_mcp import (
    Client,
    ConnectionClosed,
    CreateMessageResult,
    InitializeError,
    InvalidAnswer,
    MCPError,
    RequestCancelled,
    RequestTimeout,
    Server,
    TextContent,
    open_client,
)
from trio_mcp.transports import MemoryTransport, Transport, memory_transport_pair

from ..wire import WirePeer

INIT_RESULT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"tools": {}},
    "serverInfo": {"name": "fake", "version": "9"},
}


@asynccontextmanager
async def scripted(
    result: dict[str, Any] | None = None, **client_options: Any
) -> AsyncIterator[tuple[Client, WirePeer, list[Any]]]:
    """A client connected to a raw peer that answered the handshake; the handshake frames too."""
    ours, theirs = memory_transport_pair()
    peer = WirePeer(theirs)
    handshake: list[Any] = []
    done = trio.Event()

    async def answer() -> None:
        init = await peer.recv()
        handshake.append(init)
        await peer.send({"jsonrpc": "2.0", "id": init["id"], "result": result or INIT_RESULT})
        handshake.append(await peer.recv())
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer)
        async with open_client(ours, **client_options) as client:
            await done.wait()
            yield client, peer, handshake


async def test_handshake_offers_the_latest_handshake_version() -> None:
    async with scripted() as (client, _peer, handshake):
        init, initialized = handshake
        assert init["method"] == "initialize"
        assert init["params"] == {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "trio-mcp", "version": trio_mcp.__version__},
        }
        assert initialized == {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert client.protocol_version == "2025-11-25"
        assert client.server_info.name == "fake"


async def test_an_explicit_handshake_version_is_offered() -> None:
    result = {**INIT_RESULT, "protocolVersion": "2025-03-26"}
    async with scripted(result, protocol_version="2025-03-26") as (client, _peer, handshake):
        assert handshake[0]["params"]["protocolVersion"] == "2025-03-26"
        assert client.protocol_version == "2025-03-26"


async def test_a_counter_offer_is_adopted() -> None:
    result = {**INIT_RESULT, "protocolVersion": "2025-06-18"}
    async with scripted(result) as (client, _peer, handshake):
        assert handshake[0]["params"]["protocolVersion"] == "2025-11-25"
        assert client.protocol_version == "2025-06-18"


async def test_a_modern_version_is_refused_before_anything_starts() -> None:
    server = Server("s")
    served: list[object] = []
    original = server.serve_transport

    async def spy(*args: Any, **kwargs: Any) -> None:
        served.append(args)
        await original(*args, **kwargs)

    server.serve_transport = spy  # type: ignore[method-assign]
    with pytest.raises(ValueError, match="is a modern protocol version and cannot be pinned"):
        async with open_client(server, protocol_version="2026-07-28", mode="legacy"):
            pass  # pragma: no cover
    assert served == []
    with pytest.raises(ValueError, match="protocol_version must be one of"):
        async with open_client(server, protocol_version="1999-01-01"):
            pass  # pragma: no cover


@pytest.mark.parametrize("offered", ["2026-07-28", "2099-01-01"])
@pytest.mark.invariant(9)
async def test_an_unsupported_initialize_result_fails_the_connection(offered: str) -> None:
    result = {**INIT_RESULT, "protocolVersion": offered}
    ours, theirs = memory_transport_pair()
    peer = WirePeer(theirs)
    entered = False
    async with trio.open_nursery() as nursery:

        async def answer() -> None:
            init = await peer.recv()
            await peer.send({"jsonrpc": "2.0", "id": init["id"], "result": result})

        nursery.start_soon(answer)
        with pytest.raises(InitializeError, match=f'unsupported protocol version "{offered}"'):
            async with open_client(ours):
                entered = True  # pragma: no cover
    assert not entered
    # No notifications/initialized was sent, and the client closed the connection.
    with pytest.raises(trio.EndOfChannel):
        await peer.recv()


async def test_call_without_cancel_returns_the_result() -> None:
    async with scripted() as (client, peer, _):
        async with trio.open_nursery() as nursery:
            results: list[Any] = []

            async def call() -> None:
                results.append(await client.call_tool("noop", {}))

            nursery.start_soon(call)
            request = await peer.recv()
            assert request["method"] == "tools/call"
            assert request["params"] == {"name": "noop", "arguments": {}}
            await peer.send(
                {
                    "jsonrpc": "2.0",
                    "id": request["id"],
                    "result": {"content": [{"type": "text", "text": "ok"}]},
                }
            )
        assert results[0].content == [TextContent("ok")]


async def answered(peer: WirePeer, client: Client, answer: bytes) -> Exception:
    """A tool call the peer answers with ``answer`` (``ID`` stands for the call's id): what the
    call raised, once the connection answered a ping after it."""
    failed: list[Exception] = []

    async def call() -> None:
        try:
            await client.call_tool("t", {})
        except Exception as exc:
            failed.append(exc)

    with trio.fail_after(10):  # a hang guard: a call left waiting for another answer fails
        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            request = await peer.recv()
            await peer.send_raw(answer.replace(b"ID", str(request["id"]).encode()))

    async def ping() -> None:
        await client.ping()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ping)
        # Nothing went back for the bad answer: the next frame is the ping.
        pinged = await peer.recv()
        assert pinged["method"] == "ping", pinged
        await peer.send({"jsonrpc": "2.0", "id": pinged["id"], "result": {}})
    (raised,) = failed
    return raised


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (b'{"jsonrpc":"2.0","id":ID,"result":5}', 'the "result" member must be an object'),
        (b'{"jsonrpc":"2.0","id":ID,"error":{"code":"x"}}', "an integer code"),
        (b'{"jsonrpc":"2.0","id":ID}', "not a request, notification or response"),
        (
            b'{"jsonrpc":"2.0","id":ID,"result":{"content":[{"type":"text","text":"\\ud800"}]}}',
            "lone surrogate",
        ),
    ],
)
async def test_an_answer_that_is_not_a_response_fails_its_call_at_once(
    answer: bytes, why: str
) -> None:
    """The call fails with InvalidAnswer (an MCPError, as every error the client raises on
    purpose) instead of waiting for an answer that will not come; the connection goes on."""
    async with scripted() as (client, peer, _):
        raised = await answered(peer, client, answer)
    assert isinstance(raised, InvalidAnswer) and isinstance(raised, MCPError), repr(raised)
    assert why in str(raised)


async def test_a_result_that_does_not_fit_names_each_field_that_does_not() -> None:
    answer = b'{"jsonrpc":"2.0","id":ID,"result":{"content":[{"type":"text"}],"isError":"no"}}'
    async with scripted() as (client, peer, _):
        raised = await answered(peer, client, answer)
    assert isinstance(raised, InvalidAnswer) and isinstance(raised, ValueError), repr(raised)
    assert str(raised) == (
        "invalid CallToolResult: content[0].text: required field is missing; "
        "isError: expected a boolean, got a string ('no')"
    )


@pytest.mark.invariant(6)
async def test_a_pre_cancelled_caller_sends_nothing(autojump_clock: Any) -> None:
    async with scripted() as (client, peer, _):
        with trio.CancelScope() as scope:
            scope.cancel()
            await client.call_tool("noop", {})
        assert scope.cancelled_caught
        assert await peer.recv_within(5) is None


@pytest.mark.invariant(6)
async def test_cancelling_the_caller_cancels_on_the_wire(autojump_clock: Any) -> None:
    async with scripted() as (client, peer, _):
        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def call() -> None:
                with scope:
                    await client.call_tool("slow", {})

            nursery.start_soon(call)
            request = await peer.recv()
            scope.cancel()
            cancel = await peer.recv()
        # The cancel follows its request, and carries no reason when none was given.
        assert cancel == {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request["id"]},
        }
        assert await peer.recv_within(5) is None


async def test_cancel_by_id_gives_the_caller_the_reason(autojump_clock: Any) -> None:
    async with scripted() as (client, peer, _):
        rid = client.new_request_id()
        errors: list[RequestCancelled] = []
        async with trio.open_nursery() as nursery:

            async def call() -> None:
                try:
                    await client.call_tool("slow", {}, request_id=rid)
                except RequestCancelled as exc:
                    errors.append(exc)

            nursery.start_soon(call)
            request = await peer.recv()
            assert request["id"] == rid
            assert client.cancel(rid, "user abort")
            cancel = await peer.recv()
        assert errors[0].reason == "user abort"
        assert cancel["params"] == {"requestId": rid, "reason": "user abort"}
        # A second cancel, or one after completion, sends nothing.
        assert not client.cancel(rid, "again")
        assert await peer.recv_within(5) is None


@pytest.mark.invariant(6)
async def test_a_late_cancel_sends_nothing(autojump_clock: Any) -> None:
    async with scripted() as (client, peer, _):
        rid = client.new_request_id()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: client.ping(request_id=rid))
            request = await peer.recv()
            await peer.send({"jsonrpc": "2.0", "id": request["id"], "result": {}})
        assert not client.cancel(rid, "late")
        assert await peer.recv_within(5) is None


@pytest.mark.invariant(6)
async def test_a_response_racing_the_callers_cancel_sends_no_cancel(autojump_clock: Any) -> None:
    """The response is fed to the engine, then the caller's scope is cancelled in the same
    tick: whatever the caller sees, nothing follows on the wire."""
    async with scripted() as (client, peer, _):
        outcomes: list[str] = []
        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def call() -> None:
                with scope:
                    await client.ping()
                    outcomes.append("result")
                if scope.cancelled_caught:
                    outcomes.append("cancelled")

            nursery.start_soon(call)
            request = await peer.recv()
            from trio_mcp.protocol._jsonrpc import Response

            client.session.feed(Response(request["id"], {}))
            scope.cancel()
        assert len(outcomes) == 1
        assert await peer.recv_within(5) is None


async def test_paginated_helpers_pass_the_cancel_to_every_page(autojump_clock: Any) -> None:
    async with scripted() as (client, peer, _):
        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()
            got: list[Any] = []

            async def walk() -> None:
                with scope:
                    got.append(await client.list_tools())

            nursery.start_soon(walk)
            first = await peer.recv()
            await peer.send(
                {
                    "jsonrpc": "2.0",
                    "id": first["id"],
                    "result": {"tools": [{"name": "a", "inputSchema": {}}], "nextCursor": "c1"},
                }
            )
            second = await peer.recv()
            assert second["params"] == {"cursor": "c1"}
            scope.cancel()
            cancel = await peer.recv()
        assert got == []
        assert cancel["params"] == {"requestId": second["id"]}


async def test_inactivity_timeout_cancels_and_reports_both_limits(autojump_clock: Any) -> None:
    async with scripted() as (client, peer, _):
        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            errors: list[RequestTimeout] = []

            async def call() -> None:
                try:
                    await client.call_tool("slow", {}, timeout=5, max_total=60)
                except RequestTimeout as exc:
                    errors.append(exc)

            nursery.start_soon(call)
            request = await peer.recv()
            # A timeout always asks for progress, so progress can keep the call alive.
            assert request["params"]["_meta"] == {"progressToken": request["id"]}
            cancel = await peer.recv()
        assert trio.current_time() - start == pytest.approx(5)
        assert errors[0].timeout == 5 and errors[0].max_total == 60
        assert "5s" in str(errors[0]) and "60s" in str(errors[0])
        assert cancel["params"] == {"requestId": request["id"], "reason": "Request timed out"}


async def test_progress_resets_the_inactivity_timeout(autojump_clock: Any) -> None:
    async with scripted() as (client, peer, _):
        seen: list[tuple[float, float | None, str | None]] = []
        results: list[Any] = []
        async with trio.open_nursery() as nursery:

            async def call() -> None:
                results.append(
                    await client.call_tool(
                        "slow",
                        {},
                        timeout=5,
                        on_progress=lambda p, t, m: seen.append((p, t, m)),
                    )
                )

            nursery.start_soon(call)
            request = await peer.recv()
            token = request["params"]["_meta"]["progressToken"]
            for step in range(1, 4):
                await trio.sleep(4)
                await peer.notify(
                    "notifications/progress",
                    {"progressToken": token, "progress": step, "total": 3, "message": f"s{step}"},
                )
            await trio.sleep(4)
            await peer.send({"jsonrpc": "2.0", "id": request["id"], "result": {"content": []}})
        assert seen == [(1, 3, "s1"), (2, 3, "s2"), (3, 3, "s3")]
        assert results[0].content == []


async def test_max_total_bounds_a_call_despite_progress(autojump_clock: Any) -> None:
    async with scripted() as (client, peer, _):
        start = trio.current_time()
        errors: list[RequestTimeout] = []

        async def call() -> None:
            try:
                await client.call_tool("slow", {}, timeout=5, max_total=8)
            except RequestTimeout as exc:
                errors.append(exc)
                timed_out.set()

        timed_out = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            request = await peer.recv()
            token = request["params"]["_meta"]["progressToken"]
            for step in range(5):
                await trio.sleep(3)
                if timed_out.is_set():
                    break
                await peer.notify(
                    "notifications/progress", {"progressToken": token, "progress": step}
                )
            await timed_out.wait()
        assert len(errors) == 1 and errors[0].max_total == 8
        assert trio.current_time() - start == pytest.approx(9)


async def test_progress_for_another_token_is_ignored(autojump_clock: Any) -> None:
    async with scripted() as (client, peer, _):
        seen: list[float] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: client.call_tool("x", {}, on_progress=lambda p, t, m: seen.append(p))
            )
            request = await peer.recv()
            await peer.notify("notifications/progress", {"progressToken": "other", "progress": 1})
            await peer.notify(
                "notifications/progress",
                {"progressToken": request["params"]["_meta"]["progressToken"], "progress": 2},
            )
            await trio.sleep(1)
            await peer.send({"jsonrpc": "2.0", "id": request["id"], "result": {"content": []}})
        assert seen == [2]


async def test_a_dead_peer_fails_every_pending_call_at_once(autojump_clock: Any) -> None:
    async with scripted() as (client, peer, _):
        errors: list[BaseException] = []
        async with trio.open_nursery() as nursery:

            async def call(name: str) -> None:
                try:
                    await client.call_tool(name, {})
                except ConnectionClosed as exc:
                    errors.append(exc)

            nursery.start_soon(call, "a")
            nursery.start_soon(call, "b")
            await peer.recv()
            await peer.recv()
            start = trio.current_time()
            peer.transport.close()
        assert len(errors) == 2
        assert trio.current_time() == start
        with pytest.raises(ConnectionClosed):
            await client.ping()


async def test_server_requests_run_callbacks_that_the_server_can_cancel(
    autojump_clock: Any,
) -> None:
    started = trio.Event()
    outcome: list[str] = []

    async def on_sample(params: Any) -> CreateMessageResult:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            outcome.append("cancelled")
        raise AssertionError  # pragma: no cover

    async with scripted(on_sample=on_sample) as (_client, peer, handshake):
        assert handshake[0]["params"]["capabilities"] == {"sampling": {}}
        await peer.send(
            {
                "jsonrpc": "2.0",
                "id": "s1",
                "method": "sampling/createMessage",
                "params": {"messages": [], "maxTokens": 3},
            }
        )
        await started.wait()
        await peer.cancel("s1", "no longer needed")
        assert await peer.recv_within(5) is None
        assert outcome == ["cancelled"]


async def test_unknown_server_requests_get_method_not_found() -> None:
    async with scripted() as (_client, peer, _):
        response = await peer.request(9, "sampling/createMessage", {"messages": []})
        assert response["error"]["code"] == -32601
        assert response["error"]["data"] == "sampling/createMessage"
        assert (await peer.request(10, "ping")) == {"jsonrpc": "2.0", "id": 10, "result": {}}


@pytest.mark.invariant(9)
async def test_a_single_error_in_the_body_is_not_wrapped_in_a_group() -> None:
    with pytest.raises(KeyError):
        async with open_client(Server("s")):
            raise KeyError("mine")


async def test_request_ids_in_use_are_refused() -> None:
    async with scripted() as (client, peer, _), trio.open_nursery() as nursery:
        nursery.start_soon(lambda: client.ping(request_id="fixed"))
        await peer.recv()
        with pytest.raises(ValueError, match='"fixed" is already in use'):
            await client.ping(request_id="fixed")
        await peer.send({"jsonrpc": "2.0", "id": "fixed", "result": {}})


# -- what open_client connects to ---------------------------------------------------------------


class Relay:
    """Not a Server: only the one method open_client needs to serve a target in memory."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.served = 0

    async def serve_transport(self, transport: Transport, /) -> None:
        self.served += 1
        await self.server.serve_transport(transport)


async def test_an_in_memory_target_is_anything_that_serves_a_transport() -> None:
    server = Server("relayed")

    @server.tool()
    def hello() -> str:
        return "hello"

    relay = Relay(server)
    async with open_client(relay) as client:
        assert client.server_info.name == "relayed"
        assert (await client.call_tool("hello")).content[0].text == "hello"  # type: ignore[union-attr]
    assert relay.served == 1


async def test_a_program_alone_is_a_command(tmp_path: Path) -> None:
    program = tmp_path / "program-server"
    program.write_text(
        f"#!{sys.executable}\n"
        "import trio\n"
        "from trio_mcp import Server\n"
        "trio.run(Server('program').serve_stdio)\n"
    )
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    with trio.fail_after(60):
        async with open_client(os.fspath(program)) as client:
            assert client.server_info.name == "program"


class SendsAndReceives:
    """The old duck-typed transport: no longer enough, the contract is explicit."""

    def __init__(self, inner: MemoryTransport) -> None:
        self.inner = inner

    async def send(self, data: bytes) -> None:
        await self.inner.send(data)  # pragma: no cover

    async def receive(self) -> bytes:
        return await self.inner.receive()  # pragma: no cover


async def test_what_is_neither_servable_nor_a_command_nor_a_transport_is_refused() -> None:
    ours, _theirs = memory_transport_pair()
    for target in [42, SendsAndReceives(ours), ["python", 3]]:
        with pytest.raises(TypeError, match=r"cannot connect to .*BaseTransport"):
            async with open_client(target):  # type: ignore[arg-type]
                pass  # pragma: no cover


async def test_a_misspelt_option_of_a_typed_call_is_an_error() -> None:
    # mypy refuses the call as well: without an error to ignore, the ignore below is reported.
    async with open_client(Server("s")) as client:
        with pytest.raises(TypeError, match="timout"):
            await client.call_tool("x", timout=5)  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="max_totl"):
            await client.list_tools(max_totl=5)  # type: ignore[call-arg]
