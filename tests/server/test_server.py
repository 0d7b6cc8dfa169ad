"""The server API end to end: registration, results, errors, lists, capabilities, instrumentation.

Most tests go through ``open_client(server)``; where the exact frames matter they use the raw
peer from ``tests/wire.py``. Context features (logging, progress, nested requests,
notifications) live in ``test_context.py``.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal, overload

import attrs
import orjson
import pytest
import trio
import trio.testing

from trio_mcp import (
    BlobResourceContents,
    CallToolResult,
    Client,
    Completion,
    CompletionArgument,
    CompletionContext,
    Context,
    EmbeddedResource,
    GetPromptResult,
    Icon,
    ImageContent,
    MiddlewareContext,
    PaginationError,
    PromptMessage,
    PromptReference,
    ProtocolError,
    RequestRecord,
    ResourceTemplateReference,
    Server,
    TextContent,
    TextResourceContents,
    ToolError,
    open_client,
)
from trio_mcp.lowlevel import memory_transport_pair
from trio_mcp.middleware import TimingMiddleware
from trio_mcp.protocol import to_wire
from trio_mcp.protocol._types import ListToolsResult
from trio_mcp.server._registry import encode_cursor, page

from ..wire import WirePeer, wire_to

INVALID_PARAMS = -32602
METHOD_NOT_FOUND = -32601
RESOURCE_NOT_FOUND = -32002


def frame(rid: Any, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return message


async def error_of(peer: WirePeer, method: str, params: Any = None, rid: Any = 1) -> Any:
    """Send a request that must fail; return its error object."""
    response = await peer.request(rid, method, params)
    assert response["id"] == rid
    assert "result" not in response, response
    return response["error"]


async def result_of(peer: WirePeer, method: str, params: Any = None, rid: Any = 1) -> Any:
    response = await peer.request(rid, method, params)
    assert response["id"] == rid
    assert "error" not in response, response
    return response["result"]


# -- tools: schemas ---------------------------------------------------------------------------


@attrs.define
class Point:
    x: int
    y: int = 0


def schema_server() -> Server:
    server = Server("schemas")

    @server.tool()
    async def add(a: int, b: int = 2) -> int:
        """Add two numbers.

        Args:
            a: The first number.
            b: The second number.
        """
        return a + b

    @server.tool()
    async def greet(
        name: str, mode: Literal["loud", "quiet"] = "quiet", tags: list[str] | None = None
    ) -> str:
        return name.upper() if mode == "loud" else name

    @server.tool()
    async def move(p: Point, ctx: Context) -> Point:
        return Point(p.x + 1, p.y + 1)

    return server


async def test_input_schemas_from_hints_are_exact_in_tools_list() -> None:
    async with open_client(schema_server()) as client:
        tools = {tool.name: to_wire(tool) for tool in await client.list_tools()}
    assert tools["add"] == {
        "name": "add",
        "description": "Add two numbers.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "a": {"type": "integer", "description": "The first number."},
                "b": {"type": "integer", "description": "The second number.", "default": 2},
            },
            "required": ["a"],
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {"result": {"type": "integer"}},
            "required": ["result"],
            "x-fastmcp-wrap-result": True,
        },
    }
    # A str return is plain text: no outputSchema.
    assert tools["greet"] == {
        "name": "greet",
        "inputSchema": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "mode": {"type": "string", "enum": ["loud", "quiet"], "default": "quiet"},
                "tags": {
                    "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                    "default": None,
                },
            },
            "required": ["name"],
            "additionalProperties": False,
        },
    }
    # The Context parameter is not part of the schema; an attrs class is inlined.
    assert tools["move"]["inputSchema"] == {
        "type": "object",
        "properties": {
            "p": {
                "type": "object",
                "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
                "required": ["x"],
                "additionalProperties": False,
            }
        },
        "required": ["p"],
        "additionalProperties": False,
    }
    assert tools["move"]["outputSchema"] == {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
        "required": ["x", "y"],
        "additionalProperties": False,
    }


async def test_structured_output_with_text_fallback() -> None:
    async with open_client(schema_server()) as client:
        wrapped = await client.call_tool("add", {"a": 1})
        assert wrapped.structured_content == {"result": 3}
        assert wrapped.content == [TextContent("3")]
        assert not wrapped.is_error
        obj = await client.call_tool("move", {"p": {"x": 1}})
        assert obj.structured_content == {"x": 2, "y": 1}
        assert len(obj.content) == 1
        assert isinstance(obj.content[0], TextContent)
        assert orjson.loads(obj.content[0].text) == {"x": 2, "y": 1}
        text = await client.call_tool("greet", {"name": "ada", "mode": "loud"})
        assert text.content == [TextContent("ADA")]
        assert text.structured_content is None


async def test_explicit_input_schema_is_advertised_and_enforced() -> None:
    server = Server("explicit")
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string", "minLength": 1}},
        "required": ["q"],
    }
    calls: list[Any] = []

    @server.tool(input_schema=schema, description="Search.")
    async def search(q: Any) -> str:
        calls.append(q)
        return f"found {q}"

    async with open_client(server) as client:
        [tool] = await client.list_tools()
        assert tool.input_schema == schema
        assert tool.description == "Search."
        result = await client.call_tool("search", {"q": "trio"})
        assert result.content == [TextContent("found trio")]
        missing = await client.call_tool("search", {})
    assert missing.is_error
    assert missing.content == [
        TextContent("Invalid arguments for tool search: missing required argument 'q'")
    ]
    assert calls == ["trio"]


async def test_explicit_output_schema_replaces_the_derived_one() -> None:
    server = Server("explicit-out")
    out = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    @server.tool(output_schema=out)
    async def count() -> CallToolResult:
        return CallToolResult(content=[TextContent('{"n": 1}')], structured_content={"n": 1})

    async with open_client(server) as client:
        [tool] = await client.list_tools()
        assert tool.output_schema == out
        result = await client.call_tool("count")
    assert result.structured_content == {"n": 1}


# -- tools: execution and results -------------------------------------------------------------


async def test_sync_tool_runs_in_a_worker_thread_unless_told_otherwise() -> None:
    server = Server("threads")
    threads: dict[str, threading.Thread] = {}

    @server.tool()
    def threaded() -> str:
        threads["threaded"] = threading.current_thread()
        return "t"

    @server.tool(in_thread=False)
    def inline() -> str:
        threads["inline"] = threading.current_thread()
        return "i"

    async with open_client(server) as client:
        assert (await client.call_tool("threaded")).content == [TextContent("t")]
        assert (await client.call_tool("inline")).content == [TextContent("i")]
    assert threads["threaded"] is not threading.main_thread()
    assert threads["inline"] is threading.main_thread()


async def test_tools_returning_content_blocks_results_and_none() -> None:
    server = Server("blocks")
    image = ImageContent(base64.b64encode(b"png").decode(), "image/png")
    embedded = EmbeddedResource(TextResourceContents(uri="test://doc", text="body"))

    @server.tool()
    async def one_block() -> ImageContent:
        return image

    @server.tool()
    async def many_blocks() -> list[TextContent | ImageContent | EmbeddedResource]:
        return [TextContent("caption"), image, embedded]

    @server.tool()
    async def full() -> CallToolResult:
        return CallToolResult(content=[TextContent("custom")], meta={"k": "v"})

    @server.tool()
    async def nothing() -> None:
        return None

    async with wire_to(server) as peer:
        # None of these return types is structured: no outputSchema.
        listed = (await result_of(peer, "tools/list"))["tools"]
        assert [t["name"] for t in listed] == ["one_block", "many_blocks", "full", "nothing"]
        assert all("outputSchema" not in t for t in listed)
        assert await result_of(peer, "tools/call", {"name": "one_block"}) == {
            "content": [{"type": "image", "data": image.data, "mimeType": "image/png"}]
        }
        assert await result_of(peer, "tools/call", {"name": "many_blocks"}) == {
            "content": [
                {"type": "text", "text": "caption"},
                {"type": "image", "data": image.data, "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "test://doc", "text": "body"}},
            ]
        }
        assert await result_of(peer, "tools/call", {"name": "full"}) == {
            "content": [{"type": "text", "text": "custom"}],
            "_meta": {"k": "v"},
        }
        assert await result_of(peer, "tools/call", {"name": "nothing"}) == {"content": []}


@pytest.mark.invariant(8)
async def test_tool_error_becomes_an_is_error_result_with_its_message() -> None:
    server = Server("errors")

    @server.tool()
    async def quota() -> str:
        raise ToolError("Quota exceeded: try again tomorrow")

    async with wire_to(server) as peer:
        assert await result_of(peer, "tools/call", {"name": "quota"}) == {
            "content": [{"type": "text", "text": "Quota exceeded: try again tomorrow"}],
            "isError": True,
        }


async def test_a_tool_answers_and_fails_alike_whether_it_blocks_first_or_not() -> None:
    # A tool's first step is taken as the call is routed: one that ends there and one that
    # blocks first must give the same results.
    server = Server("steps")

    @server.tool()
    async def say(text: str, block: bool) -> str:
        if block:
            await trio.lowlevel.checkpoint()
        if text == "fail":
            raise ToolError("failed as asked")
        return text

    async with wire_to(server) as peer:
        for block in (False, True):
            said = await result_of(
                peer, "tools/call", {"name": "say", "arguments": {"text": "hi", "block": block}}
            )
            assert said == {"content": [{"type": "text", "text": "hi"}]}
            failed = await result_of(
                peer, "tools/call", {"name": "say", "arguments": {"text": "fail", "block": block}}
            )
            assert failed == {
                "content": [{"type": "text", "text": "failed as asked"}],
                "isError": True,
            }


async def awaited_while_a_call_runs(*middleware: Any) -> Any:
    """What the task of a ``tools/call`` awaits while its async tool runs."""
    server = Server("direct", middleware=middleware)
    parked = trio.Event()
    release = trio.Event()
    tasks: list[trio.lowlevel.Task] = []

    @server.tool()
    async def wait(text: str) -> str:
        tasks.append(trio.lowlevel.current_task())
        parked.set()
        await release.wait()
        return text

    async with wire_to(server) as peer:
        await peer.send(frame(1, "tools/call", {"name": "wait", "arguments": {"text": "x"}}))
        await parked.wait()
        awaited = getattr(tasks[0].coro, "cr_await", None)
        release.set()
        assert (await peer.recv())["result"] == {"content": [{"type": "text", "text": "x"}]}
    return getattr(awaited, "cr_code", None) is wait.__code__


async def test_the_request_task_awaits_an_async_tool_coroutine_itself_when_nothing_wraps() -> None:
    # Nothing of ours is held per call between the request's task and the tool while it runs;
    # with a middleware the call is wrapped (and answered alike).
    assert await awaited_while_a_call_runs() is True
    assert await awaited_while_a_call_runs(TimingMiddleware()) is False


@pytest.mark.invariant(8)
async def test_a_directly_awaited_tool_keeps_every_answer_of_a_wrapped_one() -> None:
    # Results, tool errors, hidden internals, schema failures (SEP-1303), protocol errors and
    # structured output: the same through the direct route and through a wrapped one.
    def build(*middleware: Any) -> Server:
        server = Server("answers", middleware=middleware)

        @server.tool()
        async def act(how: str, n: int = 0) -> str:
            await trio.lowlevel.checkpoint()
            if how == "tool-error":
                raise ToolError("refused as asked")
            if how == "crash":
                raise RuntimeError("secret detail")
            if how == "protocol":
                raise ProtocolError(INVALID_PARAMS, "bad as asked")
            return f"{how} {n}"

        @server.tool()
        async def point(x: int) -> Point:
            return Point(x)

        return server

    calls: list[dict[str, Any]] = [
        {"name": "act", "arguments": {"how": "fine", "n": 2}},
        {"name": "act", "arguments": {"how": "tool-error"}},
        {"name": "act", "arguments": {"how": "crash"}},
        {"name": "act", "arguments": {"how": "protocol"}},
        {"name": "act", "arguments": {"how": "fine", "n": "two"}},
        {"name": "act", "arguments": {"n": 1}},
        {"name": "act", "arguments": ["not", "an", "object"]},
        {"name": "point", "arguments": {"x": 3}},
        {"name": "nothing", "arguments": {}},
    ]
    seen: list[list[Any]] = []
    for server in (build(), build(TimingMiddleware())):
        answers = []
        async with wire_to(server) as peer:
            for rid, params in enumerate(calls, start=1):
                response = await peer.request(rid, "tools/call", params)
                answers.append(response.get("result", response.get("error")))
        seen.append(answers)
    direct, wrapped = seen
    assert direct == wrapped
    assert direct[0] == {"content": [{"type": "text", "text": "fine 2"}]}
    assert direct[1] == {"content": [{"type": "text", "text": "refused as asked"}], "isError": True}
    assert "secret" not in str(direct[2]) and direct[2]["isError"] is True
    assert direct[3]["code"] == INVALID_PARAMS
    assert direct[4]["isError"] is True and "Invalid arguments for tool act" in str(direct[4])
    assert direct[5]["isError"] is True and "how" in str(direct[5])
    assert direct[6]["code"] == INVALID_PARAMS
    assert direct[7]["structuredContent"] == {"x": 3, "y": 0}
    assert direct[8]["code"] == INVALID_PARAMS


async def test_a_call_in_flight_keeps_its_tool_when_the_name_is_registered_again() -> None:
    server = Server("again")
    release = trio.Event()
    parked = trio.Event()

    @server.tool(name="t")
    async def first() -> Point:
        parked.set()
        await release.wait()
        return Point(1)

    async with wire_to(server) as peer:
        await peer.send(frame(7, "tools/call", {"name": "t"}))
        await parked.wait()
        server.remove_tool("t")

        @server.tool(name="t")
        async def second() -> str:
            return "second"

        await peer.send(frame(8, "tools/call", {"name": "t"}))
        release.set()
        answers: dict[int, Any] = {}
        while len(answers) < 2:
            message = await peer.recv()
            if "id" in message:
                answers[message["id"]] = message["result"]
    assert answers[7]["structuredContent"] == {"x": 1, "y": 0}
    assert answers[8] == {"content": [{"type": "text", "text": "second"}]}


@pytest.mark.invariant(8)
async def test_unexpected_exception_is_an_is_error_result_that_hides_the_details() -> None:
    server = Server("errors")
    secret = "postgres://admin:hunter2@10.0.0.7/prod"

    @server.tool()
    async def crash() -> str:
        raise RuntimeError(f"could not connect to {secret}")

    @server.tool()
    def crash_in_thread() -> str:
        raise KeyError(secret)

    async with wire_to(server) as peer:
        for rid, name in enumerate(("crash", "crash_in_thread")):
            await peer.send(frame(rid, "tools/call", {"name": name}))
            raw = await peer.transport.receive()
            assert b"hunter2" not in raw and b"10.0.0.7" not in raw
            response = orjson.loads(raw)
            assert response["id"] == rid
            result = response["result"]
            assert result["isError"] is True
            [block] = result["content"]
            assert block["type"] == "text"
            assert name in block["text"]
            assert "internal error" in block["text"]


@pytest.mark.invariant(8)
async def test_prompt_and_resource_failures_are_generic_internal_errors() -> None:
    server = Server("errors")
    secret = "api-key-7f3a9c"

    @server.prompt()
    async def broken() -> str:
        raise RuntimeError(secret)

    @server.resource("test://broken")
    def broken_resource() -> str:
        raise OSError(secret)

    async with wire_to(server) as peer:
        for rid, method, params in [
            (1, "prompts/get", {"name": "broken"}),
            (2, "resources/read", {"uri": "test://broken"}),
        ]:
            await peer.send(frame(rid, method, params))
            raw = await peer.transport.receive()
            assert secret.encode() not in raw
            assert orjson.loads(raw) == {
                "jsonrpc": "2.0",
                "id": rid,
                "error": {"code": -32603, "message": "Internal error"},
            }


async def test_tool_raising_protocol_error_answers_with_that_error() -> None:
    server = Server("errors")

    @server.tool()
    async def picky() -> str:
        raise ProtocolError(INVALID_PARAMS, "Invalid params: no such region", {"region": "x"})

    async with wire_to(server) as peer:
        assert await error_of(peer, "tools/call", {"name": "picky"}) == {
            "code": INVALID_PARAMS,
            "message": "Invalid params: no such region",
            "data": {"region": "x"},
        }


@pytest.mark.invariant(8)
async def test_unknown_tool_is_invalid_params() -> None:
    async with wire_to(schema_server()) as peer:
        error = await error_of(peer, "tools/call", {"name": "nope", "arguments": {}})
    assert error["code"] == INVALID_PARAMS
    assert "nope" in error["message"]


@pytest.mark.invariant(8)
async def test_bad_arguments_are_a_tool_error_with_an_actionable_message() -> None:
    """SEP-1303: the model must see what is wrong to correct its call, so not a protocol error."""
    async with open_client(schema_server()) as client:
        cases: list[tuple[dict[str, Any], list[str]]] = [
            ({"a": "one"}, ["'a'", "integer", "string"]),
            ({}, ["missing", "'a'"]),
            ({"a": 1, "c": 3}, ["unexpected", "'c'"]),
            ({"a": 1.5}, ["'a'", "integer"]),
        ]
        for arguments, words in cases:
            result = await client.call_tool("add", arguments)
            assert result.is_error
            [block] = result.content
            assert isinstance(block, TextContent)
            assert block.text.startswith("Invalid arguments for tool add: ")
            for word in words:
                assert word in block.text, (arguments, block.text)
        nested = await client.call_tool("move", {"p": {"x": 1, "z": 2}})
        assert nested.is_error
        assert nested.content == [
            TextContent("Invalid arguments for tool move: unexpected argument 'p.z'")
        ]


@pytest.mark.parametrize("arguments", [[1, 2], "a=1", 5, True])
async def test_arguments_that_are_not_an_object_are_invalid_params(arguments: Any) -> None:
    async with wire_to(schema_server()) as peer:
        error = await error_of(peer, "tools/call", {"name": "add", "arguments": arguments})
    assert error["code"] == INVALID_PARAMS
    assert "arguments" in error["message"]


async def test_tool_name_must_be_a_string() -> None:
    async with wire_to(schema_server()) as peer:
        error = await error_of(peer, "tools/call", {"arguments": {}})
        assert error["code"] == INVALID_PARAMS
        error = await error_of(peer, "tools/call", {"name": 5})
        assert error["code"] == INVALID_PARAMS


async def test_duplicate_tool_name_is_refused() -> None:
    server = schema_server()
    with pytest.raises(ValueError, match="add"):

        @server.tool(name="add")
        async def other() -> str:
            return ""


async def test_tool_removed_is_unknown() -> None:
    server = schema_server()
    async with open_client(server) as client:
        server.remove_tool("greet")
        assert {t.name for t in await client.list_tools()} == {"add", "move"}
        with pytest.raises(ProtocolError) as info:
            await client.call_tool("greet", {"name": "x"})
    assert info.value.code == INVALID_PARAMS


# -- a blocked thread does not block the connection ---------------------------------------------


async def test_a_sleeping_sync_tool_does_not_delay_ping_or_other_calls() -> None:
    server = Server("blocking")
    started = trio.Event()
    release = threading.Event()
    finished = threading.Event()

    @server.tool()
    def sleepy() -> str:
        trio.from_thread.run_sync(started.set)
        time.sleep(0.5)
        # Held until the test has seen the other answers, so the order below is not a race.
        release.wait(10)
        finished.set()
        return "slept"

    @server.tool()
    async def quick() -> str:
        return "quick"

    with trio.fail_after(30):
        async with wire_to(server) as peer:
            await peer.send(frame("slow", "tools/call", {"name": "sleepy"}))
            await started.wait()
            await peer.send(frame("p", "ping"))
            await peer.send(frame("q", "tools/call", {"name": "quick"}))
            first, second = await peer.recv(), await peer.recv()
            assert not finished.is_set()
            assert {first["id"], second["id"]} == {"p", "q"}
            answers = {first["id"]: first, second["id"]: second}
            assert answers["p"] == {"jsonrpc": "2.0", "id": "p", "result": {}}
            assert answers["q"]["result"]["content"] == [{"type": "text", "text": "quick"}]
            release.set()
            last = await peer.recv()
            assert finished.is_set()
            assert last["id"] == "slow"
            assert last["result"]["content"] == [{"type": "text", "text": "slept"}]


# -- prompts ----------------------------------------------------------------------------------


def prompt_server() -> Server:
    server = Server("prompts")

    @server.prompt(title="Code review")
    async def review(code: str, language: str = "python") -> str:
        """Review some code.

        Args:
            code: The code to review.
            language: Its language.
        """
        return f"Review this {language}: {code}"

    @server.prompt()
    def conversation(topic: str) -> list[Any]:
        return [
            PromptMessage(role="assistant", content=TextContent("Hello")),
            f"Tell me about {topic}",
            ImageContent("AAAA", "image/png"),
        ]

    @server.prompt(name="full", description="Prebuilt.")
    async def full_prompt(ctx: Context) -> GetPromptResult:
        return GetPromptResult(
            messages=[PromptMessage(role="user", content=TextContent(ctx.method))],
            description="from the handler",
        )

    return server


async def test_prompt_arguments_come_from_parameters() -> None:
    async with wire_to(prompt_server()) as peer:
        listed = (await result_of(peer, "prompts/list"))["prompts"]
    assert listed == [
        {
            "name": "review",
            "title": "Code review",
            "description": "Review some code.",
            "arguments": [
                {"name": "code", "description": "The code to review.", "required": True},
                {"name": "language", "description": "Its language.", "required": False},
            ],
        },
        {"name": "conversation", "arguments": [{"name": "topic", "required": True}]},
        # No arguments (the Context parameter is not one): the field is absent.
        {"name": "full", "description": "Prebuilt."},
    ]


async def test_prompt_return_types() -> None:
    async with open_client(prompt_server()) as client:
        review = await client.get_prompt("review", {"code": "x = 1"})
        assert review.messages == [
            PromptMessage(role="user", content=TextContent("Review this python: x = 1"))
        ]
        rust = await client.get_prompt("review", {"code": "let x", "language": "rust"})
        assert rust.messages[0].content == TextContent("Review this rust: let x")
        conversation = await client.get_prompt("conversation", {"topic": "trio"})
        assert conversation.messages == [
            PromptMessage(role="assistant", content=TextContent("Hello")),
            PromptMessage(role="user", content=TextContent("Tell me about trio")),
            PromptMessage(role="user", content=ImageContent("AAAA", "image/png")),
        ]
        full = await client.get_prompt("full")
        assert full.description == "from the handler"
        assert full.messages == [PromptMessage(role="user", content=TextContent("prompts/get"))]


async def test_prompt_argument_errors_are_invalid_params() -> None:
    async with wire_to(prompt_server()) as peer:
        missing = await error_of(peer, "prompts/get", {"name": "review"})
        assert missing["code"] == INVALID_PARAMS
        assert "code" in missing["message"] and "Missing" in missing["message"]
        unknown = await error_of(
            peer, "prompts/get", {"name": "review", "arguments": {"code": "x", "style": "y"}}
        )
        assert unknown["code"] == INVALID_PARAMS
        assert "style" in unknown["message"]
        not_strings = await error_of(
            peer, "prompts/get", {"name": "review", "arguments": {"code": 5}}
        )
        assert not_strings["code"] == INVALID_PARAMS
        no_prompt = await error_of(peer, "prompts/get", {"name": "nope"})
        assert no_prompt["code"] == INVALID_PARAMS
        assert "nope" in no_prompt["message"]


async def test_duplicate_prompt_name_is_refused() -> None:
    server = prompt_server()
    with pytest.raises(ValueError, match="review"):

        @server.prompt(name="review")
        async def again() -> str:
            return ""


# -- resources --------------------------------------------------------------------------------


def resource_server() -> Server:
    server = Server("resources")

    @server.resource("test://readme", mime_type="text/markdown", description="The readme.")
    async def readme() -> str:
        return "# Hello"

    @server.resource("test://logo")
    def logo() -> bytes:
        return b"\x89PNG\x00\xff"

    @server.resource("test://data")
    async def data() -> dict[str, int]:
        return {"n": 1}

    @server.resource("test://users/{user_id}/posts/{post_id}", mime_type="text/plain")
    async def post(user_id: str, post_id: str) -> str:
        return f"post {post_id} of {user_id}"

    @server.resource("test://files/{+path}", name="file")
    async def file(path: str, ctx: Context) -> BlobResourceContents:
        return BlobResourceContents(uri=str(ctx.params["uri"]), blob="AA==", mime_type="x/y")

    return server


async def test_static_resources_text_bytes_and_json() -> None:
    async with wire_to(resource_server()) as peer:
        assert await result_of(peer, "resources/read", {"uri": "test://readme"}) == {
            "contents": [{"uri": "test://readme", "mimeType": "text/markdown", "text": "# Hello"}]
        }
        logo = await result_of(peer, "resources/read", {"uri": "test://logo"})
        assert logo == {
            "contents": [
                {
                    "uri": "test://logo",
                    "mimeType": "application/octet-stream",
                    "blob": base64.b64encode(b"\x89PNG\x00\xff").decode(),
                }
            ]
        }
        data = await result_of(peer, "resources/read", {"uri": "test://data"})
        [content] = data["contents"]
        assert content["mimeType"] == "application/json"
        assert orjson.loads(content["text"]) == {"n": 1}
        listed = (await result_of(peer, "resources/list"))["resources"]
    assert listed == [
        {
            "uri": "test://readme",
            "name": "readme",
            "description": "The readme.",
            "mimeType": "text/markdown",
        },
        {"uri": "test://logo", "name": "logo"},
        {"uri": "test://data", "name": "data"},
    ]


async def test_resource_templates_bind_variables() -> None:
    async with open_client(resource_server()) as client:
        templates = await client.list_resource_templates()
        assert [to_wire(t) for t in templates] == [
            {
                "uriTemplate": "test://users/{user_id}/posts/{post_id}",
                "name": "post",
                "mimeType": "text/plain",
            },
            {"uriTemplate": "test://files/{+path}", "name": "file"},
        ]
        read = await client.read_resource("test://users/ada/posts/42")
        assert read.contents == [
            TextResourceContents(
                uri="test://users/ada/posts/42", text="post 42 of ada", mime_type="text/plain"
            )
        ]
        deep = await client.read_resource("test://files/a/b/c.txt")
        assert deep.contents == [
            BlobResourceContents(uri="test://files/a/b/c.txt", blob="AA==", mime_type="x/y")
        ]
        # A simple {variable} does not match across "/".
        with pytest.raises(ProtocolError) as info:
            await client.read_resource("test://users/ada/x/posts/42")
        assert info.value.code == RESOURCE_NOT_FOUND


async def test_template_parameters_must_match_its_variables() -> None:
    server = Server("bad")
    with pytest.raises(TypeError, match="user_id"):

        @server.resource("test://users/{user_id}")
        async def user(name: str) -> str:
            return name


async def test_unknown_resource_is_resource_not_found_with_the_uri() -> None:
    async with wire_to(resource_server()) as peer:
        assert await error_of(peer, "resources/read", {"uri": "test://missing"}) == {
            "code": RESOURCE_NOT_FOUND,
            "message": "Resource not found",
            "data": {"uri": "test://missing"},
        }
        no_uri = await error_of(peer, "resources/read", {})
        assert no_uri["code"] == INVALID_PARAMS


# -- completion -------------------------------------------------------------------------------


async def test_completion_values_are_capped_at_100() -> None:
    server = prompt_server()
    seen: list[tuple[Any, Any, Any]] = []

    @server.completion()
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> list[str]:
        seen.append((ref, argument, context))
        if argument.name == "language":
            return [v for v in ("python", "perl", "rust") if v.startswith(argument.value)]
        return [f"v{i}" for i in range(250)]

    async with open_client(server) as client:
        few = await client.complete(PromptReference("review"), "language", "p")
        assert few.values == ["python", "perl"]
        assert few.total == 2 and few.has_more is False
        many = await client.complete(
            ResourceTemplateReference("test://x/{id}"),
            "id",
            "",
            context_arguments={"other": "1"},
        )
        assert many.values == [f"v{i}" for i in range(100)]
        assert many.total == 250 and many.has_more is True
    assert seen[0] == (
        PromptReference("review"),
        CompletionArgument(name="language", value="p"),
        None,
    )
    assert seen[1] == (
        ResourceTemplateReference("test://x/{id}"),
        CompletionArgument(name="id", value=""),
        CompletionContext(arguments={"other": "1"}),
    )


async def test_a_completion_object_over_100_values_is_capped_too() -> None:
    server = prompt_server()

    @server.completion()
    async def complete(ref: Any, argument: Any, context: Any) -> Completion:
        return Completion(values=[str(i) for i in range(101)])

    async with open_client(server) as client:
        completion = await client.complete(PromptReference("review"), "code", "")
    assert completion.values == [str(i) for i in range(100)]
    assert completion.has_more is True
    assert completion.total == 101


async def test_completion_for_an_unknown_prompt_is_invalid_params() -> None:
    server = prompt_server()
    calls: list[Any] = []

    @server.completion()
    async def complete(ref: Any, argument: Any, context: Any) -> list[str]:
        calls.append(ref)
        return []

    async with wire_to(server) as peer:
        error = await error_of(
            peer,
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "a", "value": ""}},
        )
        assert error["code"] == INVALID_PARAMS
        assert "nope" in error["message"]
        bad_ref = await error_of(
            peer,
            "completion/complete",
            {"ref": {"type": "ref/tool", "name": "x"}, "argument": {"name": "a", "value": ""}},
        )
        assert bad_ref["code"] == INVALID_PARAMS
    assert calls == []


async def test_completion_without_a_handler_is_method_not_found() -> None:
    async with wire_to(prompt_server()) as peer:
        error = await error_of(
            peer,
            "completion/complete",
            {
                "ref": {"type": "ref/prompt", "name": "review"},
                "argument": {"name": "code", "value": ""},
            },
        )
    assert error == {"code": METHOD_NOT_FOUND, "message": "Method not found", "data": error["data"]}
    assert error["data"] == "completion/complete"


# -- initialize: capabilities, instructions, serverInfo ---------------------------------------


def full_server(**options: Any) -> Server:
    server = Server("full", "2.0.0", **options)

    @server.tool()
    async def t() -> str:
        return ""

    @server.prompt()
    async def p() -> str:
        return ""

    @server.resource("test://r")
    async def r() -> str:
        return ""

    @server.completion()
    async def c(ref: Any, argument: Any, context: Any) -> list[str]:
        return []

    return server


async def test_capabilities_for_a_tools_only_server() -> None:
    async with wire_to(schema_server(), initialize=False) as peer:
        response = await peer.initialize()
    assert response["result"]["capabilities"] == {"logging": {}, "tools": {"listChanged": True}}
    assert "instructions" not in response["result"]


async def test_capabilities_for_a_server_with_everything() -> None:
    async with wire_to(full_server(), initialize=False) as peer:
        response = await peer.initialize()
    assert response["result"]["capabilities"] == {
        "logging": {},
        "completions": {},
        "prompts": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "tools": {"listChanged": True},
    }


async def test_a_template_alone_enables_resources() -> None:
    server = Server("templates")

    @server.resource("test://{x}")
    async def r(x: str) -> str:
        return x

    async with wire_to(server, initialize=False) as peer:
        response = await peer.initialize()
        assert response["result"]["capabilities"] == {
            "logging": {},
            "resources": {"subscribe": True, "listChanged": True},
        }
        error = await error_of(peer, "tools/list")
    assert error["code"] == METHOD_NOT_FOUND


async def test_methods_of_absent_capabilities_are_method_not_found() -> None:
    async with wire_to(Server("empty")) as peer:
        for method, params in [
            ("tools/list", None),
            ("tools/call", {"name": "x"}),
            ("prompts/list", None),
            ("prompts/get", {"name": "x"}),
            ("resources/list", None),
            ("resources/read", {"uri": "x"}),
            ("resources/subscribe", {"uri": "x"}),
        ]:
            error = await error_of(peer, method, params)
            assert error == {
                "code": METHOD_NOT_FOUND,
                "message": "Method not found",
                "data": method,
            }
        # Logging is always there.
        assert await result_of(peer, "logging/setLevel", {"level": "info"}) == {}


def described_server() -> Server:
    return Server(
        "described",
        "3.1.4",
        title="Described Server",
        description="A server with everything in its serverInfo.",
        website_url="https://example.com",
        icons=[Icon(src="https://example.com/icon.png", mime_type="image/png")],
        instructions="Call t first.",
    )


async def test_server_info_and_instructions_at_the_latest_version() -> None:
    async with wire_to(described_server(), initialize=False) as peer:
        result = (await peer.initialize("2025-11-25"))["result"]
    assert result["protocolVersion"] == "2025-11-25"
    assert result["instructions"] == "Call t first."
    assert result["serverInfo"] == {
        "name": "described",
        "version": "3.1.4",
        "title": "Described Server",
        "description": "A server with everything in its serverInfo.",
        "websiteUrl": "https://example.com",
        "icons": [{"src": "https://example.com/icon.png", "mimeType": "image/png"}],
    }


async def test_server_info_for_2025_06_18_drops_description_and_icons() -> None:
    async with wire_to(described_server(), initialize=False) as peer:
        result = (await peer.initialize("2025-06-18"))["result"]
    assert result["protocolVersion"] == "2025-06-18"
    assert result["instructions"] == "Call t first."
    assert result["serverInfo"] == {
        "name": "described",
        "version": "3.1.4",
        "title": "Described Server",
        "websiteUrl": "https://example.com",
    }


async def test_server_info_for_2024_11_05_drops_instructions_and_title() -> None:
    async with wire_to(described_server(), initialize=False) as peer:
        result = (await peer.initialize("2024-11-05"))["result"]
    assert result == {
        "protocolVersion": "2024-11-05",
        "capabilities": {"logging": {}},
        "serverInfo": {"name": "described", "version": "3.1.4"},
    }


async def test_unknown_version_gets_the_latest_handshake_counter_offer() -> None:
    async with wire_to(described_server(), initialize=False) as peer:
        result = (await peer.initialize("2099-01-01"))["result"]
    assert result["protocolVersion"] == "2025-11-25"


async def test_client_sees_instructions_and_server_info() -> None:
    async with open_client(described_server()) as client:
        assert client.instructions == "Call t first."
        assert client.server_info.title == "Described Server"
        assert client.protocol_version == "2025-11-25"
    async with open_client(described_server(), protocol_version="2024-11-05") as old:
        assert old.instructions is None
        assert old.server_info.title is None
        assert old.protocol_version == "2024-11-05"


async def test_second_initialize_is_refused() -> None:
    async with wire_to(schema_server()) as peer:
        error = await error_of(
            peer,
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "again", "version": "1"},
            },
        )
    assert error["code"] == -32600


# -- pagination -------------------------------------------------------------------------------


def paged_server() -> Server:
    server = Server("paged", page_size=2)
    for i in range(5):

        async def tool_fn() -> str:
            return "x"

        server.tool(name=f"tool{i}")(tool_fn)

        async def prompt_fn() -> str:
            return "x"

        server.prompt(name=f"prompt{i}")(prompt_fn)

        async def resource_fn() -> str:
            return "x"

        server.resource(f"test://r{i}", name=f"r{i}")(resource_fn)

        async def template_fn(v: str) -> str:
            return v

        server.resource(f"test://t{i}/{{v}}", name=f"t{i}")(template_fn)
    return server


async def test_tools_list_pages_with_next_cursor() -> None:
    async with wire_to(paged_server()) as peer:
        names: list[list[str]] = []
        cursor: str | None = None
        for rid in range(10):
            params = {"cursor": cursor} if cursor is not None else None
            result = await result_of(peer, "tools/list", params, rid=rid)
            names.append([t["name"] for t in result["tools"]])
            cursor = result.get("nextCursor")
            if cursor is None:
                break
            assert isinstance(cursor, str)
    assert names == [["tool0", "tool1"], ["tool2", "tool3"], ["tool4"]]


async def test_client_list_methods_walk_every_page() -> None:
    async with open_client(paged_server()) as client:
        first = await client.list_tools_page()
        assert [t.name for t in first.tools] == ["tool0", "tool1"]
        assert first.next_cursor is not None
        second = await client.list_tools_page(first.next_cursor)
        assert [t.name for t in second.tools] == ["tool2", "tool3"]
        assert [t.name for t in await client.list_tools()] == [f"tool{i}" for i in range(5)]
        assert [p.name for p in await client.list_prompts()] == [f"prompt{i}" for i in range(5)]
        assert [r.name for r in await client.list_resources()] == [f"r{i}" for i in range(5)]
        templates = await client.list_resource_templates()
        assert [t.name for t in templates] == [f"t{i}" for i in range(5)]


class Counted(Sequence[int]):
    """A registry's entries that count how many of them a list looks at."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.looked_at = 0

    def __len__(self) -> int:
        return self.size

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...
    def __getitem__(self, index: int | slice) -> int | Sequence[int]:
        if isinstance(index, slice):
            items = range(self.size)[index]
            self.looked_at += len(items)
            return items
        if not 0 <= index < self.size:
            raise IndexError(index)
        self.looked_at += 1
        return index

    def __iter__(self) -> Iterator[int]:
        for item in range(self.size):
            self.looked_at += 1
            yield item


def test_a_page_looks_at_its_own_entries_not_at_the_whole_registry() -> None:
    """A page is cut from the entries without walking or copying the others: the first page
    and the last of 10,000 each look at their 100 and the one after (walking every entry
    before a page made a walk of the whole list cost the square of its length)."""
    for keep in (None, lambda item: item % 2 == 0):
        entries = Counted(10_000)
        chunk, cursor = page(entries, None, 100, keep)
        assert len(chunk) == 100 and cursor is not None
        assert entries.looked_at <= (201 if keep else 100)
        entries = Counted(10_000)
        chunk, cursor = page(entries, encode_cursor(9_800), 100, keep)
        assert chunk[0] == 9_800 and len(chunk) == 100
        assert entries.looked_at <= (201 if keep else 100)


async def test_a_list_shows_its_registry_however_it_was_changed() -> None:
    """A list pages through a copy of the registry's order (:class:`Listing`), taken again
    whenever the registry may have changed: through the server, or in place. Each change
    below keeps the entries of the page asked for, but not their places."""
    server = paged_server()  # two a page

    async def tool_fn() -> str:
        return "x"

    async def names(offset: int = 2) -> list[str]:
        params = {"cursor": encode_cursor(offset)} if offset else None
        async with wire_to(server) as peer:
            return [t["name"] for t in (await result_of(peer, "tools/list", params))["tools"]]

    assert await names() == ["tool2", "tool3"]
    server.remove_tool("tool0")
    server.tool(name="tool5")(tool_fn)  # through the server, the length kept
    assert await names() == ["tool3", "tool4"]
    del server.tools["tool1"]  # in place
    assert await names() == ["tool4", "tool5"]
    # In place, under the same name: the length is the same, the entry is not.
    entry = server.tools["tool2"]
    server.tools["tool2"] = attrs.evolve(entry, tool=attrs.evolve(entry.tool, title="Two"))
    async with wire_to(server) as peer:
        listed = (await result_of(peer, "tools/list"))["tools"]
    assert [(t["name"], t.get("title")) for t in listed] == [("tool2", "Two"), ("tool3", None)]
    server.tools = {"tool5": server.tools["tool5"]}  # replaced
    assert await names(0) == ["tool5"]


async def test_a_listed_entrys_wire_form_is_kept_until_it_shows_another_object() -> None:
    """A list encodes an entry once and shows that form until the entry shows another object
    (replaced in place here, the entry kept), never a stale one."""
    server = paged_server()
    entry = server.tools["tool0"]
    assert entry.wire_of(entry.tool) is entry.wire_of(entry.tool)
    async with wire_to(server) as peer:
        first = (await result_of(peer, "tools/list"))["tools"][0]
        entry.tool = attrs.evolve(entry.tool, title="Zero")
        again = (await result_of(peer, "tools/list", rid=2))["tools"][0]
    assert first["name"] == "tool0" and "title" not in first
    assert again["name"] == "tool0" and again["title"] == "Zero"


def two_described_tools(**options: Any) -> Server:
    server = Server("described", page_size=2, **options)
    for i in range(2):

        async def tool_fn() -> str:
            return "x"

        server.tool(name=f"tool{i}", description=f"Tool {i}")(tool_fn)
    return server


@pytest.mark.parametrize("mounted", [False, True])
async def test_a_middleware_changing_listed_tools_changes_only_its_own_list(mounted: bool) -> None:
    """Lists share each entry's wire form; what a middleware is handed is its own (and a
    parent's mount copies what it takes from the server it mounts)."""

    async def exclaim(ctx: MiddlewareContext, call_next: Any) -> Any:
        result = await call_next(ctx)
        if ctx.method == "tools/list":
            for tool in result["tools"]:
                tool["description"] += "!"
        return result

    if mounted:
        provider = two_described_tools()
        server = Server("parent", middleware=[exclaim])
        server.mount(provider)
    else:
        provider = server = two_described_tools(middleware=[exclaim])
    for rid in (1, 2, 3):
        async with wire_to(server) as peer:
            listed = (await result_of(peer, "tools/list", rid=rid))["tools"]
        assert [t["description"] for t in listed] == ["Tool 0!", "Tool 1!"]
    if mounted:
        async with wire_to(provider) as peer:
            plain = (await result_of(peer, "tools/list"))["tools"]
        assert [t["description"] for t in plain] == ["Tool 0", "Tool 1"]


async def test_page_size_none_returns_everything_at_once() -> None:
    server = paged_server()
    server.page_size = None
    async with wire_to(server) as peer:
        result = await result_of(peer, "tools/list")
    assert len(result["tools"]) == 5
    assert "nextCursor" not in result


@pytest.mark.parametrize(
    "cursor",
    [
        "garbage!",
        base64.urlsafe_b64encode(b"offset:99").decode(),
        base64.urlsafe_b64encode(b"offset:-1").decode(),
        base64.urlsafe_b64encode(b"other:2").decode(),
        5,
    ],
)
async def test_invalid_cursor_is_invalid_params(cursor: Any) -> None:
    async with wire_to(paged_server()) as peer:
        for method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list"):
            error = await error_of(peer, method, {"cursor": cursor})
            assert error["code"] == INVALID_PARAMS, method
            assert "cursor" in error["message"]


@asynccontextmanager
async def repeating_cursor_server(requests: list[Any]) -> AsyncIterator[Client]:
    """A fake server that answers every tools/list with the same nextCursor."""
    ours, theirs = memory_transport_pair()

    async def serve() -> None:
        while True:
            try:
                data = await theirs.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                return
            message = orjson.loads(data)
            if "id" not in message:
                continue
            if message["method"] == "initialize":
                result: dict[str, Any] = {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "looping", "version": "0"},
                }
            else:
                assert message["method"] == "tools/list"
                requests.append((message.get("params") or {}).get("cursor"))
                result = {
                    "tools": [{"name": f"t{len(requests)}", "inputSchema": {"type": "object"}}],
                    "nextCursor": "same",
                }
            await theirs.send(
                orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
            )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        async with open_client(ours) as client:
            yield client
        theirs.close()


async def test_client_refuses_a_repeated_cursor(autojump_clock: Any) -> None:
    requests: list[Any] = []
    async with repeating_cursor_server(requests) as client:
        with pytest.raises(PaginationError, match="same"):
            await client.list_tools()
    assert requests == [None, "same"]


async def test_walk_refuses_a_cursor_seen_earlier_than_the_last_page() -> None:
    pages = {
        None: ListToolsResult(tools=[], next_cursor="a"),
        "a": ListToolsResult(tools=[], next_cursor="b"),
        "b": ListToolsResult(tools=[], next_cursor="a"),
    }
    fetched: list[str | None] = []

    async def fetch(cursor: str | None, **options: Any) -> ListToolsResult:
        fetched.append(cursor)
        await trio.lowlevel.checkpoint()
        return pages[cursor]

    async with open_client(Server("any")) as client:
        with pytest.raises(PaginationError):
            await client._walk(fetch)
    assert fetched == [None, "a", "b"]


# -- custom methods ---------------------------------------------------------------------------


async def test_custom_request_methods() -> None:
    server = Server("custom")
    seen: list[Any] = []

    @server.method("vendor/thing")
    async def thing(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        seen.append((params, ctx.method, ctx.request_id))
        return {"echo": params.get("x"), "ok": True}

    @server.method("vendor/nothing")
    def nothing(params: dict[str, Any]) -> None:
        seen.append("nothing")

    @server.method("vendor/wrong")
    async def wrong(params: dict[str, Any]) -> list[int]:
        return [1]

    async with wire_to(server) as peer:
        assert await result_of(peer, "vendor/thing", {"x": 41}, rid="a") == {
            "echo": 41,
            "ok": True,
        }
        assert await result_of(peer, "vendor/nothing", rid="b") == {}
        # A handler returning something other than a dict is an internal error.
        assert await error_of(peer, "vendor/wrong", rid="c") == {
            "code": -32603,
            "message": "Internal error",
        }
    assert seen == [({"x": 41}, "vendor/thing", "a"), "nothing"]


@pytest.mark.parametrize(
    "name",
    ["tools/call", "initialize", "ping", "completion/complete", "notifications/cancelled"],
)
async def test_redefining_a_builtin_method_is_refused(name: str) -> None:
    server = Server("custom")
    with pytest.raises(ValueError, match=name):
        server.method(name)


async def test_defining_a_custom_method_twice_is_refused() -> None:
    server = Server("custom")

    @server.method("vendor/x")
    async def first(params: dict[str, Any]) -> None:
        await trio.lowlevel.checkpoint()

    with pytest.raises(ValueError, match="vendor/x"):
        server.method("vendor/x")


@pytest.mark.invariant(5)
async def test_custom_notification_runs_without_an_id_and_not_with_one(
    autojump_clock: Any,
) -> None:
    server = Server("custom")
    seen: list[Any] = []
    arrived = trio.Event()

    @server.method("notifications/vendor")
    async def vendor(params: dict[str, Any]) -> None:
        seen.append(params)
        arrived.set()
        await trio.lowlevel.checkpoint()

    async with wire_to(server) as peer:
        await peer.notify("notifications/vendor", {"n": 1})
        await arrived.wait()
        assert seen == [{"n": 1}]
        # A notification has no answer.
        assert await peer.recv_within(5) is None
        error = await error_of(peer, "notifications/vendor", {"n": 2}, rid=9)
        assert error == {
            "code": METHOD_NOT_FOUND,
            "message": "Method not found",
            "data": "notifications/vendor",
        }
        assert await peer.recv_within(5) is None
    assert seen == [{"n": 1}]


async def test_a_notification_handler_cannot_ask_for_a_context() -> None:
    server = Server("custom")
    # It would fail on every notification (there is no request to build it from): refuse early.
    with pytest.raises(TypeError, match="ctx"):

        @server.method("notifications/vendor")
        async def vendor(params: dict[str, Any], ctx: Context) -> None:
            await trio.lowlevel.checkpoint()

    assert "notifications/vendor" not in server.custom_methods


async def test_custom_notifications_run_in_order() -> None:
    server = Server("custom")
    seen: list[int] = []
    done = trio.Event()

    @server.method("notifications/vendor")
    def vendor(params: dict[str, Any]) -> None:
        # A sync handler runs in a worker thread; each one starts after the previous ends.
        seen.append(params["n"])
        if params["n"] == 4:
            trio.from_thread.run_sync(done.set)

    with trio.fail_after(30):
        async with open_client(server) as client:
            for n in range(5):
                await client.notify("notifications/vendor", {"n": n})
            await done.wait()
    assert seen == [0, 1, 2, 3, 4]


# -- instrumentation --------------------------------------------------------------------------


async def test_on_request_records_outcomes() -> None:
    records: list[RequestRecord] = []
    server = schema_server()
    server.on_request = records.append

    @server.tool()
    async def fails() -> str:
        raise ToolError("no")

    @server.method("vendor/crash")
    async def crash(params: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("boom")

    async with wire_to(server) as peer:
        await result_of(peer, "tools/call", {"name": "add", "arguments": {"a": 1}}, rid=1)
        await result_of(peer, "tools/call", {"name": "fails"}, rid=2)
        await error_of(peer, "tools/call", {"name": "nope"}, rid=3)
        await result_of(peer, "tools/call", {"name": "add", "arguments": {}}, rid=4)
        await error_of(peer, "vendor/crash", rid=5)
        await result_of(peer, "ping", rid=6)
        await result_of(peer, "tools/list", rid=7)
    by_id = {r.request_id: r for r in records}
    # initialize is recorded too, under its own id.
    assert by_id["init"].method == "initialize"
    assert {rid: (r.method, r.name, r.error_code, r.tool_error) for rid, r in by_id.items()} == {
        "init": ("initialize", None, None, False),
        1: ("tools/call", "add", None, False),
        2: ("tools/call", "fails", None, True),
        3: ("tools/call", "nope", INVALID_PARAMS, False),
        4: ("tools/call", "add", None, True),
        5: ("vendor/crash", None, -32603, False),
        6: ("ping", None, None, False),
        7: ("tools/list", None, None, False),
    }
    for record in records:
        assert record.duration >= 0
        assert record.cancelled is False and record.cancel_reason is None


async def test_on_request_names_the_resource_uri() -> None:
    records: list[RequestRecord] = []
    server = resource_server()
    server.on_request = records.append
    async with open_client(server) as client:
        await client.read_resource("test://readme")
        with pytest.raises(ProtocolError):
            await client.read_resource("test://missing")
    reads = [r for r in records if r.method == "resources/read"]
    assert [(r.name, r.error_code) for r in reads] == [
        ("test://readme", None),
        ("test://missing", RESOURCE_NOT_FOUND),
    ]


async def test_a_failing_on_request_hook_does_not_break_the_request() -> None:
    def hook(record: RequestRecord) -> None:
        raise RuntimeError("hook bug")

    server = schema_server()
    server.on_request = hook
    async with open_client(server) as client:
        result = await client.call_tool("add", {"a": 1, "b": 1})
    assert result.structured_content == {"result": 2}


# -- ping and unknown methods -----------------------------------------------------------------


async def test_ping() -> None:
    async with wire_to(Server("p")) as peer:
        assert await peer.request(1, "ping") == {"jsonrpc": "2.0", "id": 1, "result": {}}
        assert await peer.request("s", "ping", {}) == {"jsonrpc": "2.0", "id": "s", "result": {}}
    async with open_client(Server("p")) as client:
        await client.ping()


@pytest.mark.invariant(8)
async def test_unknown_method_is_method_not_found_with_the_method_name() -> None:
    async with wire_to(full_server()) as peer:
        assert await peer.request(3, "tools/destroy", {}) == {
            "jsonrpc": "2.0",
            "id": 3,
            "error": {
                "code": METHOD_NOT_FOUND,
                "message": "Method not found",
                "data": "tools/destroy",
            },
        }
        # An unknown notification is ignored: nothing comes back, the connection lives on.
        await peer.notify("notifications/unknown", {})
        assert await peer.request(4, "ping") == {"jsonrpc": "2.0", "id": 4, "result": {}}
    async with open_client(full_server()) as client:
        with pytest.raises(ProtocolError) as info:
            await client.request("vendor/unknown")
    assert info.value.code == METHOD_NOT_FOUND
    assert info.value.data == "vendor/unknown"


def test_prompt_arguments_of_any_annotation_are_listed() -> None:
    server = Server("p")

    @server.prompt()
    def fine(a: str, b: str | None = None, c=None) -> str:
        return a  # pragma: no cover

    assert [a.name for a in server.prompts["fine"].prompt.arguments or ()] == ["a", "b", "c"]
    # A plain string argument's listing carries no schema hint.
    assert all(a.description is None for a in server.prompts["fine"].prompt.arguments or ())


def test_a_resource_cannot_be_registered_twice() -> None:
    server = Server("r")

    @server.resource("test://one")
    def one() -> str:
        return "1"  # pragma: no cover

    with pytest.raises(ValueError, match="already registered"):

        @server.resource("test://one")
        def again() -> str:
            return "2"  # pragma: no cover


async def test_the_context_is_chosen_by_annotation_not_by_name() -> None:
    """A parameter merely named like a context is an ordinary argument; an annotated one, under
    any name and even optional, receives the Context and stays out of the schema."""
    server = Server("opt-in")

    @server.tool()
    async def plain(ctx: str) -> str:
        return f"argument {ctx}"

    @server.tool()
    async def annotated(anything: Context | None = None) -> str:
        assert anything is not None
        return f"context for {anything.method}"

    assert server.tools["plain"].tool.input_schema["required"] == ["ctx"]
    assert (
        "properties" not in server.tools["annotated"].tool.input_schema
        or not (server.tools["annotated"].tool.input_schema["properties"])
    )
    async with open_client(server) as client:
        assert (await client.call_tool("plain", {"ctx": "x"})).content[0].text == "argument x"  # type: ignore[union-attr]
        got = await client.call_tool("annotated", {})
        assert got.content[0].text == "context for tools/call"  # type: ignore[union-attr]


@pytest.mark.invariant(11)
async def test_requests_beyond_max_in_flight_are_refused_until_one_ends() -> None:
    server = Server("busy", max_in_flight=2)
    release = trio.Event()

    @server.tool()
    async def wait() -> str:
        await release.wait()
        return "done"

    async with wire_to(server) as peer:
        call = {"name": "wait", "arguments": {}}
        await peer.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
        await peer.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        refused = await peer.request(3, "ping")
        assert refused["id"] == 3 and refused["error"]["code"] == -32600
        assert "more than 2 requests in flight" in refused["error"]["data"]
        release.set()
        answers = {(await peer.recv())["id"], (await peer.recv())["id"]}
        assert answers == {1, 2}
        assert await peer.request(4, "ping") == {"jsonrpc": "2.0", "id": 4, "result": {}}


def test_engine_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_in_flight"):
        Server("bad", max_in_flight=0)
