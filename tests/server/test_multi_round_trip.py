"""Multi round-trip requests on the server (2026-07-28): the same handler code as the handshake
era, ending the request with an InputRequiredResult until the client supplies the input."""

from __future__ import annotations

import gc
import warnings
from typing import Any

import pytest

from trio_mcp import Context, MCPError, Server

from .._http import Served, serving
from ..wire import WirePeer, wire_to

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

    @server.tool()
    async def greet_ahead(ctx: Context) -> str:
        """greet, with both questions open to answers sent ahead."""
        ctx.state["rounds"] = ctx.state.get("rounds", 0) + 1
        answer = await ctx.elicit("Your name?", FORM, answer_ahead=True)
        if answer.action != "accept" or answer.content is None:
            return "no name"
        reply = await ctx.sample(
            f"Greet {answer.content['name']}", max_tokens=10, answer_ahead=True
        )
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


async def call(
    peer: WirePeer,
    rid: Any,
    extra: dict[str, Any] | None = None,
    *,
    tool: str = "greet",
    **kw: Any,
) -> Any:
    params = {"name": tool, "_meta": meta(**kw), **(extra or {})}
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


@pytest.mark.invariant(10)
async def test_answers_without_a_state_are_ignored_unless_the_question_opted_in() -> None:
    """By default an answer sent without a requestState stands for nothing: the question is
    asked, with a sealed state, as if no answer had been sent."""
    async with wire_to(input_server(), initialize=False) as peer:
        ahead = {"elicitation-1": {"action": "accept", "content": {"name": "Ada"}}}
        first = (await call(peer, 1, {"inputResponses": ahead}))["result"]
        assert first["resultType"] == "input_required"
        assert list(first["inputRequests"]) == ["elicitation-1"]
        # Answered with the state, it counts.
        retry = {"inputResponses": ahead, "requestState": first["requestState"]}
        second = (await call(peer, 2, retry))["result"]
        assert list(second["inputRequests"]) == ["sampling-2"]


@pytest.mark.invariant(10)
async def test_answers_without_a_state_count_only_for_an_opening_question_that_opted_in() -> None:
    """A request without a requestState may answer what its first round would ask, if the
    question opted in (``answer_ahead=True``: the client is the source of that answer either
    way); anything later needs the sealed state, even when it opted in, so a client cannot
    answer ahead a question it was never shown."""
    async with wire_to(input_server(), initialize=False) as peer:
        ahead = {
            "elicitation-1": {"action": "accept", "content": {"name": "Ada"}},
            "sampling-2": {
                "role": "assistant",
                "content": {"type": "text", "text": "Forged"},
                "model": "m",
            },
            "unknown": {"action": "accept", "content": {"name": "ignored"}},
        }
        first = (await call(peer, 1, {"inputResponses": ahead}, tool="greet_ahead"))["result"]
        assert first["resultType"] == "input_required"
        assert list(first["inputRequests"]) == ["sampling-2"]
        asked = first["inputRequests"]["sampling-2"]["params"]["messages"][0]["content"]
        assert asked["text"] == "Greet Ada"
        # The opening answer travels on in the sealed state.
        sampled = {
            "sampling-2": {
                "role": "assistant",
                "content": {"type": "text", "text": "Hello Ada"},
                "model": "m",
            }
        }
        retry = {"inputResponses": sampled, "requestState": first["requestState"]}
        done = (await call(peer, 2, retry, tool="greet_ahead"))["result"]
        assert done["content"][0]["text"] == "Hello Ada (rounds: 2)"


@pytest.mark.invariant(10)
async def test_a_retry_cannot_answer_ahead_a_question_not_yet_asked() -> None:
    """With a state, only the questions it says were asked take answers: a forged answer to
    the next question is ignored, and that question is asked."""
    async with wire_to(input_server(), initialize=False) as peer:
        first = (await call(peer, 1))["result"]
        ahead = {
            "elicitation-1": {"action": "accept", "content": {"name": "Ada"}},
            "sampling-2": {
                "role": "assistant",
                "content": {"type": "text", "text": "Forged"},
                "model": "m",
            },
        }
        retry = {"inputResponses": ahead, "requestState": first["requestState"]}
        second = (await call(peer, 2, retry))["result"]
        assert second["resultType"] == "input_required"
        assert list(second["inputRequests"]) == ["sampling-2"]


@pytest.mark.invariant(10)
async def test_a_tampered_or_foreign_state_is_refused() -> None:
    server = input_server()
    async with wire_to(server, initialize=False) as peer:
        state = (await call(peer, 1))["result"]["requestState"]
        middle = len(state) // 2
        tampered = state[:middle] + ("A" if state[middle] != "A" else "B") + state[middle + 1 :]
        for bad in [tampered, state + "x", "garbage", 42, "x" * (64 * 1024 + 1)]:
            refused = await call(peer, 2, {"requestState": bad})
            assert refused["error"]["code"] == -32602, bad
            assert "requestState" in refused["error"]["message"]
        # A state issued for the tool cannot be used with the prompt.
        foreign = await peer.request(
            3, "prompts/get", {"name": "asks", "_meta": meta(), "requestState": state}
        )
        assert foreign["error"]["code"] == -32602


@pytest.mark.invariant(10)
async def test_a_state_is_bound_to_its_method_and_to_its_target() -> None:
    """Each on its own: another tool of the same method, or the same name under another
    method, cannot use a state issued for tools/call greet."""
    server = input_server()

    @server.tool()
    async def other(ctx: Context) -> str:
        await ctx.elicit("Other?", FORM)
        return "other"  # pragma: no cover

    @server.prompt(name="greet")
    async def greet_prompt(ctx: Context) -> str:
        await ctx.elicit("Prompt?", FORM)
        return "prompt"  # pragma: no cover

    async with wire_to(server, initialize=False) as peer:
        state = (await call(peer, 1))["result"]["requestState"]
        for rid, method, name in [(2, "tools/call", "other"), (3, "prompts/get", "greet")]:
            params = {"name": name, "_meta": meta(), "requestState": state}
            refused = await peer.request(rid, method, params)
            assert refused["error"]["code"] == -32602, method
            assert "requestState" in refused["error"]["message"]
        # Where it was issued, the state is good.
        again = (await call(peer, 4, {"requestState": state}))["result"]
        assert again["resultType"] == "input_required"


@pytest.mark.invariant(10)
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
    # Replicas: the same key and the same name (the audience a state is sealed for).
    one, two = Server("a", state_key=b"k" * 32), Server("a", state_key=b"k" * 32)
    stranger = Server("a", state_key=b"x" * 32)
    for server in (one, two, stranger):
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
    async with wire_to(stranger, initialize=False) as peer:
        answered = {"elicitation-1": {"action": "decline"}}
        refused = await call(peer, 1, {"requestState": state, "inputResponses": answered})
        assert refused["error"]["code"] == -32602


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


ALL_CAPS: dict[str, Any] = {"elicitation": {}, "sampling": {}, "roots": {}}
NAMED = {"action": "accept", "content": {"name": "Ada"}}
GREETING = {"role": "assistant", "content": {"type": "text", "text": "Hi"}, "model": "m"}
ROOTS = {"roots": [{"uri": "file:///r"}]}


def together_server() -> Server:
    server = Server("together")

    @server.tool()
    async def onboard(ctx: Context) -> str:
        name, reply, roots = await ctx.ask_together(
            ctx.elicit("Your name?", FORM, key="user_name"),
            ctx.sample("A greeting", max_tokens=10, key="greeting"),
            ctx.list_roots(key="client_roots"),
        )
        who = name.content["name"] if name.content else "?"
        return f"{reply.content.text} {who} ({len(roots)} roots)"  # type: ignore[union-attr]

    @server.tool()
    async def onboard_ahead(ctx: Context) -> str:
        name, reply, roots = await ctx.ask_together(
            ctx.elicit("Your name?", FORM, key="user_name", answer_ahead=True),
            ctx.sample("A greeting", max_tokens=10, key="greeting", answer_ahead=True),
            ctx.list_roots(key="client_roots", answer_ahead=True),
        )
        who = name.content["name"] if name.content else "?"
        return f"{reply.content.text} {who} ({len(roots)} roots)"  # type: ignore[union-attr]

    @server.tool()
    async def onboard_partly_ahead(ctx: Context) -> str:
        name, reply, roots = await ctx.ask_together(
            ctx.elicit("Your name?", FORM, key="user_name", answer_ahead=True),
            ctx.sample("A greeting", max_tokens=10, key="greeting"),
            ctx.list_roots(key="client_roots", answer_ahead=True),
        )
        who = name.content["name"] if name.content else "?"
        return f"{reply.content.text} {who} ({len(roots)} roots)"  # type: ignore[union-attr]

    @server.tool()
    async def twice(ctx: Context) -> str:
        await ctx.elicit("One?", FORM, key="same")
        await ctx.elicit("Two?", FORM, key="same")
        return "unreachable"  # pragma: no cover

    return server


async def test_questions_asked_together_travel_in_one_result_under_their_keys() -> None:
    async with wire_to(together_server(), initialize=False) as peer:
        params = {"name": "onboard", "_meta": meta(ALL_CAPS)}
        first = (await peer.request(1, "tools/call", params))["result"]
        assert first["resultType"] == "input_required"
        assert {key: asked["method"] for key, asked in first["inputRequests"].items()} == {
            "user_name": "elicitation/create",
            "greeting": "sampling/createMessage",
            "client_roots": "roots/list",
        }
        # Answer one of them: only the others are asked again, the answer is kept.
        answered = {"user_name": NAMED}
        retry = {**params, "requestState": first["requestState"], "inputResponses": answered}
        second = (await peer.request(2, "tools/call", retry))["result"]
        assert list(second["inputRequests"]) == ["greeting", "client_roots"]
        rest = {"greeting": GREETING, "client_roots": ROOTS}
        retry = {**params, "requestState": second["requestState"], "inputResponses": rest}
        third = (await peer.request(3, "tools/call", retry))["result"]
        assert third["resultType"] == "complete"
        assert third["content"][0]["text"] == "Hi Ada (1 roots)"


async def test_an_opening_batch_can_be_answered_without_a_state_where_it_opted_in() -> None:
    """Each question of an opening batch opts in on its own: the ones that did take the
    answers sent ahead, the others are asked."""
    async with wire_to(together_server(), initialize=False) as peer:
        answers = {"user_name": NAMED, "greeting": GREETING, "client_roots": ROOTS, "extra": {}}
        params = {"name": "onboard_ahead", "_meta": meta(ALL_CAPS), "inputResponses": answers}
        done = (await peer.request(1, "tools/call", params))["result"]
        assert done["content"][0]["text"] == "Hi Ada (1 roots)"
        params = {**params, "name": "onboard_partly_ahead"}
        partly = (await peer.request(2, "tools/call", params))["result"]
        assert list(partly["inputRequests"]) == ["greeting"]
        # What was taken ahead travels on in the state.
        retry = {
            "name": "onboard_partly_ahead",
            "_meta": meta(ALL_CAPS),
            "requestState": partly["requestState"],
            "inputResponses": {"greeting": GREETING},
        }
        done = (await peer.request(3, "tools/call", retry))["result"]
        assert done["content"][0]["text"] == "Hi Ada (1 roots)"
        # By default, nothing of the batch is taken ahead.
        params = {**params, "name": "onboard"}
        asked = (await peer.request(4, "tools/call", params))["result"]
        assert list(asked["inputRequests"]) == ["user_name", "greeting", "client_roots"]


async def test_asking_together_for_an_undeclared_capability_leaves_nothing_behind() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with wire_to(together_server(), initialize=False) as peer:
            # The first question is refused, so the other two are never awaited.
            params = {"name": "onboard", "_meta": meta({"sampling": {}, "roots": {}})}
            refused = await peer.request(1, "tools/call", params)
        gc.collect()
    assert refused["error"]["code"] == -32021
    assert refused["error"]["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}
    assert not [w for w in caught if "never awaited" in str(w.message)]


async def test_one_key_cannot_name_two_questions() -> None:
    async with wire_to(together_server(), initialize=False) as peer:
        params = {"name": "twice", "_meta": meta()}
        first = (await peer.request(1, "tools/call", params))["result"]
        assert list(first["inputRequests"]) == ["same"]
        retry = {**params, "requestState": first["requestState"], "inputResponses": {"same": NAMED}}
        failed = (await peer.request(2, "tools/call", retry))["result"]
        assert failed["isError"] is True


async def test_questions_asked_together_are_concurrent_requests_in_the_handshake_era() -> None:
    async with wire_to(together_server(), initialize=False) as peer:
        await peer.initialize(capabilities=ALL_CAPS)
        await peer.send(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "onboard"}}
        )
        # All three are out before the client answers any of them.
        asked = [await peer.recv() for _ in range(3)]
        answers = {
            "elicitation/create": NAMED,
            "sampling/createMessage": GREETING,
            "roots/list": ROOTS,
        }
        assert sorted(request["method"] for request in asked) == sorted(answers)
        for request in reversed(asked):
            result = answers[request["method"]]
            await peer.send({"jsonrpc": "2.0", "id": request["id"], "result": result})
        done = await peer.recv()
        assert done["result"]["content"][0]["text"] == "Hi Ada (1 roots)"


async def test_malformed_input_responses_are_invalid_params() -> None:
    """The spec asks servers to validate inputResponses: answers that are not result objects
    get -32602 rather than another round."""
    async with wire_to(input_server(), initialize=False) as peer:
        state = (await call(peer, 1))["result"]["requestState"]
        for bad in [None, 5, "text"]:
            refused = await call(
                peer, 2, {"requestState": state, "inputResponses": {"elicitation-1": bad}}
            )
            assert refused["error"]["code"] == -32602, bad
            assert "inputResponses" in refused["error"]["message"]
        listed = await call(peer, 3, {"requestState": state, "inputResponses": [1]})
        assert listed["error"]["code"] == -32602


async def test_a_handler_catching_mcp_errors_still_asks_for_input() -> None:
    """Ending a round is control flow, not an MCPError: ``except MCPError`` around a question
    (for a missing capability, say) must not swallow it."""
    server = Server("careful")

    @server.tool()
    async def careful(ctx: Context) -> str:
        try:
            answer = await ctx.elicit("Your name?", FORM)
        except MCPError as exc:
            return f"no elicitation: {exc}"
        return f"Hi {answer.content['name'] if answer.content else 'nobody'}"

    async with wire_to(server, initialize=False) as peer:
        params = {"name": "careful", "_meta": meta()}
        first = (await peer.request(1, "tools/call", params))["result"]
        assert first["resultType"] == "input_required", first
        answered = {"elicitation-1": {"action": "accept", "content": {"name": "Ada"}}}
        retry = {**params, "inputResponses": answered, "requestState": first["requestState"]}
        second = (await peer.request(2, "tools/call", retry))["result"]
        assert second["content"] == [{"type": "text", "text": "Hi Ada"}]


# -- a state is bound to its request's arguments (over a real hypercorn) ---------------------------

CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
ACCEPT = {"action": "accept", "content": {"ok": True}}
PRICES = {"pencil": 0.99, "laptop": 1999.0}


def bank_server(ledger: list[str]) -> Server:
    server = Server("bank")

    @server.tool()
    async def transfer(amount: int, to: str, ctx: Context) -> str:
        answer = await ctx.elicit(f"Send {amount} to {to}?", CONFIRM, key="confirm")
        if answer.action != "accept":
            return "cancelled"
        ledger.append(f"sent {amount} to {to}")
        return "sent"

    @server.tool()
    async def delete_file(path: str, ctx: Context) -> str:
        answer = await ctx.elicit(f"Delete {path}?", CONFIRM, key="confirm")
        if answer.action != "accept":
            return "kept"
        ledger.append(f"deleted {path}")
        return "deleted"

    @server.tool()
    async def buy(item: str, ctx: Context) -> str:
        # The quote is made once, in the first round, and kept in the sealed state.
        quote = ctx.state.setdefault("quote", {"item": item, "price": PRICES[item]})
        await ctx.elicit(f"Pay {quote['price']} for a {quote['item']}?", CONFIRM, key="confirm")
        ledger.append(f"charged {quote['price']} for a {item}")
        return "bought"

    return server


async def post_call(
    served: Served, rid: int, name: str, **params: Any
) -> tuple[int, dict[str, Any]]:
    """A modern tools/call POST over HTTP; its status and JSON-RPC response."""
    body = {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": name, "_meta": meta({"elicitation": {}}), **params},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": name,
    }
    response = await served.client.post(served.url, json=body, headers=headers)
    assert response.headers["content-type"] == "application/json"
    reply: dict[str, Any] = response.json()
    return response.status_code, reply


@pytest.mark.invariant(10)
async def test_a_state_approved_for_one_transfer_cannot_complete_another() -> None:
    """The user approved "Send 1 to bob?": the same state cannot send 1000000 to mallory."""
    ledger: list[str] = []
    async with serving(bank_server(ledger)) as served:
        _, asked = await post_call(served, 1, "transfer", arguments={"amount": 1, "to": "bob"})
        state = asked["result"]["requestState"]
        assert asked["result"]["inputRequests"]["confirm"]["params"]["message"] == (
            "Send 1 to bob?"
        )
        status, swapped = await post_call(
            served,
            2,
            "transfer",
            arguments={"amount": 1000000, "to": "mallory"},
            requestState=state,
            inputResponses={"confirm": ACCEPT},
        )
        assert (status, swapped["error"]["code"]) == (400, -32602)
        assert "requestState" in swapped["error"]["message"]
        assert ledger == []
        # The approval stands for the transfer it was given for (keys in any order).
        status, approved = await post_call(
            served,
            3,
            "transfer",
            arguments={"to": "bob", "amount": 1},
            requestState=state,
            inputResponses={"confirm": ACCEPT},
        )
        assert status == 200
        assert approved["result"]["content"][0]["text"] == "sent"
        assert ledger == ["sent 1 to bob"]


@pytest.mark.invariant(10)
async def test_a_quote_kept_for_a_pencil_cannot_be_charged_for_a_laptop() -> None:
    ledger: list[str] = []
    async with serving(bank_server(ledger)) as served:
        _, asked = await post_call(served, 1, "buy", arguments={"item": "pencil"})
        state = asked["result"]["requestState"]
        assert b"pencil" not in state.encode() and b"0.99" not in state.encode()
        status, laptop = await post_call(
            served,
            2,
            "buy",
            arguments={"item": "laptop"},
            requestState=state,
            inputResponses={"confirm": ACCEPT},
        )
        assert (status, laptop["error"]["code"]) == (400, -32602)
        assert ledger == []
        status, pencil = await post_call(
            served,
            3,
            "buy",
            arguments={"item": "pencil"},
            requestState=state,
            inputResponses={"confirm": ACCEPT},
        )
        assert status == 200
        assert pencil["result"]["content"][0]["text"] == "bought"
        assert ledger == ["charged 0.99 for a pencil"]


@pytest.mark.invariant(10)
async def test_a_prompt_or_resource_state_is_bound_to_its_arguments_or_uri() -> None:
    server = Server("bound")

    @server.prompt()
    async def topic(subject: str, ctx: Context) -> str:
        await ctx.elicit(f"Write about {subject}?", CONFIRM, key="confirm")
        return f"Write about {subject}"

    for name in ("a", "b"):

        @server.resource(f"memo://{name}")
        async def memo(ctx: Context) -> str:
            await ctx.elicit("Read the memo?", CONFIRM, key="confirm")
            return "memo"

    async with wire_to(server, initialize=False) as peer:
        params = {"name": "topic", "arguments": {"subject": "cats"}, "_meta": meta()}
        state = (await peer.request(1, "prompts/get", params))["result"]["requestState"]
        answered = {"requestState": state, "inputResponses": {"confirm": ACCEPT}}
        other = {**params, "arguments": {"subject": "dogs"}, **answered}
        assert (await peer.request(2, "prompts/get", other))["error"]["code"] == -32602
        same = (await peer.request(3, "prompts/get", {**params, **answered}))["result"]
        assert same["messages"][0]["content"]["text"] == "Write about cats"

        params = {"uri": "memo://a", "_meta": meta()}
        state = (await peer.request(4, "resources/read", params))["result"]["requestState"]
        answered = {"requestState": state, "inputResponses": {"confirm": ACCEPT}}
        other = {**params, "uri": "memo://b", **answered}
        assert (await peer.request(5, "resources/read", other))["error"]["code"] == -32602
        same = (await peer.request(6, "resources/read", {**params, **answered}))["result"]
        assert same["contents"][0]["text"] == "memo"


@pytest.mark.invariant(10)
async def test_a_confirmation_answered_ahead_is_asked_anyway_and_nothing_runs() -> None:
    """A client cannot skip a confirmation by sending its answer with the first request."""
    ledger: list[str] = []
    async with serving(bank_server(ledger)) as served:
        status, ahead = await post_call(
            served,
            1,
            "delete_file",
            arguments={"path": "report.txt"},
            inputResponses={"confirm": ACCEPT},
        )
        assert status == 200
        assert ahead["result"]["resultType"] == "input_required"
        assert ahead["result"]["inputRequests"]["confirm"]["params"]["message"] == (
            "Delete report.txt?"
        )
        assert ledger == []
        # Once asked, the user's answer (with the state) is what counts.
        status, declined = await post_call(
            served,
            2,
            "delete_file",
            arguments={"path": "report.txt"},
            requestState=ahead["result"]["requestState"],
            inputResponses={"confirm": {"action": "decline"}},
        )
        assert declined["result"]["content"][0]["text"] == "kept"
        assert ledger == []


async def test_a_state_over_the_size_limit_is_never_issued() -> None:
    """The client could never send it back: the request fails (generically) instead."""
    server = Server("hoarder")

    @server.tool()
    async def hoard(ctx: Context) -> str:
        ctx.state["blob"] = "x" * (64 * 1024)
        await ctx.elicit("Go on?", FORM)
        return "never"  # pragma: no cover

    async with wire_to(server, initialize=False) as peer:
        refused = await call(peer, 1, tool="hoard")
        assert refused["error"] == {"code": -32603, "message": "Internal error"}
