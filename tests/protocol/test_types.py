"""Wire behaviour of the MCP schema types: names, omission, extras, unions and errors."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, get_args

import attrs
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_mcp.protocol._types import (
    LOGGING_LEVELS,
    Annotations,
    AudioContent,
    BlobResourceContents,
    CallToolRequestParams,
    CallToolResult,
    CancelledNotificationParams,
    ClientCapabilities,
    CompleteRequestParams,
    CompleteResult,
    Completion,
    CompletionArgument,
    CompletionContext,
    ContentBlock,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestFormParams,
    ElicitRequestParams,
    ElicitRequestURLParams,
    ElicitResult,
    EmbeddedResource,
    GetPromptResult,
    Icon,
    ImageContent,
    Implementation,
    InitializeRequestParams,
    InitializeResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListRootsResult,
    ListToolsResult,
    LoggingLevel,
    LoggingMessageNotificationParams,
    ModelHint,
    ModelPreferences,
    ProgressNotificationParams,
    Prompt,
    PromptArgument,
    PromptMessage,
    PromptReference,
    ReadResourceResult,
    Resource,
    ResourceLink,
    ResourceTemplate,
    ResourceTemplateReference,
    Root,
    SamplingMessage,
    ServerCapabilities,
    TextContent,
    TextResourceContents,
    Tool,
    ToolAnnotations,
    ToolChoice,
    ToolExecution,
    ToolResultContent,
    ToolUseContent,
    converter,
    from_wire,
    to_wire,
)

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "string"}}}
ICON = Icon("https://x/i.png", mime_type="image/png", sizes=["48x48"], theme="dark")
ICON_WIRE = {"src": "https://x/i.png", "mimeType": "image/png", "sizes": ["48x48"], "theme": "dark"}
ANN = Annotations(
    audience=["user", "assistant"], priority=0.5, last_modified="2025-01-01T00:00:00Z"
)
ANN_WIRE = {
    "audience": ["user", "assistant"],
    "priority": 0.5,
    "lastModified": "2025-01-01T00:00:00Z",
}

# (value, exact wire form). Each pair is checked in both directions, so every camelCase name
# below is asserted literally.
CASES: list[tuple[Any, dict[str, Any]]] = [
    (ICON, ICON_WIRE),
    (
        Implementation(
            name="srv",
            version="1.0",
            title="Server",
            description="d",
            icons=[ICON],
            website_url="https://x",
        ),
        {
            "name": "srv",
            "version": "1.0",
            "title": "Server",
            "description": "d",
            "icons": [ICON_WIRE],
            "websiteUrl": "https://x",
        },
    ),
    (ANN, ANN_WIRE),
    (
        TextContent("hi", annotations=ANN, meta={"k": 1}),
        {"type": "text", "text": "hi", "annotations": ANN_WIRE, "_meta": {"k": 1}},
    ),
    (
        ImageContent("aGk=", "image/png"),
        {"type": "image", "data": "aGk=", "mimeType": "image/png"},
    ),
    (
        AudioContent("aGk=", "audio/wav", meta={"m": True}),
        {"type": "audio", "data": "aGk=", "mimeType": "audio/wav", "_meta": {"m": True}},
    ),
    (
        ResourceLink(
            "file:///a",
            "a",
            title="A",
            description="d",
            mime_type="text/plain",
            size=3,
            icons=[ICON],
            annotations=ANN,
        ),
        {
            "type": "resource_link",
            "uri": "file:///a",
            "name": "a",
            "title": "A",
            "description": "d",
            "mimeType": "text/plain",
            "size": 3,
            "icons": [ICON_WIRE],
            "annotations": ANN_WIRE,
        },
    ),
    (
        EmbeddedResource(TextResourceContents("file:///a", "body", mime_type="text/plain")),
        {
            "type": "resource",
            "resource": {"uri": "file:///a", "text": "body", "mimeType": "text/plain"},
        },
    ),
    (
        EmbeddedResource(BlobResourceContents("file:///b", "AAE=", meta={"z": 0})),
        {"type": "resource", "resource": {"uri": "file:///b", "blob": "AAE=", "_meta": {"z": 0}}},
    ),
    (
        Tool(
            name="t",
            input_schema=SCHEMA,
            title="T",
            description="d",
            output_schema={"type": "object"},
            annotations=ToolAnnotations(
                title="T",
                read_only_hint=True,
                destructive_hint=False,
                idempotent_hint=True,
                open_world_hint=False,
            ),
            icons=[ICON],
            execution=ToolExecution(task_support="optional"),
            meta={"k": "v"},
        ),
        {
            "name": "t",
            "inputSchema": SCHEMA,
            "title": "T",
            "description": "d",
            "outputSchema": {"type": "object"},
            "annotations": {
                "title": "T",
                "readOnlyHint": True,
                "destructiveHint": False,
                "idempotentHint": True,
                "openWorldHint": False,
            },
            "icons": [ICON_WIRE],
            "execution": {"taskSupport": "optional"},
            "_meta": {"k": "v"},
        },
    ),
    (
        CallToolResult(
            content=[TextContent("a")], structured_content={"n": 1}, is_error=False, meta={}
        ),
        {
            "content": [{"type": "text", "text": "a"}],
            "structuredContent": {"n": 1},
            "_meta": {},
        },
    ),
    (
        CallToolRequestParams("t", arguments={"a": 1}, task={"ttl": 5}),
        {"name": "t", "arguments": {"a": 1}, "task": {"ttl": 5}},
    ),
    (
        ListToolsResult([Tool(name="t", input_schema=SCHEMA)], next_cursor="c2"),
        {"tools": [{"name": "t", "inputSchema": SCHEMA}], "nextCursor": "c2"},
    ),
    (
        Prompt(
            "p",
            title="P",
            description="d",
            arguments=[PromptArgument("x", title="X", description="dx", required=True)],
            icons=[ICON],
            meta={"a": 1},
        ),
        {
            "name": "p",
            "title": "P",
            "description": "d",
            "arguments": [{"name": "x", "title": "X", "description": "dx", "required": True}],
            "icons": [ICON_WIRE],
            "_meta": {"a": 1},
        },
    ),
    (
        GetPromptResult(
            [
                PromptMessage("user", TextContent("q")),
                PromptMessage("assistant", ImageContent("aGk=", "image/png")),
            ],
            description="d",
        ),
        {
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "q"}},
                {
                    "role": "assistant",
                    "content": {"type": "image", "data": "aGk=", "mimeType": "image/png"},
                },
            ],
            "description": "d",
        },
    ),
    (
        ListPromptsResult([Prompt("p")], next_cursor="n"),
        {"prompts": [{"name": "p"}], "nextCursor": "n"},
    ),
    (
        Resource(
            "file:///r",
            "r",
            title="R",
            description="d",
            mime_type="text/plain",
            size=10,
            annotations=Annotations(priority=1),
            icons=[ICON],
            meta={"x": 1},
        ),
        {
            "uri": "file:///r",
            "name": "r",
            "title": "R",
            "description": "d",
            "mimeType": "text/plain",
            "size": 10,
            "annotations": {"priority": 1},
            "icons": [ICON_WIRE],
            "_meta": {"x": 1},
        },
    ),
    (
        ResourceTemplate("file:///{path}", "files", mime_type="text/plain"),
        {"uriTemplate": "file:///{path}", "name": "files", "mimeType": "text/plain"},
    ),
    (
        ReadResourceResult(
            [TextResourceContents("file:///a", "t"), BlobResourceContents("file:///b", "AA==")]
        ),
        {"contents": [{"uri": "file:///a", "text": "t"}, {"uri": "file:///b", "blob": "AA=="}]},
    ),
    (
        ListResourcesResult([Resource("file:///r", "r")], next_cursor="n"),
        {"resources": [{"uri": "file:///r", "name": "r"}], "nextCursor": "n"},
    ),
    (
        ListResourceTemplatesResult([ResourceTemplate("u/{x}", "t")], next_cursor="n"),
        {"resourceTemplates": [{"uriTemplate": "u/{x}", "name": "t"}], "nextCursor": "n"},
    ),
    (
        CompleteRequestParams(
            ref=PromptReference("p", title="P"),
            argument=CompletionArgument("lang", "py"),
            context=CompletionContext(arguments={"other": "v"}),
        ),
        {
            "ref": {"type": "ref/prompt", "name": "p", "title": "P"},
            "argument": {"name": "lang", "value": "py"},
            "context": {"arguments": {"other": "v"}},
        },
    ),
    (
        CompleteRequestParams(
            ref=ResourceTemplateReference("file:///{p}"), argument=CompletionArgument("p", "")
        ),
        {
            "ref": {"type": "ref/resource", "uri": "file:///{p}"},
            "argument": {"name": "p", "value": ""},
        },
    ),
    (
        CompleteResult(Completion(["python", "pytorch"], total=10, has_more=True)),
        {"completion": {"values": ["python", "pytorch"], "total": 10, "hasMore": True}},
    ),
    (
        ListRootsResult([Root("file:///home", name="home", meta={"k": 1})]),
        {"roots": [{"uri": "file:///home", "name": "home", "_meta": {"k": 1}}]},
    ),
    (
        CreateMessageRequestParams(
            messages=[SamplingMessage("user", TextContent("hello"))],
            max_tokens=100,
            model_preferences=ModelPreferences(
                hints=[ModelHint("claude")],
                cost_priority=0.1,
                speed_priority=0.2,
                intelligence_priority=0.9,
            ),
            system_prompt="be brief",
            include_context="thisServer",
            temperature=0.7,
            stop_sequences=["\n\n"],
            metadata={"trace": 1},
            tools=[Tool(name="t", input_schema=SCHEMA)],
            tool_choice=ToolChoice(mode="auto"),
        ),
        {
            "messages": [{"role": "user", "content": {"type": "text", "text": "hello"}}],
            "maxTokens": 100,
            "modelPreferences": {
                "hints": [{"name": "claude"}],
                "costPriority": 0.1,
                "speedPriority": 0.2,
                "intelligencePriority": 0.9,
            },
            "systemPrompt": "be brief",
            "includeContext": "thisServer",
            "temperature": 0.7,
            "stopSequences": ["\n\n"],
            "metadata": {"trace": 1},
            "tools": [{"name": "t", "inputSchema": SCHEMA}],
            "toolChoice": {"mode": "auto"},
        },
    ),
    (
        CreateMessageResult(
            "assistant",
            [
                TextContent("calling"),
                ToolUseContent("call-1", "weather", {"city": "Paris"}),
            ],
            "claude-x",
            stop_reason="toolUse",
        ),
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": "call-1", "name": "weather", "input": {"city": "Paris"}},
            ],
            "model": "claude-x",
            "stopReason": "toolUse",
        },
    ),
    (
        SamplingMessage(
            "user",
            ToolResultContent(
                "call-1",
                [TextContent("18C")],
                structured_content={"c": 18},
                is_error=False,
            ),
        ),
        {
            "role": "user",
            "content": {
                "type": "tool_result",
                "toolUseId": "call-1",
                "content": [{"type": "text", "text": "18C"}],
                "structuredContent": {"c": 18},
                "isError": False,
            },
        },
    ),
    (
        ElicitRequestFormParams("Name?", {"type": "object", "properties": {}}),
        {
            "mode": "form",
            "message": "Name?",
            "requestedSchema": {"type": "object", "properties": {}},
        },
    ),
    (
        ElicitRequestURLParams("Log in", "https://x/login", "e-1"),
        {"mode": "url", "message": "Log in", "url": "https://x/login", "elicitationId": "e-1"},
    ),
    (
        ElicitResult("accept", content={"name": "Ann"}),
        {"action": "accept", "content": {"name": "Ann"}},
    ),
    (ElicitResult("cancel"), {"action": "cancel"}),
    (
        InitializeRequestParams(
            "2025-11-25",
            ClientCapabilities(
                roots={"listChanged": True}, sampling={"tools": {}}, elicitation={"form": {}}
            ),
            Implementation("cli", "0.1"),
        ),
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {
                "roots": {"listChanged": True},
                "sampling": {"tools": {}},
                "elicitation": {"form": {}},
            },
            "clientInfo": {"name": "cli", "version": "0.1"},
        },
    ),
    (
        InitializeResult(
            "2025-11-25",
            ServerCapabilities(
                experimental={"x": {}},
                logging={},
                completions={},
                prompts={"listChanged": True},
                resources={"subscribe": True},
                tools={"listChanged": False},
                tasks={"list": {}},
            ),
            Implementation("srv", "1"),
            instructions="Use tools.",
            meta={"m": 1},
        ),
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {
                "experimental": {"x": {}},
                "logging": {},
                "completions": {},
                "prompts": {"listChanged": True},
                "resources": {"subscribe": True},
                "tools": {"listChanged": False},
                "tasks": {"list": {}},
            },
            "serverInfo": {"name": "srv", "version": "1"},
            "instructions": "Use tools.",
            "_meta": {"m": 1},
        },
    ),
    (
        ProgressNotificationParams("tok", 0.5, total=1.0, message="half"),
        {"progressToken": "tok", "progress": 0.5, "total": 1.0, "message": "half"},
    ),
    (ProgressNotificationParams(7, 3), {"progressToken": 7, "progress": 3}),
    (
        CancelledNotificationParams(request_id=12, reason="user"),
        {"requestId": 12, "reason": "user"},
    ),
    (CancelledNotificationParams(request_id="abc"), {"requestId": "abc"}),
    (
        LoggingMessageNotificationParams("warning", {"msg": "x"}, logger="db"),
        {"level": "warning", "data": {"msg": "x"}, "logger": "db"},
    ),
]


@pytest.mark.parametrize(
    ("value", "wire"), CASES, ids=[f"{i}-{type(v).__name__}" for i, (v, _) in enumerate(CASES)]
)
def test_wire_form_and_round_trip(value: Any, wire: dict[str, Any]) -> None:
    assert to_wire(value) == wire
    assert from_wire(wire, type(value)) == value
    # The wire form really is JSON: it survives an encode/decode unchanged.
    assert from_wire(orjson.loads(orjson.dumps(to_wire(value))), type(value)) == value


def test_call_tool_result_exact_wire_form() -> None:
    result = CallToolResult(content=[TextContent("a")], is_error=True)
    assert to_wire(result) == {"content": [{"type": "text", "text": "a"}], "isError": True}


def test_none_optionals_are_omitted_and_required_fields_kept() -> None:
    assert to_wire(Tool(name="x", input_schema={"type": "object"})) == {
        "name": "x",
        "inputSchema": {"type": "object"},
    }
    assert to_wire(Resource("u", "n")) == {"uri": "u", "name": "n"}
    assert to_wire(ModelHint()) == {}
    # An empty content list is still required on the wire.
    assert to_wire(CallToolResult()) == {"content": []}
    # A false isError is the wire's absent one (the spec's default), so a success looks the same
    # whether or not the flag was set.
    assert to_wire(CallToolResult(is_error=False)) == {"content": []}
    # A required field that may be null is still written.
    assert to_wire(LoggingMessageNotificationParams("info", None)) == {
        "level": "info",
        "data": None,
    }
    # No null anywhere in a sparse nested value.
    wire = to_wire(ListToolsResult([Tool(name="t", input_schema={})]))
    assert "null" not in orjson.dumps(wire).decode()


def test_discriminators_always_written() -> None:
    assert to_wire(TextContent("x"))["type"] == "text"
    assert to_wire(ResourceLink("u", "n"))["type"] == "resource_link"
    assert to_wire(PromptReference("p"))["type"] == "ref/prompt"
    assert to_wire(ResourceTemplateReference("u"))["type"] == "ref/resource"
    assert to_wire(ElicitRequestFormParams("m", {}))["mode"] == "form"


def test_null_for_optional_field_is_read_as_absent() -> None:
    tool = from_wire(
        {"name": "t", "inputSchema": {}, "description": None, "annotations": None}, Tool
    )
    assert tool == Tool(name="t", input_schema={})
    assert to_wire(tool) == {"name": "t", "inputSchema": {}}


def test_meta_maps_to_underscore_meta() -> None:
    root = from_wire({"uri": "u", "_meta": {"k": 1}}, Root)
    assert root.meta == {"k": 1}
    assert root.extra == {}
    assert to_wire(root) == {"uri": "u", "_meta": {"k": 1}}
    # A plain "meta" key is not the protocol's _meta: it is an unknown key.
    odd = from_wire({"uri": "u", "meta": 2}, Root)
    assert odd.meta is None
    assert odd.extra == {"meta": 2}


def test_unknown_keys_survive_a_round_trip_at_every_level() -> None:
    wire = {
        "content": [
            {
                "type": "text",
                "text": "a",
                "newField": [1, 2],
                "annotations": {"priority": 1, "futureHint": "x"},
            },
            {
                "type": "resource",
                "resource": {"uri": "u", "blob": "AA==", "encoding": "base64"},
                "extraBlockKey": None,
            },
        ],
        "isError": True,
        "topLevelNew": {"deep": True},
    }
    result = from_wire(wire, CallToolResult)
    assert result.extra == {"topLevelNew": {"deep": True}}
    text = result.content[0]
    assert isinstance(text, TextContent)
    assert text.extra == {"newField": [1, 2]}
    assert text.annotations == Annotations(priority=1, extra={"futureHint": "x"})
    embedded = result.content[1]
    assert isinstance(embedded, EmbeddedResource)
    assert embedded.extra == {"extraBlockKey": None}
    assert embedded.resource == BlobResourceContents("u", "AA==", extra={"encoding": "base64"})
    assert to_wire(result) == wire


def test_extra_on_constructed_values_is_written_and_declared_fields_win() -> None:
    assert to_wire(Root("u", extra={"x-vendor": 1})) == {"uri": "u", "x-vendor": 1}
    assert to_wire(TextContent("real", extra={"text": "shadow", "y": 2})) == {
        "type": "text",
        "text": "real",
        "y": 2,
    }


def test_content_block_union_picks_by_type() -> None:
    blocks = from_wire(
        {
            "content": [
                {"type": "text", "text": "t"},
                {"type": "image", "data": "d", "mimeType": "image/png"},
                {"type": "audio", "data": "d", "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "u", "name": "n"},
                {"type": "resource", "resource": {"uri": "u", "text": "x"}},
            ]
        },
        CallToolResult,
    ).content
    assert [type(b) for b in blocks] == [
        TextContent,
        ImageContent,
        AudioContent,
        ResourceLink,
        EmbeddedResource,
    ]
    embedded = blocks[4]
    assert isinstance(embedded, EmbeddedResource)
    assert isinstance(embedded.resource, TextResourceContents)
    message = from_wire(
        {"role": "user", "content": {"type": "audio", "data": "d", "mimeType": "m"}}, PromptMessage
    )
    assert message.content == AudioContent("d", "m")


def test_from_wire_accepts_a_union_alias() -> None:
    block = from_wire({"type": "resource_link", "uri": "u", "name": "n"}, ContentBlock)
    assert block == ResourceLink("u", "n")
    with pytest.raises(ValueError, match=r"^invalid content block: type: unknown content type"):
        from_wire({"type": "tool_use"}, ContentBlock)


def test_resource_contents_union_picks_by_text_or_blob() -> None:
    result = from_wire(
        {"contents": [{"uri": "a", "blob": "AA=="}, {"uri": "b", "text": ""}]}, ReadResourceResult
    )
    assert result.contents == [BlobResourceContents("a", "AA=="), TextResourceContents("b", "")]
    with pytest.raises(ValueError, match=r"contents\[0\].*'text' or a 'blob'"):
        from_wire({"contents": [{"uri": "a"}]}, ReadResourceResult)


def test_sampling_content_is_one_block_or_a_list() -> None:
    single = from_wire(
        {"role": "assistant", "content": {"type": "tool_use", "id": "1", "name": "f", "input": {}}},
        SamplingMessage,
    )
    assert single.content == ToolUseContent("1", "f", {})
    many = from_wire(
        {
            "role": "user",
            "content": [
                {"type": "image", "data": "d", "mimeType": "image/png"},
                {"type": "tool_result", "toolUseId": "1", "content": []},
            ],
        },
        SamplingMessage,
    )
    assert many.content == [ImageContent("d", "image/png"), ToolResultContent("1")]
    # Resource links are content blocks but not sampling content.
    with pytest.raises(ValueError, match=r"content\.type.*'resource_link'"):
        from_wire(
            {"role": "user", "content": {"type": "resource_link", "uri": "u", "name": "n"}},
            SamplingMessage,
        )


def test_elicit_params_union_picks_by_mode_and_defaults_to_form() -> None:
    url = from_wire(
        {"mode": "url", "message": "m", "url": "https://x", "elicitationId": "e"},
        ElicitRequestParams,
    )
    assert url == ElicitRequestURLParams("m", "https://x", "e")
    form = from_wire({"message": "m", "requestedSchema": {"type": "object"}}, ElicitRequestParams)
    assert form == ElicitRequestFormParams("m", {"type": "object"})
    assert to_wire(form)["mode"] == "form"


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (
            {"content": [{"type": "video", "url": "x"}]},
            r"content\[0\]\.type: unknown content type 'video'",
        ),
        ({"content": [{"text": "no type"}]}, r"content\[0\]\.type: missing 'type'"),
        ({"content": [{"type": "text", "text": 5}]}, r"content\[0\]\.text: expected a string"),
        ({"content": [{"type": "text"}]}, r"content\[0\]\.text: required field is missing"),
        ({"content": "abc"}, r"content: expected an array"),
        ({"content": [], "isError": "yes"}, r"isError: expected a boolean"),
        ({"content": [7]}, r"content\[0\]: expected an object \(content block\)"),
        ([], r"expected an object"),
    ],
)
def test_bad_call_tool_result_names_the_field(data: Any, needle: str) -> None:
    with pytest.raises(ValueError, match=needle) as info:
        from_wire(data, CallToolResult)
    assert str(info.value).startswith("invalid CallToolResult: ")


def test_bad_data_errors_use_wire_names_and_report_every_problem() -> None:
    with pytest.raises(ValueError) as info:
        from_wire({"name": 1, "annotations": {"readOnlyHint": "no"}}, Tool)
    message = str(info.value)
    assert "name: expected a string" in message
    assert "inputSchema: required field is missing" in message
    assert "annotations.readOnlyHint: expected a boolean" in message
    assert "input_schema" not in message


@pytest.mark.parametrize(
    ("data", "cls", "needle"),
    [
        (
            {"role": "system", "content": {"type": "text", "text": "x"}},
            PromptMessage,
            r"role: expected one of 'user', 'assistant'",
        ),
        (
            {"level": "loud", "data": 1},
            LoggingMessageNotificationParams,
            r"level: expected one of 'debug'",
        ),
        ({"action": "maybe"}, ElicitResult, r"action: expected one of"),
        ({"type": "image", "text": "x"}, TextContent, r"type: expected one of 'text'"),
        (
            {"requestId": True},
            CancelledNotificationParams,
            r"requestId: expected a string, an integer or null",
        ),
        (
            {"progressToken": 1.5, "progress": 1},
            ProgressNotificationParams,
            r"progressToken: expected a string or an integer",
        ),
        (
            {"progressToken": "t", "progress": "1"},
            ProgressNotificationParams,
            r"progress: expected a number",
        ),
        ({"uri": "u", "name": "n", "size": True}, Resource, r"size: expected an integer"),
        ({"uri": "u", "name": "n", "size": 1.5}, Resource, r"size: expected an integer"),
        (
            {"completion": {"values": "abc"}},
            CompleteResult,
            r"completion\.values: expected an array",
        ),
        (
            {"completion": {"values": ["a", 2]}},
            CompleteResult,
            r"completion\.values\[1\]: expected a string",
        ),
        (
            {"ref": {"type": "ref/x"}, "argument": {"name": "a", "value": "b"}},
            CompleteRequestParams,
            r"ref\.type: unknown reference type 'ref/x'",
        ),
        (
            {
                "ref": {"type": "ref/prompt", "name": "p"},
                "argument": {"name": "a", "value": "b"},
                "context": {"arguments": {"k": 1}},
            },
            CompleteRequestParams,
            r"context\.arguments\['k'\]: expected a string",
        ),
        ({"name": "t", "inputSchema": []}, Tool, r"inputSchema: expected an object"),
        (
            {"mode": "url", "message": "m"},
            ElicitRequestURLParams,
            r"url: required field is missing",
        ),
        (
            {"protocolVersion": "v", "capabilities": [], "clientInfo": {"name": "c"}},
            InitializeRequestParams,
            r"capabilities: expected an object.*clientInfo\.version: required field is missing",
        ),
    ],
)
def test_bad_values_raise_value_error_naming_the_field(
    data: Any, cls: type[Any], needle: str
) -> None:
    with pytest.raises(ValueError, match=needle):
        from_wire(data, cls)


def test_lenient_numbers_and_mappings() -> None:
    # A whole float where an integer is expected is accepted as that integer.
    assert from_wire({"uri": "u", "name": "n", "size": 3.0}, Resource).size == 3
    assert (
        from_wire({"messages": [], "maxTokens": 10.0}, CreateMessageRequestParams).max_tokens == 10
    )
    # An integer is a perfectly good JSON number.
    assert from_wire({"progressToken": 1, "progress": 2}, ProgressNotificationParams).progress == 2
    # Any mapping is accepted as an object.
    proxy: Mapping[str, Any] = MappingProxyType({"uri": "u", "x": 1})
    assert from_wire(proxy, Root) == Root("u", extra={"x": 1})


def test_unknown_string_values_pass_where_the_schema_may_grow() -> None:
    result = from_wire(
        {"role": "assistant", "content": [], "model": "m", "stopReason": "refusal"},
        CreateMessageResult,
    )
    assert result.stop_reason == "refusal"
    icon = from_wire({"src": "s", "theme": "high-contrast"}, Icon)
    assert icon.theme == "high-contrast"
    tool = from_wire({"name": "t", "inputSchema": {}, "execution": {"taskSupport": "later"}}, Tool)
    assert tool.execution == ToolExecution(task_support="later")


def test_logging_levels_in_severity_order() -> None:
    assert LOGGING_LEVELS == (
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    )
    assert get_args(LoggingLevel) == LOGGING_LEVELS
    for level in LOGGING_LEVELS:
        assert (
            from_wire({"level": level, "data": 1}, LoggingMessageNotificationParams).level == level
        )


def test_to_wire_of_lists_and_dicts_of_values() -> None:
    assert to_wire([Root("a"), Root("b", name="B")]) == [{"uri": "a"}, {"uri": "b", "name": "B"}]
    assert to_wire({"x": TextContent("t")}) == {"x": {"type": "text", "text": "t"}}


def test_values_are_frozen() -> None:
    text = TextContent("x")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        text.text = "y"  # type: ignore[misc]


def test_hooks_are_built_once_per_class() -> None:
    assert converter.get_structure_hook(Tool) is converter.get_structure_hook(Tool)
    assert converter.get_unstructure_hook(Tool) is converter.get_unstructure_hook(Tool)


# --- property tests ----------------------------------------------------------------------------

# orjson (like most peers) only does 64-bit integers.
json_ints = st.integers(-(2**63), 2**63 - 1)
# JSON has no NaN or infinity.
json_floats = st.floats(allow_nan=False, allow_infinity=False)
json_scalars = st.none() | st.booleans() | json_ints | json_floats | st.text()
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=3)
# Keys that no class declares, so they land in ``extra``.
extra_keys = st.text(min_size=1, max_size=8).map(lambda s: "x-" + s)
extras = st.dictionaries(extra_keys, json_values, max_size=3)
optional_text = st.none() | st.text()

annotations_st = st.builds(
    Annotations,
    audience=st.none() | st.lists(st.sampled_from(["user", "assistant"]), max_size=2),
    priority=st.none() | st.floats(0, 1),
    last_modified=optional_text,
    extra=extras,
)
text_content = st.builds(
    TextContent,
    text=st.text(),
    annotations=st.none() | annotations_st,
    meta=st.none() | json_objects,
    extra=extras,
)
image_content = st.builds(
    ImageContent, data=st.text(), mime_type=st.text(), meta=st.none() | json_objects, extra=extras
)
resource_contents = st.builds(
    TextResourceContents, uri=st.text(), text=st.text(), mime_type=optional_text, extra=extras
) | st.builds(BlobResourceContents, uri=st.text(), blob=st.text(), extra=extras)
content_blocks = (
    text_content
    | image_content
    | st.builds(
        EmbeddedResource,
        resource=resource_contents,
        annotations=st.none() | annotations_st,
        extra=extras,
    )
    | st.builds(
        ResourceLink,
        uri=st.text(),
        name=st.text(),
        size=st.none() | st.integers(0, 2**63 - 1),
        extra=extras,
    )
)
call_tool_results = st.builds(
    CallToolResult,
    content=st.lists(content_blocks, max_size=4),
    structured_content=st.none() | json_objects,
    is_error=st.none() | st.booleans(),
    meta=st.none() | json_objects,
    extra=extras,
)
tools = st.builds(
    Tool,
    name=st.text(),
    input_schema=json_objects,
    title=optional_text,
    description=optional_text,
    output_schema=st.none() | json_objects,
    annotations=st.none()
    | st.builds(
        ToolAnnotations,
        read_only_hint=st.none() | st.booleans(),
        open_world_hint=st.none() | st.booleans(),
        extra=extras,
    ),
    icons=st.none()
    | st.lists(st.builds(Icon, src=st.text(), sizes=st.none() | st.lists(st.text())), max_size=2),
    meta=st.none() | json_objects,
    extra=extras,
)
progress = st.builds(
    ProgressNotificationParams,
    progress_token=st.text() | json_ints,
    progress=json_floats | json_ints,
    total=st.none() | json_floats,
    message=optional_text,
    extra=extras,
)


def _assert_round_trips(value: Any) -> None:
    wire = to_wire(value)
    assert from_wire(wire, type(value)) == value
    # And through real JSON text, which is what a peer sees.
    decoded = orjson.loads(orjson.dumps(wire))
    assert to_wire(from_wire(decoded, type(value))) == decoded


@settings(max_examples=150, deadline=None)
@given(call_tool_results)
def test_call_tool_result_round_trips(value: CallToolResult) -> None:
    _assert_round_trips(value)


@settings(max_examples=150, deadline=None)
@given(st.lists(tools, max_size=3), st.none() | st.text())
def test_list_tools_result_round_trips(value: list[Tool], cursor: str | None) -> None:
    _assert_round_trips(ListToolsResult(value, next_cursor=cursor))


@settings(max_examples=100, deadline=None)
@given(progress)
def test_progress_params_round_trip(value: ProgressNotificationParams) -> None:
    _assert_round_trips(value)


def test_call_tool_result_is_error_is_a_bool_absent_from_the_wire_when_false() -> None:
    ok = CallToolResult()
    assert ok.is_error is False
    assert to_wire(ok) == {"content": []}  # the wire form of a success is unchanged
    assert to_wire(CallToolResult(is_error=True)) == {"content": [], "isError": True}
    assert from_wire({"content": []}, CallToolResult).is_error is False
    assert from_wire({"content": [], "isError": False}, CallToolResult).is_error is False
    assert from_wire({"content": [], "isError": True}, CallToolResult).is_error is True
