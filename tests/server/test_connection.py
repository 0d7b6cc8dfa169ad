"""``ServerConnection``: the per-connection limits it keeps (``subscriptions/listen``)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from trio_mcp import Server
from trio_mcp.server._connection import DEFAULT_MAX_LISTENS

from .._raw_stdio import SERVERS, RawChild, raw_child
from ..wire import WirePeer, wire_to

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"


def listen(rid: Any) -> dict[str, Any]:
    params = {"notifications": {"toolsListChanged": True}, "_meta": META}
    return {"jsonrpc": "2.0", "id": rid, "method": "subscriptions/listen", "params": params}


def cancel(rid: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}}


def call(rid: Any, name: str) -> dict[str, Any]:
    params = {"name": name, "arguments": {}, "_meta": META}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


async def acknowledged(peer: WirePeer | RawChild, rid: Any) -> None:
    await peer.send(listen(rid))
    ack = await peer.recv()
    assert ack["method"] == "notifications/subscriptions/acknowledged", ack
    assert ack["params"]["_meta"][SUBSCRIPTION] == rid


def assert_limit_refusal(refused: Any, rid: Any, limit: int) -> None:
    assert refused == {
        "jsonrpc": "2.0",
        "id": rid,
        "error": {
            "code": -32603,
            "message": f"Subscription limit reached: at most {limit} subscriptions/listen in "
            "flight per connection",
            "data": {"maxListens": limit},
        },
    }


@pytest.mark.invariant(11)
async def test_listens_beyond_the_default_limit_are_refused_until_one_ends() -> None:
    server = Server("listens")

    @server.tool()
    async def noop() -> str:
        return "ok"

    async with wire_to(server, initialize=False) as peer:
        for n in range(DEFAULT_MAX_LISTENS):
            await acknowledged(peer, f"l{n}")
        refused = await peer.request("over", "subscriptions/listen", listen("over")["params"])
        assert_limit_refusal(refused, "over", DEFAULT_MAX_LISTENS)
        (connection,) = server.connections
        assert len(connection.listeners) == DEFAULT_MAX_LISTENS
        # Ending one frees its place; the listens that stayed still deliver.
        await peer.cancel("l0")
        assert (await peer.recv())["id"] == "l0"
        await acknowledged(peer, "again")
        server.notify_list_changed("tools")
        tagged = sorted([(await peer.recv())["params"]["_meta"][SUBSCRIPTION] for _ in range(16)])
        assert tagged == sorted(["again", *(f"l{n}" for n in range(1, DEFAULT_MAX_LISTENS))])


async def test_a_batch_of_listens_cannot_overshoot_the_limit(autojump_clock: Any) -> None:
    """Five listens dispatched at once, none yet started: three get in, two are refused."""
    server = Server("listens", max_listens=3)

    @server.tool()
    async def noop() -> str:
        return "ok"

    async with wire_to(server, initialize=False) as peer:
        await peer.send([listen(n) for n in range(5)])
        acks = [await peer.recv() for _ in range(3)]
        admitted = {a["params"]["_meta"][SUBSCRIPTION] for a in acks}
        assert len(admitted) == 3
        assert await peer.recv_within(1) is None  # a batch is answered once all of it is done
        for rid in admitted:
            await peer.cancel(rid)
        batch = await peer.recv()
        by_id = {answer["id"]: answer for answer in batch}
        assert set(by_id) == set(range(5))
        for rid, answer in by_id.items():
            if rid in admitted:
                assert answer["result"]["_meta"][SUBSCRIPTION] == rid
            else:
                assert_limit_refusal(answer, rid, 3)


def test_max_listens_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_listens"):
        Server("bad", max_listens=0)


async def test_the_listen_limit_holds_on_a_real_stdio_server() -> None:
    async with raw_child([sys.executable, str(SERVERS / "listen_server.py")]) as child:
        await acknowledged(child, "a")
        await acknowledged(child, "b")
        await child.send(listen("c"))
        assert_limit_refusal(await child.recv(), "c", 2)
        # The connection goes on: the two listens still deliver, and a freed place is reused.
        await child.send(call(1, "touch"))
        frames = [await child.recv() for _ in range(3)]
        changed = [f["params"]["_meta"][SUBSCRIPTION] for f in frames if "method" in f]
        assert sorted(changed) == ["a", "b"]
        await child.send(cancel("a"))
        assert (await child.recv())["id"] == "a"
        await acknowledged(child, "c")
    assert b"Traceback" not in child.stderr, child.stderr.decode(errors="replace")
