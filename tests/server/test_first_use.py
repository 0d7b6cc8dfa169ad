"""What a new user meets first on the server side: resources that read as written, decorators
that work bare and called, and failures with their own clear message (issue 10)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
import trio

from trio_mcp import (
    CallToolResult,
    Context,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestFormParams,
    ElicitResult,
    ProtocolError,
    ResourceNotFound,
    SamplingMessage,
    Server,
    TextContent,
    TextResourceContents,
    ToolError,
    open_client,
)
from trio_mcp.protocol import RESOURCE_NOT_FOUND, to_wire
from trio_mcp.transports import LineTransport

INVALID_PARAMS = -32602
ROOT = Path(__file__).resolve().parents[2]


# -- resources --------------------------------------------------------------------------------


def resources() -> Server:
    server = Server("resources")

    @server.resource("test://numbers")
    async def numbers() -> list[int]:
        return [1, 2, 3]

    @server.resource("test://words")
    def words() -> list[str]:
        return ["a", "b"]

    @server.resource("test://two")
    async def two() -> list[TextResourceContents]:
        return [
            TextResourceContents(uri="test://two#1", text="one"),
            TextResourceContents(uri="test://two#2", text="two"),
        ]

    @server.resource("test://items/{item_id}")
    async def item(item_id: int, ctx: Context) -> dict[str, Any]:
        if item_id > 10:
            raise ResourceNotFound(f"test://items/{item_id}")
        return {"id": item_id, "type": type(item_id).__name__}

    @server.resource("test://names/{name}")
    async def name(name: str) -> str:
        return f"{name}:{type(name).__name__}"

    @server.resource("test://locked")
    async def locked() -> str:
        raise ToolError("the vault is locked until noon")

    @server.prompt
    async def greet(who: str) -> str:
        if who == "nobody":
            raise ToolError("greet needs somebody to greet")
        return f"Hello, {who}"

    return server


async def test_a_list_or_dict_is_one_json_document() -> None:
    async with open_client(resources()) as client:
        [content] = (await client.read_resource("test://numbers")).contents
        assert isinstance(content, TextResourceContents)
        assert content.mime_type == "application/json"
        assert orjson.loads(content.text) == [1, 2, 3]
        [content] = (await client.read_resource("test://words")).contents
        assert isinstance(content, TextResourceContents)
        assert orjson.loads(content.text) == ["a", "b"]
        # Only a list of content objects is several contents.
        several = (await client.read_resource("test://two")).contents
        assert [c.text for c in several if isinstance(c, TextResourceContents)] == ["one", "two"]


async def test_template_variables_are_converted_by_the_type_hint() -> None:
    async with open_client(resources()) as client:
        [content] = (await client.read_resource("test://items/5")).contents
        assert isinstance(content, TextResourceContents)
        assert orjson.loads(content.text) == {"id": 5, "type": "int"}
        # A str parameter keeps the text, even when it reads as a number.
        [content] = (await client.read_resource("test://names/5")).contents
        assert isinstance(content, TextResourceContents)
        assert content.text == "5:str"
        with pytest.raises(ProtocolError) as info:
            await client.read_resource("test://items/five")
    assert info.value.code == INVALID_PARAMS
    assert "item_id" in info.value.message
    assert info.value.data == {"uri": "test://items/five"}


async def test_resource_not_found_is_raised_by_a_handler() -> None:
    assert ResourceNotFound("x://y").code == RESOURCE_NOT_FOUND == -32002
    async with open_client(resources()) as client:
        with pytest.raises(ProtocolError) as info:
            await client.read_resource("test://items/11")
    assert info.value.code == RESOURCE_NOT_FOUND
    assert info.value.message == "Resource not found"
    assert info.value.data == {"uri": "test://items/11"}


async def test_resource_not_found_in_the_modern_era_is_invalid_params() -> None:
    async with open_client(resources(), mode="modern") as client:
        with pytest.raises(ProtocolError) as info:
            await client.read_resource("test://items/11")
        [content] = (await client.read_resource("test://items/3")).contents
    assert info.value.code == INVALID_PARAMS  # SEP-2164 retired -32002
    assert info.value.data == {"uri": "test://items/11"}
    assert isinstance(content, TextResourceContents)
    assert orjson.loads(content.text) == {"id": 3, "type": "int"}


async def test_tool_error_in_a_resource_or_prompt_reaches_the_client() -> None:
    async with open_client(resources()) as client:
        with pytest.raises(ProtocolError) as info:
            await client.read_resource("test://locked")
        assert (info.value.code, info.value.message) == (
            INVALID_PARAMS,
            "the vault is locked until noon",
        )
        with pytest.raises(ProtocolError) as info:
            await client.get_prompt("greet", {"who": "nobody"})
        assert (info.value.code, info.value.message) == (
            INVALID_PARAMS,
            "greet needs somebody to greet",
        )


# -- decorators, bare and called --------------------------------------------------------------


async def test_every_decorator_works_bare_and_called() -> None:
    server = Server("decorators")

    @server.tool
    async def bare_tool() -> str:
        return "bare tool"

    @server.tool("named_tool")
    async def tool_under_another_name() -> str:
        return "named tool"

    @server.prompt
    async def bare_prompt() -> str:
        return "bare prompt"

    @server.prompt()
    async def called_prompt() -> str:
        return "called prompt"

    @server.prompt("named_prompt")
    async def prompt_under_another_name() -> str:
        return "named prompt"

    @server.completion
    async def complete(ref: Any, argument: Any, context: Any) -> list[str]:
        return ["done"]

    # The decorators give the function back, so it can still be called directly.
    assert await bare_prompt() == "bare prompt"
    assert await bare_tool() == "bare tool"
    async with open_client(server) as client:
        assert [t.name for t in await client.list_tools()] == ["bare_tool", "named_tool"]
        assert [p.name for p in await client.list_prompts()] == [
            "bare_prompt",
            "called_prompt",
            "named_prompt",
        ]
        prompt = await client.get_prompt("bare_prompt")
        assert prompt.messages[0].content.text == "bare prompt"  # type: ignore[union-attr]
        assert (await client.call_tool("named_tool")).content[0].text == "named tool"  # type: ignore[union-attr]
        assert client.server_capabilities.completions is not None


def test_decorators_that_need_an_argument_say_so_when_bare() -> None:
    server = Server("bare")

    async def handler() -> str:
        return ""

    with pytest.raises(TypeError, match=r"server\.resource needs the resource's URI.*handler"):
        server.resource(handler)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"server\.method needs the method's name.*handler"):
        server.method(handler)  # type: ignore[arg-type]
    assert not server.resources and not server.custom_methods


# -- failures of nested requests, each with its own message ----------------------------------


@attrs.define
class Contact:
    email: str
    age: int


def nested() -> Server:
    server = Server("nested")

    @server.tool
    async def summarize(ctx: Context) -> str:
        result = await ctx.sample("Summarize this.", max_tokens=10)
        return result.content.text  # type: ignore[union-attr]

    @server.tool
    async def chat(ctx: Context) -> str:
        result = await ctx.sample(
            [
                {"role": "user", "content": {"type": "text", "text": "Hi"}},
                {"role": "assistant", "content": {"type": "text", "text": "Hello"}},
                "How are you?",
            ],
            max_tokens=10,
        )
        return result.content.text  # type: ignore[union-attr]

    @server.tool
    async def bad_chat(ctx: Context) -> str:
        await ctx.sample([{"role": "user", "text": "Hi"}], max_tokens=10)
        return "unreachable"

    @server.tool
    async def contact(ctx: Context) -> str:
        answer = await ctx.elicit("Contact?", Contact)
        return answer.action

    return server


def text_of(result: CallToolResult) -> str:
    [block] = result.content
    assert isinstance(block, TextContent)
    return block.text


async def test_a_client_without_the_capability_gets_a_tool_error_naming_it() -> None:
    async with open_client(nested()) as client:
        sampled = await client.call_tool("summarize")
        elicited = await client.call_tool("contact")
    assert sampled.is_error
    assert text_of(sampled) == (
        "Tool summarize failed: the client did not declare the 'sampling' capability"
    )
    assert elicited.is_error
    assert text_of(elicited) == (
        "Tool contact failed: the client did not declare the 'elicitation' capability"
    )


async def test_an_elicitation_answer_that_fails_validation_says_why() -> None:
    def on_elicit(params: ElicitRequestFormParams) -> ElicitResult:
        return ElicitResult(action="accept", content={"email": "a@b.c", "age": "old"})

    async with open_client(nested(), on_elicit=on_elicit) as client:
        result = await client.call_tool("contact")
    assert result.is_error
    text = text_of(result)
    assert text.startswith("Tool contact failed: the client's elicitation answer is invalid: ")
    assert "age" in text


async def test_sample_takes_messages_as_dicts_in_the_wire_shape_and_strings() -> None:
    requests: list[CreateMessageRequestParams] = []

    def on_sample(params: CreateMessageRequestParams) -> CreateMessageResult:
        requests.append(params)
        return CreateMessageResult(role="assistant", content=TextContent("fine"), model="m")

    async with open_client(nested(), on_sample=on_sample) as client:
        result = await client.call_tool("chat")
        bad = await client.call_tool("bad_chat")
    assert text_of(result) == "fine"
    assert not result.is_error
    assert requests[0].messages == [
        SamplingMessage(role="user", content=TextContent("Hi")),
        SamplingMessage(role="assistant", content=TextContent("Hello")),
        SamplingMessage(role="user", content=TextContent("How are you?")),
    ]
    # A dict of another shape is the server author's mistake: logged, never sent.
    assert len(requests) == 1
    assert bad.is_error


def test_a_malformed_sampling_message_names_the_expected_shape() -> None:
    from trio_mcp.server._context import _sampling_message

    with pytest.raises(TypeError, match=r"message 0 is not a sampling message in the wire shape"):
        _sampling_message(0, {"role": "user", "text": "Hi"})
    with pytest.raises(TypeError, match=r"message 2 is of type int; expected a SamplingMessage"):
        _sampling_message(2, 5)


# -- smaller points: wrapped results, piped requests, the default version --------------------


async def test_a_wrapped_result_carries_the_mark_fastmcp_unwraps() -> None:
    server = Server("wrapped")

    @server.tool
    async def numbers() -> list[int]:
        return [1, 2, 3]

    @server.tool
    async def point() -> dict[str, int]:
        return {"x": 1}

    async with open_client(server) as client:
        tools = {t.name: to_wire(t) for t in await client.list_tools()}
        result = await client.call_tool("numbers")
    # fastmcp's client returns structuredContent["result"] when the schema has this mark
    # (and an object built from the schema, Root(result=[...]), when it has not).
    assert tools["numbers"]["outputSchema"] == {
        "type": "object",
        "properties": {"result": {"type": "array", "items": {"type": "integer"}}},
        "required": ["result"],
        "x-fastmcp-wrap-result": True,
    }
    assert result.structured_content == {"result": [1, 2, 3]}
    # An object result is not wrapped, so it is not marked either.
    assert "x-fastmcp-wrap-result" not in tools["point"]["outputSchema"]


async def test_requests_piped_after_initialize_are_answered_after_it() -> None:
    """Over a real stdio pipe, a client that does not wait for the initialize result.

    Without the hold the order is up to the scheduler, so three processes are tried."""
    for _ in range(3):
        await _pipe_ahead()


async def _pipe_ahead() -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "eager", "version": "0"},
        },
    }
    piped = [{"jsonrpc": "2.0", "id": n, "method": "tools/list"} for n in range(1, 9)]
    data = b"".join(orjson.dumps(m) + b"\n" for m in [initialize, *piped])
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "trio_mcp", "demo"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        with trio.fail_after(30):
            await process.stdin.send_all(data)  # all at once, stdin left open
            lines = LineTransport(process.stdout, process.stdin)
            answers = []
            for _ in range(9):
                frame = await lines.receive()
                assert isinstance(frame, bytes)
                answers.append(orjson.loads(frame))
    finally:
        process.kill()
        await process.wait()
    assert answers[0]["id"] == 0
    assert "protocolVersion" in answers[0]["result"]
    assert sorted(a["id"] for a in answers[1:]) == list(range(1, 9))
    assert all(a["result"]["tools"] for a in answers[1:])


async def test_a_server_given_no_version_says_it_has_none() -> None:
    async with open_client(Server("plain")) as client:
        info = client.server_info
    assert info is not None
    assert (info.name, info.version) == ("plain", "0.0.0")
