"""Server-side cancellation: seed-behaviors (a), through the in-memory transport."""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio
import trio.testing

from trio_mcp import (
    Completion,
    Context,
    RequestCancelled,
    RequestRecord,
    Server,
)

from ..wire import wire_to


def slow_server(seen: list[tuple[str, bool, str | None]], started: trio.Event) -> Server:
    """Every kind of handler, each waiting forever until cancelled and recording what it saw."""
    server = Server("slow")

    async def park(kind: str, ctx: Context) -> None:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            seen.append((kind, ctx.cancelled, ctx.cancel_reason))

    @server.tool()
    async def wait(ctx: Context) -> str:
        await park("tool", ctx)
        return "never"

    @server.resource("test://slow")
    async def slow_resource(ctx: Context) -> str:
        await park("resource", ctx)
        return "never"

    @server.prompt()
    async def slow_prompt(ctx: Context) -> str:
        await park("prompt", ctx)
        return "never"

    @server.completion()
    async def complete(ref: Any, argument: Any, context: Any, ctx: Context) -> Completion:
        await park("completion", ctx)
        return Completion(values=[])

    @server.method("custom/slow")
    async def custom(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        await park("custom", ctx)
        return {}

    return server


@pytest.mark.invariant(1)
async def test_cancel_stops_the_handler_and_suppresses_the_response(autojump_clock: Any) -> None:
    seen: list[tuple[str, bool, str | None]] = []
    started = trio.Event()
    async with wire_to(slow_server(seen, started)) as peer:
        await peer.send(
            {"jsonrpc": "2.0", "id": 42, "method": "tools/call", "params": {"name": "wait"}}
        )
        await started.wait()
        await peer.cancel(42, "user aborted")
        assert await peer.recv_within(10) is None
        assert seen == [("tool", True, "user aborted")]
        # The connection still serves, and the cancel itself got no answer.
        assert await peer.request(1, "ping") == {"jsonrpc": "2.0", "id": 1, "result": {}}


@pytest.mark.invariant(1)
async def test_every_handler_kind_observes_the_cancel(autojump_clock: Any) -> None:
    requests = [
        (201, "resources/read", {"uri": "test://slow"}, "resource"),
        (
            202,
            "completion/complete",
            {
                "ref": {"type": "ref/prompt", "name": "slow_prompt"},
                "argument": {"name": "a", "value": ""},
            },
            "completion",
        ),
        (203, "prompts/get", {"name": "slow_prompt"}, "prompt"),
        (204, "custom/slow", {}, "custom"),
    ]
    for rid, method, params, kind in requests:
        seen: list[tuple[str, bool, str | None]] = []
        started = trio.Event()
        async with wire_to(slow_server(seen, started)) as peer:
            await peer.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
            await started.wait()
            await peer.cancel(rid, f"stop {kind}")
            assert await peer.recv_within(10) is None, method
            assert seen == [(kind, True, f"stop {kind}")]


async def test_raise_if_cancelled_in_a_thread_ends_the_request() -> None:
    server = Server("threads")
    started, done = trio.Event(), trio.Event()
    outcome: list[str] = []

    @server.tool()
    def busy(ctx: Context) -> str:
        trio.from_thread.run_sync(started.set)
        try:
            for _ in range(2000):
                ctx.raise_if_cancelled()
                time.sleep(0.005)
        except RequestCancelled as exc:
            outcome.append(f"cancelled: {exc.reason}")
            trio.from_thread.run_sync(done.set)
            raise
        return "finished"

    with trio.fail_after(20):
        async with wire_to(server) as peer:
            await peer.send(
                {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "busy"}}
            )
            await started.wait()
            await peer.cancel(7, "abort")
            # The next frame is the ping's answer: nothing was sent for request 7.
            assert await peer.request(8, "ping") == {"jsonrpc": "2.0", "id": 8, "result": {}}
            await done.wait()
            assert outcome == ["cancelled: abort"]
            assert await peer.recv_within(0.2) is None


async def test_check_cancelled_from_a_thread() -> None:
    server = Server("threads")
    started, done = trio.Event(), trio.Event()

    @server.tool()
    def spin() -> str:
        trio.from_thread.run_sync(started.set)
        try:
            while True:
                trio.from_thread.check_cancelled()
                time.sleep(0.005)
        except trio.Cancelled:
            trio.from_thread.run_sync(done.set)
            raise

    with trio.fail_after(20):
        async with wire_to(server) as peer:
            await peer.send(
                {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "spin"}}
            )
            await started.wait()
            await peer.cancel(1)
            assert await peer.request(2, "ping") == {"jsonrpc": "2.0", "id": 2, "result": {}}
            await done.wait()
            assert await peer.recv_within(0.2) is None


async def test_request_cancelled_raised_by_a_handler_suppresses(autojump_clock: Any) -> None:
    server = Server("s")

    @server.tool()
    async def gives_up() -> str:
        raise RequestCancelled("nested-xyz", "parent aborted")

    async with wire_to(server) as peer:
        await peer.send(
            {"jsonrpc": "2.0", "id": 123, "method": "tools/call", "params": {"name": "gives_up"}}
        )
        assert await peer.recv_within(10) is None


@pytest.mark.invariant(3)
async def test_unknown_duplicate_and_late_cancels_are_ignored(autojump_clock: Any) -> None:
    seen: list[tuple[str, bool, str | None]] = []
    started = trio.Event()
    server = slow_server(seen, started)

    @server.tool()
    async def quick() -> str:
        return "done"

    async with wire_to(server) as peer:
        await peer.cancel("does-not-exist", "nothing")
        assert await peer.recv_within(5) is None
        # Duplicate: the first reason is kept, nothing is answered.
        await peer.send(
            {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "wait"}}
        )
        await started.wait()
        await peer.cancel(5, "first")
        await peer.cancel(5, "second")
        assert await peer.recv_within(5) is None
        assert seen == [("tool", True, "first")]
        # Late: the request was answered, so the cancel changes nothing.
        response = await peer.request(61, "tools/call", {"name": "quick"})
        assert response["result"]["content"] == [{"type": "text", "text": "done"}]
        await peer.cancel(61, "late")
        assert await peer.recv_within(5) is None
        assert (await peer.request(62, "ping"))["result"] == {}


async def test_malformed_cancel_params_are_ignored(autojump_clock: Any) -> None:
    async with wire_to(Server("s")) as peer:
        await peer.notify("notifications/cancelled", {"requestId": None})
        await peer.notify("notifications/cancelled", {"requestId": [1]})
        await peer.notify("notifications/cancelled")
        assert await peer.recv_within(5) is None
        assert (await peer.request(1, "ping"))["result"] == {}


@pytest.mark.invariant(4)
async def test_initialize_is_never_registered(autojump_clock: Any) -> None:
    seen: list[tuple[str, bool, str | None]] = []
    started = trio.Event()
    async with wire_to(slow_server(seen, started), initialize=False) as peer:
        await peer.send(
            {
                "jsonrpc": "2.0",
                "id": "init-1",
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "c", "version": "1"},
                },
            }
        )
        await peer.cancel("init-1", "try")
        response = await peer.recv()
        assert response["id"] == "init-1" and "result" in response
        # Its id was never registered, so a request may use it at once.
        await peer.send(
            {"jsonrpc": "2.0", "id": "init-1", "method": "tools/call", "params": {"name": "wait"}}
        )
        await started.wait()
        await peer.cancel("init-1", "now")
        assert await peer.recv_within(5) is None
        assert seen == [("tool", True, "now")]


async def test_instrumentation_records_cancellation(autojump_clock: Any) -> None:
    records: list[RequestRecord] = []
    seen: list[tuple[str, bool, str | None]] = []
    started = trio.Event()
    server = slow_server(seen, started)
    server.on_request = records.append

    @server.tool()
    async def gives_up() -> str:
        raise RequestCancelled(None, "own reason")

    async with wire_to(server) as peer:
        await peer.send(
            {"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": {"name": "wait"}}
        )
        await started.wait()
        await peer.cancel(77, "explicit reason string")
        await peer.send(
            {"jsonrpc": "2.0", "id": 78, "method": "tools/call", "params": {"name": "gives_up"}}
        )
        await peer.request(79, "tools/call", {"name": "nope"})
        assert await peer.recv_within(5) is None
    by_id = {r.request_id: r for r in records}
    assert by_id[77].cancelled and by_id[77].cancel_reason == "explicit reason string"
    assert by_id[77].method == "tools/call" and by_id[77].name == "wait"
    assert by_id[77].error_code is None
    assert by_id[78].cancelled and by_id[78].cancel_reason == "own reason"
    assert not by_id[79].cancelled and by_id[79].error_code == -32602


@pytest.mark.invariant(6)
async def test_nested_request_dies_with_its_parent(autojump_clock: Any) -> None:
    server = Server("nested")
    outcome: list[str] = []

    @server.tool()
    async def ask(ctx: Context) -> str:
        try:
            result = await ctx.sample("hello?", max_tokens=5)
        except trio.Cancelled:
            outcome.append("sample cancelled")
            raise
        return str(result.content)

    async with wire_to(server, initialize=False) as peer:
        await peer.initialize(capabilities={"sampling": {}})
        await peer.send(
            {"jsonrpc": "2.0", "id": "parent", "method": "tools/call", "params": {"name": "ask"}}
        )
        nested = await peer.recv()
        assert nested["method"] == "sampling/createMessage"
        assert nested["params"]["maxTokens"] == 5
        await peer.cancel("parent", "parent cancelled")
        told = await peer.recv()
        assert told == {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": nested["id"]},
        }
        assert await peer.recv_within(5) is None
        assert outcome == ["sample cancelled"]
        # A late answer to the dead nested request is dropped quietly.
        await peer.send(
            {
                "jsonrpc": "2.0",
                "id": nested["id"],
                "result": {"role": "assistant", "content": {"type": "text", "text": "x"}},
            }
        )
        assert await peer.recv_within(5) is None


@pytest.mark.invariant(6)
async def test_answered_nested_request_is_not_cancelled_later(autojump_clock: Any) -> None:
    server = Server("nested")
    proceed = trio.Event()

    @server.tool()
    async def ask(ctx: Context) -> str:
        result = await ctx.sample("hello?", max_tokens=5)
        proceed.set()
        await trio.sleep_forever()
        return str(result.model)

    async with wire_to(server, initialize=False) as peer:
        await peer.initialize(capabilities={"sampling": {}})
        await peer.send(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ask"}}
        )
        nested = await peer.recv()
        await peer.send(
            {
                "jsonrpc": "2.0",
                "id": nested["id"],
                "result": {
                    "role": "assistant",
                    "content": {"type": "text", "text": "ok"},
                    "model": "m",
                },
            }
        )
        await proceed.wait()
        await peer.cancel(1, "parent cancelled")
        assert await peer.recv_within(5) is None
