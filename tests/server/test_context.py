"""What a handler does through its ``Context``, and what the server pushes on its own.

Logging, progress, nested requests to the client (sampling, elicitation, roots), list-changed
and resource-updated notifications: through the real client where that is what a user has, and
through the raw peer where the exact frames (or their absence) matter.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trio_mcp import (
    CapabilityMissing,
    Context,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    LoggingMessageNotificationParams,
    MCPError,
    ProtocolError,
    Root,
    SamplingMessage,
    Server,
    TextContent,
    open_client,
)

from ..wire import WirePeer, wire_to


def frame(rid: Any, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return message


async def frames_until_response(peer: WirePeer, rid: Any) -> list[Any]:
    """Every frame up to and including the response to ``rid``."""
    out = []
    while True:
        message = await peer.recv()
        out.append(message)
        if message.get("id") == rid and "method" not in message:
            return out


async def test_the_state_of_a_handshake_request_is_its_own_and_starts_empty() -> None:
    server = Server("state")

    @server.tool()
    async def count(ctx: Context) -> str:
        ctx.state["n"] = ctx.state.get("n", 0) + 1
        await trio.lowlevel.checkpoint()
        ctx.state["n"] += 1
        return str(ctx.state)

    async with wire_to(server) as peer:
        for rid in (1, 2):
            response = await peer.request(rid, "tools/call", {"name": "count"})
            assert response["result"]["content"][0]["text"] == "{'n': 2}"


# -- list-changed and resource-updated notifications ------------------------------------------


class Notes:
    """Collects ``on_notification`` calls."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, method: str, params: dict[str, Any]) -> None:
        self.seen.append((method, params))


def tools_server() -> Server:
    server = Server("lists")

    @server.tool()
    async def first() -> str:
        return "1"

    return server


async def test_registering_a_tool_after_initialize_sends_list_changed() -> None:
    server = tools_server()
    notes = Notes()
    async with open_client(server, on_notification=notes) as client:
        await client.ping()
        await trio.testing.wait_all_tasks_blocked()
        assert notes.seen == []

        @server.tool()
        async def second() -> str:
            return "2"

        await trio.testing.wait_all_tasks_blocked()
        assert notes.seen == [("notifications/tools/list_changed", {})]
        assert [t.name for t in await client.list_tools()] == ["first", "second"]
        server.remove_tool("first")
        await trio.testing.wait_all_tasks_blocked()
        assert notes.seen[1:] == [("notifications/tools/list_changed", {})]


async def test_list_changed_exact_frames_and_only_after_initialize(autojump_clock: Any) -> None:
    server = tools_server()

    @server.prompt()
    async def p0() -> str:
        return ""

    async with wire_to(server, initialize=False) as peer:

        @server.tool()
        async def early() -> str:
            return ""

        # Not initialized yet: nothing is pushed.
        assert await peer.recv_within(5) is None
        await peer.initialize()

        @server.prompt()
        async def p() -> str:
            return ""

        # Resources were not announced to this client, so their changes are not pushed.
        @server.resource("test://r")
        async def r() -> str:
            return ""

        @server.tool()
        async def late() -> str:
            return ""

        assert await peer.recv() == {
            "jsonrpc": "2.0",
            "method": "notifications/prompts/list_changed",
        }
        assert await peer.recv() == {
            "jsonrpc": "2.0",
            "method": "notifications/tools/list_changed",
        }
        assert await peer.recv_within(5) is None


def resource_server() -> Server:
    server = Server("subs")

    @server.resource("test://a")
    async def a() -> str:
        return "a"

    @server.resource("test://b")
    async def b() -> str:
        return "b"

    return server


async def test_resource_updated_reaches_only_subscribed_clients() -> None:
    server = resource_server()
    notes_1, notes_2 = Notes(), Notes()
    updated = "notifications/resources/updated"
    async with (
        open_client(server, on_notification=notes_1) as one,
        open_client(server, on_notification=notes_2) as two,
    ):
        await one.subscribe_resource("test://a")
        await two.subscribe_resource("test://b")
        server.notify_resource_updated("test://a")
        await trio.testing.wait_all_tasks_blocked()
        assert notes_1.seen == [(updated, {"uri": "test://a"})]
        assert notes_2.seen == []

        server.notify_resource_updated("test://b")
        server.notify_resource_updated("test://unrelated")
        await trio.testing.wait_all_tasks_blocked()
        assert notes_1.seen == [(updated, {"uri": "test://a"})]
        assert notes_2.seen == [(updated, {"uri": "test://b"})]

        await one.unsubscribe_resource("test://a")
        server.notify_resource_updated("test://a")
        await trio.testing.wait_all_tasks_blocked()
        assert notes_1.seen == [(updated, {"uri": "test://a"})]
        assert notes_2.seen == [(updated, {"uri": "test://b"})]


async def test_subscribe_needs_a_uri() -> None:
    async with wire_to(resource_server()) as peer:
        response = await peer.request(1, "resources/subscribe", {})
    assert response["error"]["code"] == -32602


async def test_a_closed_connection_is_forgotten() -> None:
    server = resource_server()
    async with open_client(server) as client:
        await client.subscribe_resource("test://a")
        assert len(server.connections) == 1
    await trio.testing.wait_all_tasks_blocked()
    assert server.connections == set()
    # Nobody to tell: this must not fail.
    server.notify_resource_updated("test://a")
    server.notify_list_changed("resources")


# -- logging ----------------------------------------------------------------------------------


def logging_server() -> Server:
    server = Server("logs")

    @server.tool()
    async def chatty(ctx: Context) -> str:
        await ctx.debug("d")
        await ctx.info({"step": 1}, logger="app")
        await ctx.log("notice", "n")
        await ctx.warning("w")
        await ctx.error("e")
        return "done"

    @server.tool()
    async def bad_level(ctx: Context) -> str:
        try:
            await ctx.log("loud", "x")
        except ValueError:
            return "refused"
        return "accepted"

    return server


async def test_log_level_filters_messages_on_the_wire() -> None:
    async with wire_to(logging_server()) as peer:
        await peer.send(frame(1, "tools/call", {"name": "chatty"}))
        before = await frames_until_response(peer, 1)
        assert [m.get("params") for m in before[:-1]] == [
            {"level": "debug", "data": "d"},
            {"level": "info", "data": {"step": 1}, "logger": "app"},
            {"level": "notice", "data": "n"},
            {"level": "warning", "data": "w"},
            {"level": "error", "data": "e"},
        ]
        assert {m["method"] for m in before[:-1]} == {"notifications/message"}

        assert await peer.request(2, "logging/setLevel", {"level": "warning"}) == {
            "jsonrpc": "2.0",
            "id": 2,
            "result": {},
        }
        await peer.send(frame(3, "tools/call", {"name": "chatty"}))
        after = await frames_until_response(peer, 3)
        assert after[:-1] == [
            {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "warning", "data": "w"},
            },
            {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "error", "data": "e"},
            },
        ]
        assert after[-1]["result"]["content"] == [{"type": "text", "text": "done"}]


async def test_on_log_receives_messages_in_order() -> None:
    logs: list[LoggingMessageNotificationParams] = []
    async with open_client(logging_server(), on_log=logs.append) as client:
        await client.call_tool("chatty")
        await trio.testing.wait_all_tasks_blocked()
        assert [(m.level, m.data, m.logger) for m in logs] == [
            ("debug", "d", None),
            ("info", {"step": 1}, "app"),
            ("notice", "n", None),
            ("warning", "w", None),
            ("error", "e", None),
        ]
        logs.clear()
        await client.set_logging_level("error")
        await client.call_tool("chatty")
        await trio.testing.wait_all_tasks_blocked()
        assert [(m.level, m.data) for m in logs] == [("error", "e")]


async def test_invalid_log_levels() -> None:
    async with wire_to(logging_server()) as peer:
        for level in ("loud", None, 3, "WARNING"):
            response = await peer.request(1, "logging/setLevel", {"level": level})
            assert response["error"]["code"] == -32602, level
        # The level did not change: debug still goes through.
        await peer.send(frame(2, "tools/call", {"name": "chatty"}))
        frames = await frames_until_response(peer, 2)
        assert frames[0]["params"] == {"level": "debug", "data": "d"}
        response = await peer.request(3, "tools/call", {"name": "bad_level"})
        assert response["result"]["content"] == [{"type": "text", "text": "refused"}]


async def test_logging_level_is_per_connection() -> None:
    server = logging_server()
    quiet: list[LoggingMessageNotificationParams] = []
    loud: list[LoggingMessageNotificationParams] = []
    async with (
        open_client(server, on_log=quiet.append) as one,
        open_client(server, on_log=loud.append) as two,
    ):
        await one.set_logging_level("critical")
        await one.call_tool("chatty")
        await two.call_tool("chatty")
        await trio.testing.wait_all_tasks_blocked()
    assert quiet == []
    assert len(loud) == 5


# -- progress ---------------------------------------------------------------------------------


def progress_server() -> Server:
    server = Server("progress")

    @server.tool()
    async def work(steps: int, ctx: Context) -> str:
        for i in range(1, steps + 1):
            await ctx.report_progress(i, steps, f"step {i}")
        await ctx.report_progress(steps + 0.5)
        return "worked"

    return server


async def test_progress_reaches_the_callback_of_its_own_call() -> None:
    mine: list[tuple[float, float | None, str | None]] = []

    def on_progress(progress: float, total: float | None, message: str | None) -> None:
        mine.append((progress, total, message))

    async with open_client(progress_server()) as client:
        async with trio.open_nursery() as nursery:
            # A concurrent call without a callback: its progress is not ours.
            nursery.start_soon(client.call_tool, "work", {"steps": 5})
            result = await client.call_tool("work", {"steps": 2}, on_progress=on_progress)
        assert result.content == [TextContent("worked")]
        await client.call_tool("work", {"steps": 3})
    assert mine == [(1, 2, "step 1"), (2, 2, "step 2"), (2.5, None, None)]


async def test_async_progress_callback_is_awaited() -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        await trio.lowlevel.checkpoint()
        seen.append(progress)

    async with open_client(progress_server()) as client:
        await client.call_tool("work", {"steps": 2}, on_progress=on_progress)
    assert seen == [1, 2, 2.5]


async def test_progress_frames_carry_the_request_token() -> None:
    async with wire_to(progress_server()) as peer:
        await peer.send(
            frame(
                1,
                "tools/call",
                {"name": "work", "arguments": {"steps": 1}, "_meta": {"progressToken": "tok"}},
            )
        )
        frames = await frames_until_response(peer, 1)
    assert frames[:-1] == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "tok", "progress": 1, "total": 1, "message": "step 1"},
        },
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "tok", "progress": 1.5},
        },
    ]


async def test_no_progress_without_a_token() -> None:
    async with wire_to(progress_server()) as peer:
        for rid, params in enumerate(
            [
                {"name": "work", "arguments": {"steps": 2}},
                {"name": "work", "arguments": {"steps": 2}, "_meta": {}},
                # Not a valid token: treated as absent.
                {"name": "work", "arguments": {"steps": 2}, "_meta": {"progressToken": None}},
            ]
        ):
            response = await peer.request(rid, "tools/call", params)
            # The very next frame is the answer: no progress was sent.
            assert response["id"] == rid
            assert response["result"]["content"] == [{"type": "text", "text": "worked"}]


# -- nested requests to the client ------------------------------------------------------------


def nested_server() -> Server:
    server = Server("nested")

    @server.tool()
    async def summarize(text: str, ctx: Context) -> str:
        result = await ctx.sample(
            f"Summarize: {text}", max_tokens=50, system_prompt="Be brief.", temperature=0.1
        )
        assert isinstance(result.content, TextContent)
        return f"{result.model}: {result.content.text}"

    @server.tool()
    async def ask_name(ctx: Context) -> str:
        answer = await ctx.elicit(
            "Your name?",
            {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        )
        if answer.action != "accept":
            return answer.action
        assert answer.content is not None
        return f"hello {answer.content['name']}"

    @server.tool()
    async def ask_contact(ctx: Context) -> str:
        try:
            answer = await ctx.elicit("Contact?", Contact)
        except MCPError as exc:
            return f"invalid: {exc}"
        return f"{answer.action} {answer.content}"

    @server.tool()
    async def authorize(ctx: Context) -> str:
        answer = await ctx.elicit_url("Sign in", "https://example.com/auth", "el-1")
        return answer.action

    @server.tool()
    async def roots(ctx: Context) -> list[str]:
        return [f"{root.name}={root.uri}" for root in await ctx.list_roots()]

    @server.tool()
    async def check_sampling(ctx: Context) -> str:
        try:
            await ctx.sample("x", max_tokens=1)
        except CapabilityMissing as exc:
            return f"missing: {exc}"
        return "available"

    return server


@attrs.define
class Contact:
    email: str
    age: int


async def test_sample_goes_to_on_sample() -> None:
    requests: list[CreateMessageRequestParams] = []

    def on_sample(params: CreateMessageRequestParams) -> CreateMessageResult:
        requests.append(params)
        return CreateMessageResult(
            role="assistant", content=TextContent("short"), model="test-model"
        )

    async with open_client(nested_server(), on_sample=on_sample) as client:
        result = await client.call_tool("summarize", {"text": "a long text"})
    assert result.content == [TextContent("test-model: short")]
    assert not result.is_error
    [request] = requests
    assert request.messages == [
        SamplingMessage(role="user", content=TextContent("Summarize: a long text"))
    ]
    assert request.max_tokens == 50
    assert request.system_prompt == "Be brief."
    assert request.temperature == 0.1


async def test_elicit_with_a_dict_schema_goes_to_on_elicit() -> None:
    requests: list[Any] = []

    async def on_elicit(params: ElicitRequestFormParams) -> ElicitResult:
        requests.append(params)
        await trio.lowlevel.checkpoint()
        if len(requests) == 1:
            return ElicitResult(action="accept", content={"name": "Ada"})
        return ElicitResult(action="decline")

    async with open_client(nested_server(), on_elicit=on_elicit) as client:
        accepted = await client.call_tool("ask_name")
        declined = await client.call_tool("ask_name")
    assert accepted.content == [TextContent("hello Ada")]
    assert declined.content == [TextContent("decline")]
    assert isinstance(requests[0], ElicitRequestFormParams)
    assert requests[0].message == "Your name?"
    assert requests[0].requested_schema == {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    }


async def test_elicit_with_an_attrs_class_derives_the_schema_and_checks_the_answer() -> None:
    answers = iter(
        [
            ElicitResult(action="accept", content={"email": "a@b.c", "age": 36}),
            ElicitResult(action="accept", content={"email": "a@b.c", "age": "old"}),
        ]
    )
    requests: list[Any] = []

    def on_elicit(params: ElicitRequestFormParams) -> ElicitResult:
        requests.append(params)
        return next(answers)

    async with open_client(nested_server(), on_elicit=on_elicit) as client:
        good = await client.call_tool("ask_contact")
        bad = await client.call_tool("ask_contact")
    assert good.content == [TextContent("accept {'email': 'a@b.c', 'age': 36}")]
    [text] = bad.content
    assert isinstance(text, TextContent)
    assert text.text.startswith("invalid: ")
    assert "age" in text.text
    schema = requests[0].requested_schema
    assert schema["type"] == "object"
    assert schema["properties"] == {"email": {"type": "string"}, "age": {"type": "integer"}}
    assert sorted(schema["required"]) == ["age", "email"]


async def test_elicit_url_goes_to_on_elicit() -> None:
    requests: list[Any] = []

    def on_elicit(params: ElicitRequestURLParams) -> ElicitResult:
        requests.append(params)
        return ElicitResult(action="accept")

    async with open_client(nested_server(), on_elicit=on_elicit) as client:
        result = await client.call_tool("authorize")
    assert result.content == [TextContent("accept")]
    assert requests == [
        ElicitRequestURLParams(
            message="Sign in", url="https://example.com/auth", elicitation_id="el-1"
        )
    ]


async def test_list_roots_returns_the_client_roots() -> None:
    roots = [Root(uri="file:///work", name="work"), Root(uri="file:///tmp", name="tmp")]
    async with open_client(nested_server(), roots=roots) as client:
        result = await client.call_tool("roots")
    assert result.structured_content == {"result": ["work=file:///work", "tmp=file:///tmp"]}


async def test_list_roots_from_a_callable() -> None:
    async def current() -> list[Root]:
        await trio.lowlevel.checkpoint()
        return [Root(uri="file:///live", name="live")]

    async with open_client(nested_server(), roots=current) as client:
        result = await client.call_tool("roots")
    assert result.structured_content == {"result": ["live=file:///live"]}


def relaying_server() -> Server:
    """Tools that hand the client a question in its wire form, as a proxy does."""
    server = Server("relaying")

    @server.tool()
    async def relay(method: str, params: dict[str, Any], ctx: Context) -> str:
        try:
            return repr(await ctx.ask_client(method, params))
        except (CapabilityMissing, ValueError) as exc:
            return f"{type(exc).__name__}: {exc}"

    return server


async def test_a_question_in_wire_form_is_asked_as_the_requests_own_and_answered_as_it_came() -> (
    None
):
    roots = [Root(uri="file:///work", name="work")]
    elicited: list[ElicitRequestFormParams | ElicitRequestURLParams] = []

    def on_elicit(params: ElicitRequestFormParams | ElicitRequestURLParams) -> ElicitResult:
        elicited.append(params)
        return ElicitResult(action="decline")

    async with open_client(relaying_server(), roots=roots, on_elicit=on_elicit) as client:
        listed = await client.call_tool("relay", {"method": "roots/list", "params": {}})
        form = {"mode": "form", "message": "Name?", "requestedSchema": {"type": "object"}}
        declined = await client.call_tool("relay", {"method": "elicitation/create", "params": form})
        url = {"mode": "url", "message": "Go", "url": "https://example.com", "elicitationId": "e"}
        asked_url = await client.call_tool("relay", {"method": "elicitation/create", "params": url})
        sampled = await client.call_tool(
            "relay", {"method": "sampling/createMessage", "params": {}}
        )
        other = await client.call_tool("relay", {"method": "tools/list", "params": {}})
    texts = [only_text(r) for r in (listed, declined, asked_url, sampled, other)]
    assert texts[:3] == [
        "{'roots': [{'uri': 'file:///work', 'name': 'work'}]}",
        "{'action': 'decline'}",
        "{'action': 'decline'}",
    ]
    assert [type(p) for p in elicited] == [ElicitRequestFormParams, ElicitRequestURLParams]
    # What the client did not declare is refused, as ctx.sample refuses it.
    assert texts[3] == "CapabilityMissing: the client did not declare the 'sampling' capability"
    assert texts[4] == "ValueError: 'tools/list' is not a request a server may send a client"


async def test_a_question_in_wire_form_needs_the_elicitation_mode_it_asks_for(
    autojump_clock: Any,
) -> None:
    url = {"mode": "url", "message": "Go", "url": "https://example.com", "elicitationId": "e"}
    async with wire_to(relaying_server(), initialize=False) as peer:
        await peer.initialize(capabilities={"elicitation": {}})  # form mode only
        arguments = {"method": "elicitation/create", "params": url}
        response = await peer.request(1, "tools/call", {"name": "relay", "arguments": arguments})
        [content] = response["result"]["content"]
        assert content["text"] == (
            "CapabilityMissing: the client did not declare URL-mode elicitation"
        )
        assert await peer.recv_within(5) is None  # nothing was asked


def only_text(result: Any) -> str:
    [content] = result.content
    assert isinstance(content, TextContent)
    return content.text


async def test_missing_client_capabilities_raise_capability_missing() -> None:
    async with open_client(nested_server()) as client:
        caught = await client.call_tool("check_sampling")
        assert not caught.is_error
        [text] = caught.content
        assert isinstance(text, TextContent)
        assert text.text.startswith("missing: ") and "sampling" in text.text
        for name, arguments in [
            ("summarize", {"text": "x"}),
            ("ask_name", None),
            ("authorize", None),
            ("roots", None),
        ]:
            result = await client.call_tool(name, arguments)
            assert result.is_error, name
            assert result.structured_content is None


async def test_capability_missing_is_raised_before_anything_is_sent(autojump_clock: Any) -> None:
    async with wire_to(nested_server()) as peer:
        response = await peer.request(1, "tools/call", {"name": "roots"})
        # The next frame is the answer itself: no roots/list request went out.
        assert response["id"] == 1 and response["result"]["isError"] is True
        assert await peer.recv_within(5) is None


async def test_elicitation_capability_without_modes_means_form_only(autojump_clock: Any) -> None:
    async with wire_to(nested_server(), initialize=False) as peer:
        await peer.initialize(capabilities={"elicitation": {}})
        # URL mode was not declared: refused without a request to the client.
        response = await peer.request(1, "tools/call", {"name": "authorize"})
        assert response["id"] == 1 and response["result"]["isError"] is True
        # Form mode was: the request reaches the client.
        await peer.send(frame(2, "tools/call", {"name": "ask_name"}))
        nested = await peer.recv()
        assert nested["method"] == "elicitation/create"
        assert nested["params"]["mode"] == "form"
        await peer.send(
            {
                "jsonrpc": "2.0",
                "id": nested["id"],
                "result": {"action": "accept", "content": {"name": "Bo"}},
            }
        )
        answer = await peer.recv()
        assert answer["id"] == 2
        assert answer["result"]["content"] == [{"type": "text", "text": "hello Bo"}]


async def test_an_error_from_the_client_fails_the_tool_not_the_request(
    autojump_clock: Any,
) -> None:
    # The client's error is about the nested request: it must not come back as the error of
    # tools/call (a -32601 there would read as "tools/call does not exist").
    async with wire_to(nested_server(), initialize=False) as peer:
        await peer.initialize(capabilities={"sampling": {}, "roots": {}})
        for rid, tool, arguments in [(1, "summarize", {"text": "t"}), (2, "roots", {})]:
            await peer.send(frame(rid, "tools/call", {"name": tool, "arguments": arguments}))
            nested = await peer.recv()
            assert "id" in nested and nested["method"] in ("sampling/createMessage", "roots/list")
            await peer.send(
                {
                    "jsonrpc": "2.0",
                    "id": nested["id"],
                    "error": {"code": -32601, "message": "Method not found", "data": "x"},
                }
            )
            answer = await peer.recv()
            assert answer["id"] == rid
            assert "error" not in answer, answer
            assert answer["result"]["isError"] is True


@pytest.mark.parametrize(
    ("answer", "told"),
    [
        (
            {"result": {"role": "assistant", "content": {"type": "text"}, "model": "m"}},
            "invalid CreateMessageResult: content.text: required field is missing",
        ),
        ({"result": 5}, 'not a JSON-RPC response: the "result" member must be an object'),
    ],
)
async def test_an_answer_that_does_not_fit_fails_the_tool_with_what_is_wrong(
    answer: dict[str, Any], told: str
) -> None:
    """The client's answer to a sampling request is not a sampling result (or no response at
    all): the tool that asked fails with InvalidAnswer, whose message is its isError result;
    the request itself is answered, the connection goes on."""
    async with wire_to(nested_server(), initialize=False) as peer:
        await peer.initialize(capabilities={"sampling": {}})
        await peer.send(frame(1, "tools/call", {"name": "summarize", "arguments": {"text": "t"}}))
        nested = await peer.recv()
        assert nested["method"] == "sampling/createMessage"
        await peer.send({"jsonrpc": "2.0", "id": nested["id"], **answer})
        reply = await peer.recv()
        assert reply["id"] == 1 and reply["result"]["isError"] is True, reply
        assert told in reply["result"]["content"][0]["text"]
        assert (await peer.request(2, "ping"))["result"] == {}


async def test_a_tool_can_catch_the_client_error_as_a_protocol_error() -> None:
    server = Server("nested")

    @server.tool()
    async def careful(ctx: Context) -> str:
        try:
            await ctx.list_roots()
        except ProtocolError as exc:
            return f"{exc.code} {exc.message} {exc.data}"
        return "no error"

    async with wire_to(server, initialize=False) as peer:
        await peer.initialize(capabilities={"roots": {}})
        await peer.send(frame(1, "tools/call", {"name": "careful"}))
        nested = await peer.recv()
        await peer.send(
            {
                "jsonrpc": "2.0",
                "id": nested["id"],
                "error": {"code": -1, "message": "No roots today", "data": {"why": "x"}},
            }
        )
        answer = await peer.recv()
    assert answer["result"]["content"] == [
        {"type": "text", "text": "-1 No roots today {'why': 'x'}"}
    ]


@pytest.mark.invariant(8)
async def test_a_client_error_in_other_handlers_is_an_internal_error(
    autojump_clock: Any,
) -> None:
    server = Server("nested")

    @server.prompt()
    async def rooted(ctx: Context) -> str:
        return str(await ctx.list_roots())

    @server.resource("test://roots")
    async def roots(ctx: Context) -> str:
        return str(await ctx.list_roots())

    async with wire_to(server, initialize=False) as peer:
        await peer.initialize(capabilities={"roots": {}})
        for rid, method, params in [
            (1, "prompts/get", {"name": "rooted"}),
            (2, "resources/read", {"uri": "test://roots"}),
        ]:
            await peer.send(frame(rid, method, params))
            nested = await peer.recv()
            assert nested["method"] == "roots/list"
            await peer.send(
                {
                    "jsonrpc": "2.0",
                    "id": nested["id"],
                    "error": {"code": -32602, "message": "Invalid params", "data": "secret"},
                }
            )
            assert await peer.recv() == {
                "jsonrpc": "2.0",
                "id": rid,
                "error": {"code": -32603, "message": "Internal error"},
            }


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
async def test_context_exposes_the_connection(version: str) -> None:
    server = Server("ctx")
    seen: list[Any] = []

    @server.tool()
    async def who(ctx: Context) -> str:
        seen.append(
            (
                ctx.method,
                ctx.request_id,
                ctx.protocol_version,
                ctx.client_info.name if ctx.client_info else None,
                ctx.meta,
                ctx.cancelled,
            )
        )
        return ""

    async with wire_to(server, initialize=False) as peer:
        await peer.initialize(version)
        await peer.request("r", "tools/call", {"name": "who", "_meta": {"trace": "t"}})
    assert seen == [("tools/call", "r", version, "wire", {"trace": "t"}, False)]
