"""Request id rules: seed-behaviors (c) id-bearing notifications and (d) duplicate ids."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from trio_mcp import Context, Server
from trio_mcp._demo import demo_server

from .._http import Served, parse_sse, serving
from .._raw_stdio import RawChild, raw_child
from ..wire import wire_to


def gated_server(calls: list[str]) -> tuple[Server, trio.Event, trio.Event]:
    server = Server("ids")
    started, release = trio.Event(), trio.Event()

    @server.tool()
    async def slow(ctx: Context) -> str:
        started.set()
        await release.wait()
        return f"done {ctx.request_id!r}"

    @server.method("notifications/custom")
    async def custom(params: dict[str, Any]) -> None:
        calls.append(f"custom {params}")

    @server.method("notifications/progress-like")
    async def other(params: dict[str, Any]) -> None:
        calls.append("other")

    return server, started, release


@pytest.mark.invariant(5)
async def test_notification_methods_with_an_id_get_method_not_found(autojump_clock: Any) -> None:
    calls: list[str] = []
    server, _, _ = gated_server(calls)
    async with wire_to(server) as peer:
        for rid, method, params in [
            (1001, "notifications/cancelled", None),
            (1002, "notifications/initialized", None),
            (1003, "notifications/progress", {"progressToken": "tok", "progress": 1}),
            (3001, "notifications/custom", {"a": 1}),
        ]:
            response = await peer.request(rid, method, params)
            assert response == {
                "jsonrpc": "2.0",
                "id": rid,
                "error": {"code": -32601, "message": "Method not found", "data": method},
            }
        assert calls == []
        # Without an id: no response, and the custom handler runs.
        await peer.notify("notifications/initialized")
        await peer.notify("notifications/custom", {"a": 2})
        assert await peer.recv_within(5) is None
        assert calls == ["custom {'a': 2}"]


async def test_a_batch_answers_only_its_requests(autojump_clock: Any) -> None:
    async with wire_to(Server("b")) as peer:
        await peer.send(
            [
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": "x"},
                },
                {"jsonrpc": "2.0", "id": 2001, "method": "notifications/cancelled"},
                {"jsonrpc": "2.0", "id": 2002, "method": "ping"},
            ]
        )
        answer = await peer.recv()
        assert sorted(answer, key=lambda r: r["id"]) == [
            {
                "jsonrpc": "2.0",
                "id": 2001,
                "error": {
                    "code": -32601,
                    "message": "Method not found",
                    "data": "notifications/cancelled",
                },
            },
            {"jsonrpc": "2.0", "id": 2002, "result": {}},
        ]
        # An all-notification batch gets no reply at all.
        await peer.send([{"jsonrpc": "2.0", "method": "notifications/initialized"}])
        assert await peer.recv_within(5) is None


async def test_batch_members_run_concurrently_and_reply_together(autojump_clock: Any) -> None:
    calls: list[str] = []
    server, started, release = gated_server(calls)
    async with wire_to(server) as peer:
        await peer.send(
            [
                {"jsonrpc": "2.0", "id": "a", "method": "tools/call", "params": {"name": "slow"}},
                {"jsonrpc": "2.0", "id": "b", "method": "ping"},
                {"jsonrpc": "2.0", "id": "c", "method": "nope"},
                {"jsonrpc": "1.0", "id": "d", "method": "ping"},
            ]
        )
        await started.wait()
        assert await peer.recv_within(5) is None  # the batch waits for its slow member
        release.set()
        answer = await peer.recv()
        by_id = {r["id"]: r for r in answer}
        assert set(by_id) == {"a", "b", "c", "d"}
        assert by_id["a"]["result"]["content"][0]["text"] == "done 'a'"
        assert by_id["c"]["error"]["code"] == -32601
        assert by_id["d"]["error"]["code"] == -32600


@pytest.mark.invariant(1)
async def test_a_duplicate_in_flight_id_is_refused_and_the_first_completes(
    autojump_clock: Any,
) -> None:
    calls: list[str] = []
    server, started, release = gated_server(calls)
    async with wire_to(server) as peer:
        call = {"jsonrpc": "2.0", "id": "req-1", "method": "tools/call", "params": {"name": "slow"}}
        await peer.send(call)
        await started.wait()
        await peer.send(call)
        assert await peer.recv() == {
            "jsonrpc": "2.0",
            "id": "req-1",
            "error": {
                "code": -32600,
                "message": "Invalid Request",
                "data": 'Invalid Request: request id "req-1" is already in flight',
            },
        }
        # Integer ids are quoted bare, and 1 and "1" are different ids.
        await peer.send(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "slow"}}
        )
        await peer.send({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        refused = await peer.recv()
        assert refused["error"]["data"] == "Invalid Request: request id 1 is already in flight"
        assert await peer.request("1", "ping") == {"jsonrpc": "2.0", "id": "1", "result": {}}
        release.set()
        done = [await peer.recv(), await peer.recv()]
        assert {d["id"]: d["result"]["content"][0]["text"] for d in done} == {
            "req-1": "done 'req-1'",
            1: "done 1",
        }


@pytest.mark.invariant(1)
async def test_a_refused_duplicate_leaves_the_first_requests_entry(autojump_clock: Any) -> None:
    """The refusal touches nothing of the first request: a cancel still reaches it, and its id
    is free again once it has ended."""
    calls: list[str] = []
    server, started, _ = gated_server(calls)
    async with wire_to(server) as peer:
        await peer.send(
            {"jsonrpc": "2.0", "id": "req-1", "method": "tools/call", "params": {"name": "slow"}}
        )
        await started.wait()
        assert (await peer.request("req-1", "ping"))["error"]["code"] == -32600
        await peer.cancel("req-1")
        assert await peer.recv_within(5) is None
        assert await peer.request("req-1", "ping") == {
            "jsonrpc": "2.0",
            "id": "req-1",
            "result": {},
        }


@pytest.mark.invariant(2)
@pytest.mark.invariant(4)
async def test_a_refused_duplicate_initialize_leaves_the_registration(
    autojump_clock: Any,
) -> None:
    calls: list[str] = []
    server, started, release = gated_server(calls)
    async with wire_to(server) as peer:
        await peer.send(
            {"jsonrpc": "2.0", "id": "req-1", "method": "tools/call", "params": {"name": "slow"}}
        )
        await started.wait()
        again = await peer.request(
            "req-1",
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "c", "version": "1"},
            },
        )
        assert again["error"]["code"] == -32600
        assert "already initialized" in again["error"]["message"]
        # req-1 is still registered: a duplicate is still refused, and it still completes.
        await peer.send({"jsonrpc": "2.0", "id": "req-1", "method": "ping"})
        assert (await peer.recv())["error"]["code"] == -32600
        release.set()
        assert (await peer.recv())["result"]["content"][0]["text"] == "done 'req-1'"


async def test_sequential_reuse_of_an_id_is_fine() -> None:
    server = Server("reuse")

    @server.tool()
    async def hello() -> str:
        return "done"

    async with wire_to(server) as peer:
        for _ in range(2):
            response = await peer.request("req-1", "tools/call", {"name": "hello"})
            assert response["result"]["content"] == [{"type": "text", "text": "done"}]


async def test_unknown_methods_are_reported_before_the_duplicate_check(
    autojump_clock: Any,
) -> None:
    calls: list[str] = []
    server, started, release = gated_server(calls)
    async with wire_to(server) as peer:
        await peer.send(
            {"jsonrpc": "2.0", "id": "x", "method": "tools/call", "params": {"name": "slow"}}
        )
        await started.wait()
        assert (await peer.request("x", "no/such"))["error"]["code"] == -32601
        release.set()
        assert "result" in await peer.recv()


async def test_malformed_frames_get_clear_errors_and_lose_nothing(autojump_clock: Any) -> None:
    calls: list[str] = []
    server, started, release = gated_server(calls)
    async with wire_to(server) as peer:
        await peer.send(
            {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "slow"}}
        )
        await started.wait()
        await peer.send_raw(b'{"jsonrpc": "2.0", "id": 6, "method": ')
        assert await peer.recv() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32700, "message": "Parse error: Invalid JSON"},
        }
        await peer.send({"jsonrpc": "2.0", "id": 7, "method": "ping", "params": [1]})
        invalid = await peer.recv()
        assert invalid["id"] == 7 and invalid["error"]["code"] == -32600
        await peer.send({"jsonrpc": "2.0", "id": 8.5, "method": "ping"})
        assert (await peer.recv())["id"] is None
        release.set()
        assert (await peer.recv())["id"] == 5


# -- ids of any size, through the real paths ------------------------------------------------------

#: Past 64 bits both ways, and far past. Compared as exact text: orjson would read them as floats.
WIDE = [2**64, -(2**63) - 1, 10**100]


def exact(line: bytes | str) -> Any:
    """A frame decoded with exact integers."""
    return json.loads(line)


def wide_call(rid: int, name: str, arguments: dict[str, Any]) -> bytes:
    params = {"name": name, "arguments": arguments}
    body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
    return json.dumps(body).encode() + b"\n"


async def accepted_again(child: RawChild, rid: int) -> dict[str, Any]:
    """Reuse ``rid`` until it is free: a request still in flight under it is refused every time,
    so a cancel that missed it fails here (bounded), and one that hit it frees it."""
    for _ in range(50):
        await child.send_raw(wide_call(rid, "echo", {"text": "again"}))
        answer: dict[str, Any] = exact(await child.line() or b"null")
        if "result" in answer:
            return answer
        assert answer["error"]["code"] == -32600, answer
        await trio.sleep(0.05)
    raise AssertionError(f"request id {rid} stayed in flight after its cancel")


@pytest.mark.parametrize("rid", WIDE)
async def test_an_id_outside_64_bits_is_echoed_exactly_over_stdio(rid: int) -> None:
    async with raw_child() as child:
        await child.initialize()
        await child.send_raw(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % rid)
        assert await child.line() == b'{"jsonrpc":"2.0","id":%d,"result":{}}' % rid
        # A call under it, cancelled by a notification naming it: suppressed, and freed.
        await child.send_raw(wide_call(rid, "sleep", {"seconds": 3600}))
        await child.send_raw(wide_call(rid, "sleep", {"seconds": 1}))
        duplicate = exact(await child.line() or b"null")
        assert duplicate["id"] == rid and duplicate["error"]["code"] == -32600
        assert str(rid) in duplicate["error"]["data"]
        params = {"requestId": rid}
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
        await child.send_raw(json.dumps(cancel).encode() + b"\n")
        again = await accepted_again(child, rid)
        assert again["id"] == rid and again["result"]["content"][0]["text"] == "again"
        # The cancelled call was never answered: the next line answers the next request.
        after = await child.request("after", "ping")
        assert after == {"jsonrpc": "2.0", "id": "after", "result": {}}
    assert b"Traceback" not in child.stderr, child.stderr.decode(errors="replace")


async def sse_messages(served: Served, body: bytes, session: str) -> list[Any]:
    response = await served.post(body, session)
    assert response.status_code == 200, response.text
    if response.headers["content-type"] == "application/json":
        return [exact(response.text)]
    return [exact(e.data) for e in parse_sse(response.text) if e.data]


@pytest.mark.parametrize("rid", WIDE)
async def test_an_id_outside_64_bits_is_echoed_exactly_over_http(rid: int) -> None:
    async with serving(demo_server()) as served:
        session = await served.initialize()
        ping = b'{"jsonrpc":"2.0","id":%d,"method":"ping"}' % rid
        assert await sse_messages(served, ping, session) == [
            {"jsonrpc": "2.0", "id": rid, "result": {}}
        ]
        echoed = await sse_messages(served, wide_call(rid, "echo", {"text": "wide"}), session)
        assert echoed[-1]["id"] == rid and echoed[-1]["result"]["content"][0]["text"] == "wide"
        # A refusal the HTTP layer writes itself carries it exactly too (never a 500).
        again = b'{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{}}' % rid
        refused = await served.post(again, session)
        assert refused.status_code == 400
        assert exact(refused.text)["id"] == rid
        # A modern (2026-07-28) request, served in its own POST.
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        modern = json.dumps(
            {"jsonrpc": "2.0", "id": rid, "method": "tools/list", "params": {"_meta": meta}}
        )
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/list",
        }
        answer = await served.post(modern.encode(), headers=headers)
        assert answer.status_code == 200, answer.text
        assert exact(answer.text)["id"] == rid
