"""Single-use requestState: a retry's sealed state opens once when its tool (or the server)
asks for it, and a replay is refused exactly as a tampered state is."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from trio_mcp import Context, MemoryStateClaims, Server, StateClaimsUnavailable

from ..wire import WirePeer, wire_to

VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
META = {VERSION_KEY: "2026-07-28", CAPS_KEY: {"elicitation": {}}}
YES = {"elicitation-1": {"action": "accept", "content": {"ok": True}}}


def confirming_server(**options: Any) -> tuple[Server, list[str]]:
    """Tools that ask for a confirmation and then act (each act is recorded)."""
    server = Server("single-use", **options)
    acts: list[str] = []

    @server.tool(single_use_state=True)
    async def pay(ctx: Context) -> str:
        await ctx.elicit("Pay?", FORM)
        acts.append("pay")
        return "paid"

    @server.tool()
    async def look(ctx: Context) -> str:
        await ctx.elicit("Look?", FORM)
        acts.append("look")
        return "looked"

    @server.tool(single_use_state=False)
    async def peek(ctx: Context) -> str:
        await ctx.elicit("Peek?", FORM)
        acts.append("peek")
        return "peeked"

    return server, acts


async def ask_then_retry(peer: WirePeer, tool: str, rid: int) -> tuple[dict[str, Any], str]:
    first = await peer.request(rid, "tools/call", {"name": tool, "_meta": META})
    state = first["result"]["requestState"]
    retry = {"name": tool, "_meta": META, "inputResponses": YES, "requestState": state}
    return retry, state


async def test_a_single_use_state_opens_once_and_its_replay_is_refused_as_a_tampered_one() -> None:
    server, acts = confirming_server()
    async with wire_to(server, initialize=False) as peer:
        retry, state = await ask_then_retry(peer, "pay", 1)
        done = await peer.request(2, "tools/call", retry)
        assert done["result"]["content"][0]["text"] == "paid"
        replayed = await peer.request(3, "tools/call", retry)
        tampered = dict(retry, requestState=state[:-2] + ("AA" if state[-2:] != "AA" else "BB"))
        refused = await peer.request(4, "tools/call", tampered)
    assert acts == ["pay"]
    assert replayed["error"] == refused["error"]
    assert replayed["error"]["code"] == -32602


async def test_a_state_replays_unless_its_tool_or_its_server_says_single_use() -> None:
    server, acts = confirming_server()
    async with wire_to(server, initialize=False) as peer:
        retry, _ = await ask_then_retry(peer, "look", 1)
        for rid in (2, 3):
            assert "result" in await peer.request(rid, "tools/call", retry)
    assert acts == ["look", "look"]

    server, acts = confirming_server(single_use_state=True)
    async with wire_to(server, initialize=False) as peer:
        retry, _ = await ask_then_retry(peer, "look", 1)
        assert "result" in await peer.request(2, "tools/call", retry)
        assert (await peer.request(3, "tools/call", retry))["error"]["code"] == -32602
        # A tool that says single_use_state=False keeps replays, whatever the server says.
        retry, _ = await ask_then_retry(peer, "peek", 4)
        for rid in (5, 6):
            assert "result" in await peer.request(rid, "tools/call", retry)
    assert acts == ["look", "peek", "peek"]


async def test_racing_replays_of_one_state_run_the_tool_once() -> None:
    server, acts = confirming_server()
    async with wire_to(server, initialize=False) as peer:
        retry, _ = await ask_then_retry(peer, "pay", 1)
        answers: list[dict[str, Any]] = []

        async def send(rid: int) -> None:
            answers.append(await peer.request(rid, "tools/call", retry))

        async with trio.open_nursery() as nursery:
            for rid in range(2, 7):
                nursery.start_soon(send, rid)
    assert acts == ["pay"]
    assert sum("result" in answer for answer in answers) == 1


class DownClaims:
    async def claim(self, digest: str, ttl: float) -> bool:
        raise StateClaimsUnavailable("Redis at redis://example:6379/0: no answer in time")


async def test_a_claim_store_that_cannot_answer_refuses_the_retry() -> None:
    server, acts = confirming_server(state_claims=DownClaims())
    async with wire_to(server, initialize=False) as peer:
        retry, _ = await ask_then_retry(peer, "pay", 1)
        refused = await peer.request(2, "tools/call", retry)
        # A tool without single use never asks the store.
        retry, _ = await ask_then_retry(peer, "look", 3)
        assert "result" in await peer.request(4, "tools/call", retry)
    assert refused["error"]["code"] == -32603
    assert "example" not in refused["error"]["message"]
    assert acts == ["look"]


async def test_memory_claims_lapse_with_the_state_and_keep_no_more(
    autojump_clock: trio.testing.MockClock,
) -> None:
    claims = MemoryStateClaims()
    assert await claims.claim("a", 10.0)
    assert not await claims.claim("a", 10.0)
    assert await claims.claim("b", 1.0)
    await trio.sleep(5.0)
    assert await claims.claim("c", 1.0)  # claiming drops what lapsed
    assert len(claims) == 2
    assert await claims.claim("b", 1.0)  # b's state would have expired: its claim went too
    assert not await claims.claim("a", 1.0)
    await trio.sleep(10.0)
    assert await claims.claim("a", 1.0)
