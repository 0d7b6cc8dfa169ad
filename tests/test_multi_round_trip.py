"""Multi round-trip requests on the server (2026-07-28): the same handler code as the handshake
era, ending the request with an InputRequiredResult until the client supplies the input."""

from __future__ import annotations

from typing import Any

import pytest

from trio_mcp import Context, Server

from .wire import WirePeer, wire_to

VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def meta(caps: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        VERSION_KEY: "2026-07-28",
        CAPS_KEY: {"elicitation": {}, "sampling": {}} if caps is None else caps,
    }


def input_server() -> Server:
    server = Server("mrtr")

    @server.tool()
    async def greet(ctx: Context) -> str:
        ctx.state["rounds"] = ctx.state.get("rounds", 0) + 1
        answer = await ctx.elicit("Your name?", FORM)
        if answer.action != "accept" or answer.content is None:
            return "no name"
        reply = await ctx.sample(f"Greet {answer.content['name']}", max_tokens=10)
        return f"{reply.content.text} (rounds: {ctx.state['rounds']})"  # type: ignore[union-attr]

    @server.prompt()
    async def asks(ctx: Context) -> str:
        answer = await ctx.elicit("Topic?", FORM)
        return f"Write about {answer.content['name'] if answer.content else 'nothing'}"

    @server.method("custom/asks")
    async def custom(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        await ctx.elicit("no", FORM)
        return {}  # pragma: no cover

    return server


async def call(peer: WirePeer, rid: Any, extra: dict[str, Any] | None = None, **kw: Any) -> Any:
    params = {"name": "greet", "_meta": meta(**kw), **(extra or {})}
    return await peer.request(rid, "tools/call", params)


async def test_the_same_await_returns_the_answer_on_the_retry() -> None:
    async with wire_to(input_server(), initialize=False) as peer:
        first = (await call(peer, 1))["result"]
        assert first["resultType"] == "input_required"
        assert first["inputRequests"] == {
            "elicitation-1": {
                "method": "elicitation/create",
                "params": {"mode": "form", "message": "Your name?", "requestedSchema": FORM},
            }
        }
        assert "ttlMs" not in first
        state = first["requestState"]
        assert isinstance(state, str)

        answered = {"elicitation-1": {"action": "accept", "content": {"name": "Ada"}}}
        second = (await call(peer, 2, {"inputResponses": answered, "requestState": state}))[
            "result"
        ]
        assert second["resultType"] == "input_required"
        (key,) = second["inputRequests"]
        assert key == "sampling-2"
        assert second["inputRequests"][key]["method"] == "sampling/createMessage"

        sampled = {
            key: {
                "role": "assistant",
                "content": {"type": "text", "text": "Hello Ada"},
                "model": "m",
            }
        }
        third = (
            await call(peer, 3, {"inputResponses": sampled, "requestState": second["requestState"]})
        )["result"]
        assert third["resultType"] == "complete"
        # The first answer was carried in the sealed state; the handler's own data too.
        assert third["content"][0]["text"] == "Hello Ada (rounds: 3)"


async def test_missing_input_asks_again_and_extra_input_is_ignored() -> None:
    async with wire_to(input_server(), initialize=False) as peer:
        first = (await call(peer, 1))["result"]
        again = (
            await call(
                peer,
                2,
                {
                    "requestState": first["requestState"],
                    "inputResponses": {"not-asked": {"action": "accept", "content": {"name": "X"}}},
                },
            )
        )["result"]
        assert again["resultType"] == "input_required"
        assert list(again["inputRequests"]) == ["elicitation-1"]


async def test_answers_without_a_state_are_not_trusted() -> None:
    async with wire_to(input_server(), initialize=False) as peer:
        forged = {"elicitation-1": {"action": "accept", "content": {"name": "Mallory"}}}
        result = (await call(peer, 1, {"inputResponses": forged}))["result"]
        assert result["resultType"] == "input_required"


async def test_a_tampered_or_foreign_state_is_refused() -> None:
    server = input_server()
    async with wire_to(server, initialize=False) as peer:
        state = (await call(peer, 1))["result"]["requestState"]
        body, mac = state.split(".")
        tampered = body[:-2] + ("AA" if body[-2:] != "AA" else "BB") + "." + mac
        for bad in [tampered, state + "x", "garbage", 42]:
            refused = await call(peer, 2, {"requestState": bad})
            assert refused["error"]["code"] == -32602, bad
            assert "requestState" in refused["error"]["message"]
        # A state issued for the tool cannot be used with the prompt.
        foreign = await peer.request(
            3, "prompts/get", {"name": "asks", "_meta": meta(), "requestState": state}
        )
        assert foreign["error"]["code"] == -32602


async def test_an_expired_state_is_refused() -> None:
    server = input_server()
    server.state_sealer.ttl = -1
    async with wire_to(server, initialize=False) as peer:
        state = (await call(peer, 1))["result"]["requestState"]
        assert (await call(peer, 2, {"requestState": state}))["error"]["code"] == -32602


async def test_input_is_asked_only_for_declared_capabilities() -> None:
    async with wire_to(input_server(), initialize=False) as peer:
        refused = await call(peer, 1, caps={"sampling": {}})
        assert refused["error"] == {
            "code": -32021,
            "message": "Missing required client capability",
            "data": {"requiredCapabilities": {"elicitation": {"form": {}}}},
        }


async def test_prompts_can_ask_and_other_methods_cannot() -> None:
    async with wire_to(input_server(), initialize=False) as peer:
        prompt = (await peer.request(1, "prompts/get", {"name": "asks", "_meta": meta()}))["result"]
        assert prompt["resultType"] == "input_required"
        custom = await peer.request(2, "custom/asks", {"_meta": meta()})
        assert custom["error"]["code"] == -32603


async def test_a_shared_key_lets_replicas_accept_each_others_state() -> None:
    one, two = Server("a", state_key=b"k" * 32), Server("b", state_key=b"k" * 32)
    for server in (one, two):
        await_server = input_server()
        server.tools.update(await_server.tools)
    async with wire_to(one, initialize=False) as peer:
        state = (await call(peer, 1))["result"]["requestState"]
    async with wire_to(two, initialize=False) as peer:
        answered = {"elicitation-1": {"action": "decline"}}
        result = (await call(peer, 1, {"requestState": state, "inputResponses": answered}))[
            "result"
        ]
        assert result["content"][0]["text"] == "no name"


@pytest.mark.parametrize("era", ["handshake"])
async def test_the_same_handler_uses_real_requests_in_the_handshake_era(era: str) -> None:
    async with wire_to(input_server(), initialize=False) as peer:
        await peer.initialize(capabilities={"elicitation": {}, "sampling": {}})
        await peer.send(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "greet"}}
        )
        elicit = await peer.recv()
        assert elicit["method"] == "elicitation/create"
        await peer.send(
            {
                "jsonrpc": "2.0",
                "id": elicit["id"],
                "result": {"action": "accept", "content": {"name": "Bo"}},
            }
        )
        sample = await peer.recv()
        assert sample["method"] == "sampling/createMessage"
        await peer.send(
            {
                "jsonrpc": "2.0",
                "id": sample["id"],
                "result": {
                    "role": "assistant",
                    "content": {"type": "text", "text": "Hi Bo"},
                    "model": "m",
                },
            }
        )
        done = await peer.recv()
        assert done["result"]["content"][0]["text"] == "Hi Bo (rounds: 1)"
