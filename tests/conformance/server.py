"""The fixture server for the official MCP conformance suite's server scenarios.

The suite calls fixed names (``test_simple_text``, ``test://static-text``, ``test_simple_prompt``,
...) and checks what comes back; this server offers each of them, written from the scenarios'
expectations. ``python tests/conformance/server.py --port 0`` serves it over Streamable HTTP on
127.0.0.1 with hypercorn's trio worker, prints ``http://127.0.0.1:PORT/mcp`` once it accepts
connections, and runs until SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import struct
import wave
import zlib
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import orjson
import trio

from trio_mcp import (
    AudioContent,
    Completion,
    CompletionArgument,
    CompletionContext,
    Context,
    CreateMessageResult,
    ElicitResult,
    EmbeddedResource,
    ImageContent,
    PromptMessage,
    PromptReference,
    ProtocolError,
    ResourceTemplateReference,
    Server,
    TextContent,
    TextResourceContents,
    ToolError,
)
from trio_mcp.http import HttpOptions, McpHttpApp
from trio_mcp.http._hypercorn import serve_http
from trio_mcp.skills import SkillsExtension

# -- media, made here rather than pasted in -----------------------------------------------------


def _png_pixel() -> bytes:
    """A 1x1 red PNG: the smallest image every client can decode."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 8-bit RGB
    pixels = zlib.compress(b"\x00\xff\x00\x00")  # filter byte, then one red pixel
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def _wav_silence() -> bytes:
    """A 10 ms mono 8 kHz WAV of silence (the audio scenario checks for ``audio/wav``)."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\x00\x00" * 80)
    return buffer.getvalue()


PNG = _png_pixel()
PNG_BASE64 = base64.b64encode(PNG).decode("ascii")
WAV_BASE64 = base64.b64encode(_wav_silence()).decode("ascii")

# -- the HTTP app, with a stream cut for test_reconnection --------------------------------------

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class ReconnectionCut(McpHttpApp):
    """The fixture's HTTP app: it ends the response of a ``test_reconnection`` call after its
    priming event.

    SEP-1699 lets a server close a request's SSE connection and have the client resume with
    ``Last-Event-ID``. trio_mcp has no call for a handler to do that, so the fixture does it
    here, where it looks to trio_mcp exactly like a client that went away: the request keeps
    running and its events wait in the event store for the resume.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await super().__call__(scope, receive, send)
            return
        read: list[Message] = []
        body = b""
        while True:
            message = await receive()
            read.append(message)
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return read.pop(0) if read else await receive()

        if not _is_reconnection_call(body):
            await super().__call__(scope, replay, send)
            return
        cut = False

        async def cutting_send(message: Message) -> None:
            nonlocal cut
            if cut:
                raise OSError("the fixture closed this SSE stream")
            await send(message)
            priming = b"\ndata: \n\n" in message.get("body", b"")
            if message["type"] == "http.response.body" and priming:
                await send({"type": "http.response.body", "body": b""})
                cut = True

        await super().__call__(scope, replay, cutting_send)


def _is_reconnection_call(body: bytes) -> bool:
    try:
        message = json.loads(body)
    except ValueError:
        return False
    return (
        isinstance(message, dict)
        and message.get("method") == "tools/call"
        and isinstance(message.get("params"), dict)
        and message["params"].get("name") == "test_reconnection"
    )


class FixtureServer(Server):
    """The server, with :class:`ReconnectionCut` as its HTTP app."""

    def http_app(self, options: HttpOptions | None = None) -> McpHttpApp:
        return ReconnectionCut(self, options)


server = FixtureServer("trio-mcp-conformance-fixture", "1.0.0")
# Skills (SEP-2640): real skills from a folder, one with subfolders (references/, templates/),
# so the directory read has a subdirectory to show; directoryRead is declared.
server.use(SkillsExtension(Path(__file__).resolve().parent / "skills", strict=True))


# -- tools --------------------------------------------------------------------------------------


@server.tool()
async def test_simple_text() -> str:
    """Answer with one text block."""
    return "This is a simple text response for testing."


@server.tool()
async def test_image_content() -> ImageContent:
    """Answer with a PNG image."""
    return ImageContent(PNG_BASE64, "image/png")


@server.tool()
async def test_audio_content() -> AudioContent:
    """Answer with a WAV clip."""
    return AudioContent(WAV_BASE64, "audio/wav")


@server.tool()
async def test_embedded_resource() -> EmbeddedResource:
    """Answer with a resource carried inline."""
    return EmbeddedResource(
        TextResourceContents(
            uri="test://embedded-resource",
            text="This is an embedded resource content.",
            mime_type="text/plain",
        )
    )


@server.tool()
async def test_multiple_content_types() -> list[TextContent | ImageContent | EmbeddedResource]:
    """Answer with text, an image and an embedded resource together."""
    return [
        TextContent("Multiple content types test:"),
        ImageContent(PNG_BASE64, "image/png"),
        EmbeddedResource(
            TextResourceContents(
                uri="test://mixed-content-resource",
                text=json.dumps({"test": "data", "value": 123}),
                mime_type="application/json",
            )
        ),
    ]


@server.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Send three log messages while running, 50 ms apart."""
    await ctx.info("Tool execution started")
    await trio.sleep(0.05)
    await ctx.info("Tool processing data")
    await trio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return "Tool with logging executed successfully"


@server.tool()
async def test_error_handling() -> str:
    """Always fail, as an ``isError`` result the model would see."""
    raise ToolError("This tool intentionally returns an error for testing")


@server.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Report progress 0, 50 and 100 of 100, 50 ms apart."""
    for step, progress in enumerate((0, 50, 100)):
        if step:
            await trio.sleep(0.05)
        await ctx.report_progress(progress, 100, f"Completed step {progress} of 100")
    return "Tool with progress executed successfully"


@server.tool()
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Ask the client's model to answer ``prompt`` and relay what it said."""
    result = await ctx.sample(prompt, max_tokens=100)
    content = result.content[0] if isinstance(result.content, list) else result.content
    text = content.text if isinstance(content, TextContent) else f"<{content.type} content>"
    return f"LLM response: {text}"


@server.tool()
async def test_elicitation(message: str, ctx: Context) -> str:
    """Ask the user for a username and an email address."""
    result = await ctx.elicit(
        message,
        {
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"},
            },
            "required": ["username", "email"],
        },
    )
    return f"User response: action={result.action}, content={_json(result.content)}"


@server.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Elicit one field of each primitive type, each with a default (SEP-1034)."""
    result = await ctx.elicit(
        "Please review your profile",
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "Your name", "default": "John Doe"},
                "age": {"type": "integer", "description": "Your age", "default": 30},
                "score": {"type": "number", "description": "Your score", "default": 95.5},
                "status": {
                    "type": "string",
                    "description": "Account status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {
                    "type": "boolean",
                    "description": "Whether the account is verified",
                    "default": True,
                },
            },
        },
    )
    return f"Elicitation completed: action={result.action}, content={_json(result.content)}"


@server.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Elicit with each of the five enum shapes of SEP-1330."""
    result = await ctx.elicit(
        "Please choose from each list",
        {
            "type": "object",
            "properties": {
                "untitledSingle": {
                    "type": "string",
                    "description": "Single choice, plain values",
                    "enum": ["option1", "option2", "option3"],
                },
                "titledSingle": {
                    "type": "string",
                    "description": "Single choice, titled values",
                    "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"},
                    ],
                },
                "legacyEnum": {
                    "type": "string",
                    "description": "Single choice, titled the pre-SEP-1330 way",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "description": "Several choices, plain values",
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                },
                "titledMulti": {
                    "type": "array",
                    "description": "Several choices, titled values",
                    "items": {
                        "anyOf": [
                            {"const": "value1", "title": "First Choice"},
                            {"const": "value2", "title": "Second Choice"},
                            {"const": "value3", "title": "Third Choice"},
                        ]
                    },
                },
            },
        },
    )
    return f"Elicitation completed: action={result.action}, content={_json(result.content)}"


#: The schema the ``json-schema-2020-12`` scenario expects to find unchanged in ``tools/list``.
JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@server.tool(
    name="json_schema_2020_12_tool",
    description="Tool with JSON Schema 2020-12 features",
    input_schema=JSON_SCHEMA_2020_12,
)
async def json_schema_2020_12_tool(**arguments: Any) -> str:
    return f"Received: {_json(arguments)}"


@server.tool()
async def test_reconnection(ctx: Context) -> str:
    """Outlive the SSE stream of its own POST, so the client must resume it (SEP-1699).

    :class:`ReconnectionCut` closes the POST's response right after the priming event; the
    log message and the result then reach the client only through a ``Last-Event-ID`` resume.
    """
    await ctx.info("Before disconnect")
    await trio.sleep(0.2)
    await ctx.info("After reconnect")
    return "Reconnection test completed"


def _json(value: Any) -> str:
    return orjson.dumps(value if value is not None else {}).decode()


# -- 2026-07-28: stateless diagnostics ----------------------------------------------------------

NAME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}
CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
}
COLOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"color": {"type": "string"}},
    "required": ["color"],
}


def _content(answer: ElicitResult, field: str) -> Any:
    return answer.content.get(field) if answer.content else None


def _text_of(reply: CreateMessageResult) -> str:
    content = reply.content[0] if isinstance(reply.content, list) else reply.content
    return content.text if isinstance(content, TextContent) else f"<{content.type} content>"


@server.tool()
async def test_missing_capability(ctx: Context) -> str:
    """Need the client's model: a request that did not declare ``sampling`` gets -32021."""
    reply = await ctx.sample("Say hello", max_tokens=20)
    return f"Sampling answered: {_text_of(reply)}"


@server.tool()
async def test_streaming_elicitation(ctx: Context) -> str:
    """Ask the user mid-call: in the modern era an InputRequiredResult, never a request."""
    answer = await ctx.elicit("What is your name?", NAME_SCHEMA)
    return f"Hello, {_content(answer, 'name')}!"


@server.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Log at every call; only a request carrying a log level may see it."""
    await ctx.info("test_logging_tool ran")
    return "Logged (if the request asked for a log level)"


async def _dynamic() -> str:
    """Added and removed again by the list-change triggers."""
    return "dynamic"


@server.tool()
async def test_trigger_tool_change() -> str:
    """Add a tool and take it away again: listeners of tool-list changes hear of it."""
    server.tool(name="test_dynamic_tool")(_dynamic)
    server.remove_tool("test_dynamic_tool")
    return "tool list changed"


@server.tool()
async def test_trigger_prompt_change() -> str:
    """Add a prompt and take it away again: listeners of prompt-list changes hear of it."""
    server.prompt(name="test_dynamic_prompt")(_dynamic)
    del server.prompts["test_dynamic_prompt"]
    server.notify_list_changed("prompts")
    return "prompt list changed"


@server.tool(
    input_schema={
        "type": "object",
        "properties": {
            "region": {
                "type": "string",
                "description": "Mirrored into the Mcp-Param-Region header",
                "x-mcp-header": "Region",
            }
        },
    }
)
async def test_x_mcp_header(region: str = "<none>") -> str:
    """Take an argument the client must repeat in a header (SEP-2243)."""
    return f"region={region}"


# -- 2026-07-28: multi round-trip requests (InputRequiredResult) --------------------------------


@server.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str:
    """One question, under the key the scenarios answer (``user_name``). A name is data the
    client could pass as an argument, so it may be answered ahead: the scenario
    ``input-required-result-ignore-extra-params`` answers it in its first request."""
    answer = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name", answer_ahead=True)
    return f"Hello, {_content(answer, 'name')}!"


# -- the tasks extension (SEP-2663) ----------------------------------------------------------------

TASK_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}, "name": {"type": "string"}},
}


@server.tool()
async def greet(name: str) -> str:
    """Sync-only: never a task."""
    return f"Hello, {name}!"


@server.tool(task=True)
async def slow_compute(seconds: float = 0, label: str = "") -> str:
    """Task-capable: sleeps ``seconds`` (cancellable), then answers."""
    await trio.sleep(seconds)
    return f"computed {label} after {seconds}s"


@server.tool(task="required")
async def failing_job() -> str:
    """Task-required; ends with a tool error (a completed task whose result has isError)."""
    await trio.sleep(1)
    raise ToolError("the job failed")


@server.tool(task=True)
async def protocol_error_job() -> str:
    """Task-capable; ends with a protocol error (a failed task)."""
    await trio.sleep(0.1)
    raise ProtocolError(-32603, "the job hit a protocol error")


@server.tool(task=True)
async def confirm_delete(filename: str, ctx: Context) -> str:
    """Task-capable; parks at input_required on one confirmation."""
    answer = await ctx.elicit(f"Delete {filename}?", TASK_INPUT_SCHEMA)
    confirmed = answer.action == "accept" and bool(_content(answer, "confirm"))
    return f"{'deleted' if confirmed else 'kept'} {filename}"


@server.tool(task=True)
async def multi_input(ctx: Context) -> str:
    """Task-capable; parks at input_required on two questions asked together."""
    first, second = await ctx.ask_together(
        ctx.elicit("First input?", TASK_INPUT_SCHEMA),
        ctx.elicit("Second input?", TASK_INPUT_SCHEMA),
    )
    return f"got {_content(first, 'name')} and {_content(second, 'name')}"


@server.tool(task="required", input_first=True)
async def test_tool_with_task(ctx: Context) -> str:
    """Task-required; asks for ``user_name`` over a multi round-trip, then becomes a task."""
    answer = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
    await ctx.start_task()
    await trio.sleep(0.1)
    return f"Hello from the task, {_content(answer, 'name')}!"


@server.tool()
async def test_input_required_result_sampling(ctx: Context) -> str:
    """One question for the client's model."""
    reply = await ctx.sample(
        "What is the capital of France?", max_tokens=100, key="capital_question"
    )
    return f"Model said: {_text_of(reply)}"


@server.tool()
async def test_input_required_result_list_roots(ctx: Context) -> str:
    """Ask for the client's roots."""
    roots = await ctx.list_roots(key="client_roots")
    return f"Client exposed {len(roots)} root(s): " + ", ".join(r.uri for r in roots)


@server.tool()
async def test_input_required_result_request_state(ctx: Context) -> str:
    """Keep data of its own in the sealed ``requestState`` and find it again on the retry."""
    ctx.state.setdefault("first_asked_by", ctx.request_id)
    answer = await ctx.elicit("Please confirm", TASK_INPUT_SCHEMA, key="confirm")
    first = ctx.state["first_asked_by"]
    return f"state-ok: confirmed={_content(answer, 'ok')}, first asked by request {first}"


@server.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Ask three things in one round trip."""
    name, greeting, roots = await ctx.ask_together(
        ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name"),
        ctx.sample("Generate a greeting", max_tokens=50, key="greeting"),
        ctx.list_roots(key="client_roots"),
    )
    return f"{_text_of(greeting)} {_content(name, 'name')} ({len(roots)} root(s))"


@server.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str:
    """Ask twice, the second question only once the first is answered."""
    name = await ctx.elicit("Step 1: What is your name?", NAME_SCHEMA, key="step1")
    color = await ctx.elicit("Step 2: What is your favorite color?", COLOR_SCHEMA, key="step2")
    return f"{_content(name, 'name')} likes {_content(color, 'color')}."


@server.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Ask, so that a retry carries a sealed state (the scenario alters it)."""
    answer = await ctx.elicit("Please confirm", TASK_INPUT_SCHEMA, key="confirm")
    return f"state-ok: confirmed={_content(answer, 'ok')}"


@server.tool()
async def test_input_required_result_capabilities(ctx: Context) -> str:
    """Ask only what the request's declared capabilities allow."""
    declared = ctx.client_capabilities
    questions: list[Awaitable[Any]] = []
    if declared.sampling is not None:
        questions.append(ctx.sample("Say hello", max_tokens=50, key="sample"))
    if declared.elicitation is not None:
        questions.append(ctx.elicit("What is your name?", NAME_SCHEMA, key="ask"))
    answers = await ctx.ask_together(*questions)
    return f"{len(answers)} answer(s)"


# -- resources ----------------------------------------------------------------------------------


@server.resource("test://static-text", mime_type="text/plain")
async def static_text() -> str:
    """A fixed text resource."""
    return "This is the content of the static text resource."


@server.resource("test://static-binary", mime_type="image/png")
async def static_binary() -> bytes:
    """A fixed binary resource (a PNG image)."""
    return PNG


@server.resource("test://template/{id}/data", mime_type="application/json")
async def template_data(id: str) -> str:
    """Data for any id, the id substituted into the content."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@server.resource("test://watched-resource", mime_type="text/plain")
async def watched_resource() -> str:
    """A resource clients subscribe to."""
    return "Watched resource content"


# -- prompts ------------------------------------------------------------------------------------


@server.prompt()
async def test_simple_prompt() -> str:
    """A prompt without arguments."""
    return "This is a simple prompt for testing."


@server.prompt()
async def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt that substitutes two required arguments.

    :param arg1: First test argument
    :param arg2: Second test argument
    """
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.prompt()
async def test_prompt_with_embedded_resource(resourceUri: str) -> list[PromptMessage]:
    """A prompt carrying a resource inline.

    :param resourceUri: URI of the resource to embed
    """
    resource = TextResourceContents(
        uri=resourceUri, text="Embedded resource content for testing.", mime_type="text/plain"
    )
    return [
        PromptMessage(role="user", content=EmbeddedResource(resource)),
        PromptMessage(
            role="user", content=TextContent("Please process the embedded resource above.")
        ),
    ]


@server.prompt()
async def test_input_required_result_prompt(ctx: Context) -> str:
    """A prompt that needs the user's input first (InputRequiredResult beyond tools)."""
    answer = await ctx.elicit(
        "What context should the prompt use?",
        {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]},
        key="user_context",
    )
    return f"Write with this context: {_content(answer, 'context')}"


@server.prompt()
async def test_prompt_with_image() -> list[PromptMessage]:
    """A prompt carrying an image."""
    return [
        PromptMessage(role="user", content=ImageContent(PNG_BASE64, "image/png")),
        PromptMessage(role="user", content=TextContent("Please analyze the image above.")),
    ]


# -- completion ---------------------------------------------------------------------------------

SUGGESTIONS = {"arg1": ["paris", "park", "party", "test", "testing"], "arg2": ["world", "wide"]}


@server.completion()
async def complete(
    ref: PromptReference | ResourceTemplateReference,
    argument: CompletionArgument,
    context: CompletionContext | None,
) -> Completion:
    """Suggest values of ``test_prompt_with_arguments``'s arguments that start as typed."""
    candidates = SUGGESTIONS.get(argument.name, []) if isinstance(ref, PromptReference) else []
    values = [v for v in candidates if v.startswith(argument.value)]
    return Completion(values=values, total=len(values), has_more=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    args = parser.parse_args()

    def ready(binds: list[str]) -> None:
        for bind in binds:
            print(f"{bind}/mcp", flush=True)

    trio.run(lambda: serve_http(server, host="127.0.0.1", port=args.port, on_ready=ready))


if __name__ == "__main__":
    main()
