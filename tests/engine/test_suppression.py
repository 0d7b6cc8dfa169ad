"""A cancel that arrived first decides: a handler that ignores it (its work shielded) and
returns a normal result afterwards gets no response, on every transport.

These fail if the engine's request task (``_run_request``) stops suppressing the outcome of a
request whose cancel arrived before it settled (the "a cancel that arrived first suppresses"
branch).
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
import trio

from .._http import call_body, cancel_body, serving
from .._raw_stdio import SERVERS, raw_child
from ..servers.shielded_server import shielded_server
from ..wire import wire_to

GUARD = 20


def call(rid: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "commit"}}


def cancel(rid: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}}


async def until(predicate: Any) -> None:
    with trio.fail_after(GUARD):
        while not predicate():  # noqa: ASYNC110 - what is polled has no event to wait on
            await trio.sleep(0.01)


@pytest.mark.invariant(3)
async def test_a_handler_that_ignores_its_cancel_gets_no_response_in_memory() -> None:
    server = shielded_server()
    async with wire_to(server) as peer:
        await peer.send(call(1))
        await peer.send(cancel(1))
        # The handler returns once it has seen the cancel; the next frame answers the ping.
        assert await peer.request(2, "ping") == {"jsonrpc": "2.0", "id": 2, "result": {}}
        (connection,) = server.connections
        await until(lambda: connection.session.idle)
        assert await peer.request(3, "ping") == {"jsonrpc": "2.0", "id": 3, "result": {}}


@pytest.mark.invariant(3)
async def test_a_handler_that_ignores_its_cancel_gets_no_response_over_stdio() -> None:
    async with raw_child([sys.executable, str(SERVERS / "shielded_server.py")]) as child:
        await child.initialize()
        await child.send(call(1))
        await until(lambda: b"entered" in child.stderr)
        await child.send(cancel(1))
        await until(lambda: b"returning" in child.stderr)
        # The commit returned before this ping was read: had its result been written, it
        # would be the next line.
        assert await child.request(2, "ping") == {"jsonrpc": "2.0", "id": 2, "result": {}}
        await child.close_input()
        assert await child.line() is None
    assert child.process.returncode == 0


@pytest.mark.invariant(3)
async def test_a_handler_that_ignores_its_cancel_gets_no_response_over_http() -> None:
    async with serving(shielded_server()) as served:
        session = await served.initialize()
        async with served.stream_post(call_body(1, "commit"), session) as reader:
            response = await served.post(cancel_body(1), session)
            assert response.status_code == 202
            rest = await reader.rest()
        assert [e.json() for e in rest if e.data] == []
        assert (await served.call(session, {"jsonrpc": "2.0", "id": 2, "method": "ping"}))[
            "result"
        ] == {}
