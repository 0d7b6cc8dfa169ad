"""``@server.method(scopes=...)``: a custom request or notification needs its scopes like a tool,
checked through a real hypercorn (Streamable HTTP and HTTP+SSE) by the HTTP gate (403 with the
one complete challenge) and, where no 403 can be sent (in memory, stdio, WebSocket), by the
connection: a request is refused -32600, a notification dropped, its handler never run. Every
message a server handles over HTTP carries the principal of its own POST, batches included."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from trio_mcp import Auth, Context, Principal, Server, StaticTokenVerifier
from trio_mcp.protocol._oauth import parse_www_authenticate
from trio_mcp.transports import memory_transport_pair

from .._http import GUARD, Served, call_body, eventually, initialize_body, request_body, serving
from ..http.test_legacy_sse import sse_peer
from ..wire import WirePeer

ISSUER = "https://auth.example.com"
RESOURCE = "https://mcp.example.com/mcp"
OPS = Principal("ops", "console", frozenset({"mcp", "ops:admin"}), issuer=ISSUER)
#: The same identity by a token without ops:admin (a narrower refresh).
OPS_NARROW = Principal("ops", "console", frozenset({"mcp"}), issuer=ISSUER)
OPS_TOKEN = "ops-token-0123456789abcdef"
NARROW_TOKEN = "narrow-token-0123456789abcdef"
POKE = "notifications/ops/poke"


class Ops:
    """A protected server with a custom request and a custom notification that need
    ``ops:admin``, and what their handlers saw."""

    def __init__(self) -> None:
        verifier = StaticTokenVerifier({OPS_TOKEN: OPS, NARROW_TOKEN: OPS_NARROW})
        self.server = server = Server(
            "ops", "1.0", auth=Auth(verifier, RESOURCE, required_scopes="mcp")
        )
        self.ran: list[str] = []
        self.poked = trio.Event()

        @server.method("ops/restart", scopes="ops:admin")
        async def restart(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
            assert ctx.auth is not None
            self.ran.append(f"restart by {ctx.auth.subject}")
            return {"restarted": True}

        @server.method(POKE, scopes=["ops:admin"])
        async def poke(params: dict[str, Any]) -> None:
            self.ran.append(f"poke {params.get('n')}")
            self.poked.set()

        @server.method("ops/status")
        async def status(params: dict[str, Any]) -> dict[str, Any]:
            return {"ok": True}

        @server.tool()
        async def whoami(ctx: Context) -> str:
            assert ctx.auth is not None
            return " ".join(sorted(ctx.auth.scopes))


def bearer(token: str, served: Served, session: str | None = None) -> dict[str, str]:
    return served.headers(session, authorization=f"Bearer {token}")


async def open_session(served: Served, token: str) -> str:
    headers = served.headers(version=None, authorization=f"Bearer {token}")
    opened = await served.post(initialize_body(), headers=headers)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await served.post(note, headers=bearer(token, served, session))).status_code == 202
    return session


def poke(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": POKE, "params": {"n": n}}


def test_scopes_are_checked_when_registered_and_published() -> None:
    ops = Ops()
    assert ops.server.custom_methods["ops/restart"].scopes == frozenset({"ops:admin"})
    assert ops.server.custom_methods["ops/status"].scopes == frozenset()
    assert ops.server.auth is not None
    assert "ops:admin" in ops.server.auth.supported(
        [m.scopes for m in ops.server.custom_methods.values()]
    )
    with pytest.raises(ValueError, match=r"server\.method"):
        ops.server.method("ops/bad", scopes="not a scope\\")


async def test_a_custom_request_without_its_scope_is_a_403_and_never_runs() -> None:
    ops = Ops()
    with trio.fail_after(GUARD):
        async with serving(ops.server) as served:
            session = await open_session(served, OPS_TOKEN)
            body = request_body(1, "ops/restart")
            refused = await served.post(body, headers=bearer(NARROW_TOKEN, served, session))
            assert refused.status_code == 403
            [challenge] = parse_www_authenticate(refused.headers.get_list("www-authenticate"))
            assert challenge.params["error"] == "insufficient_scope"
            assert set(challenge.params["scope"].split()) == {"mcp", "ops:admin"}
            assert ops.ran == []
            # A custom method without scopes of its own needs the base ones only.
            plain = await served.post(
                request_body(2, "ops/status"), headers=bearer(NARROW_TOKEN, served, session)
            )
            assert plain.status_code == 200
            answer = await served.post(body, headers=bearer(OPS_TOKEN, served, session))
            assert answer.status_code == 200, answer.text
            assert ops.ran == ["restart by ops"]


async def test_a_custom_notification_without_its_scope_is_a_403_and_never_runs() -> None:
    ops = Ops()
    with trio.fail_after(GUARD):
        async with serving(ops.server) as served:
            session = await open_session(served, OPS_TOKEN)
            refused = await served.post(poke(1), headers=bearer(NARROW_TOKEN, served, session))
            assert refused.status_code == 403
            [challenge] = parse_www_authenticate(refused.headers.get_list("www-authenticate"))
            assert set(challenge.params["scope"].split()) == {"mcp", "ops:admin"}
            accepted = await served.post(poke(2), headers=bearer(OPS_TOKEN, served, session))
            assert accepted.status_code == 202
            await ops.poked.wait()
            assert ops.ran == ["poke 2"]


async def test_over_http_sse_notifications_are_gated_and_a_batch_carries_its_principal() -> None:
    ops = Ops()
    ops_auth = {"authorization": f"Bearer {OPS_TOKEN}"}
    narrow_auth = {"authorization": f"Bearer {NARROW_TOKEN}"}
    with trio.fail_after(GUARD):
        async with (
            serving(ops.server) as served,
            sse_peer(served, initialize=False, **ops_auth) as peer,
        ):
            assert (await peer.post(initialize_body("2024-11-05"), **ops_auth)).status_code == (202)
            assert (await peer.recv())["id"] == "init"
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await peer.post(note, **ops_auth)).status_code == 202
            assert (await peer.post(poke(1), **narrow_auth)).status_code == 403
            # In a batch, a notification's scopes count with its requests'.
            batch = [call_body(3, "whoami"), poke(2)]
            assert (await peer.post(batch, **narrow_auth)).status_code == 403
            assert ops.ran == []
            # Each request of a batch acts for the POST's principal (its own scopes).
            accepted = await peer.post([call_body(4, "whoami"), poke(3)], **ops_auth)
            assert accepted.status_code == 202
            [answer] = await peer.recv()
            assert answer["result"]["content"][0]["text"] == "mcp ops:admin", answer
            await eventually(lambda: ops.ran == ["poke 3"])


@asynccontextmanager
async def acting_for(server: Server, principal: Principal) -> AsyncIterator[WirePeer]:
    ours, theirs = memory_transport_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(functools.partial(server.serve_transport, theirs, principal=principal))
        peer = WirePeer(ours)
        assert "result" in await peer.initialize()
        yield peer
        ours.close()
        nursery.cancel_scope.cancel()


async def test_without_http_the_connection_refuses_the_request_and_drops_the_notification() -> None:
    ops = Ops()
    with trio.fail_after(GUARD):
        async with acting_for(ops.server, OPS_NARROW) as narrow:
            refused = await narrow.request(1, "ops/restart", {})
            assert refused["error"]["code"] == -32600
            assert refused["error"]["message"].startswith("Forbidden: ops/restart needs")
            assert refused["error"]["data"]["error"] == "insufficient_scope"
            await narrow.send(poke(1))
            # A request after it is answered only once the notification was dealt with.
            assert "result" in await narrow.request(2, "ping", {})
            assert ops.ran == []
        async with acting_for(ops.server, OPS) as full:
            assert (await full.request(1, "ops/restart", {}))["result"] == {"restarted": True}
            await full.send(poke(2))
            await ops.poked.wait()
    assert ops.ran == ["restart by ops", "poke 2"]
