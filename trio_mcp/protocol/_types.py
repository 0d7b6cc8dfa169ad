"""MCP schema types (revision 2025-11-25) as frozen attrs classes, and their wire converter.

Sans-IO: nothing here does I/O or knows about trio. :func:`to_wire` turns values into
JSON-ready Python objects (dicts, lists, strings, numbers) and :func:`from_wire` turns parsed
JSON back into values.

Conventions shared by every class:

* Python field names are snake_case, wire keys are camelCase; the wire key ``_meta`` is the
  Python field ``meta``.
* Optional fields default to ``None`` and are left out of the wire form while ``None``.
* Fixed discriminators (``type``, ``mode``) are keyword-only and always written.
* Wire keys a class does not know are kept in its ``extra`` dict when structuring and written
  back when unstructuring, so nothing a newer peer sends is lost.

JSON Schemas, ``_meta`` and other free-form objects are plain ``dict[str, Any]``; they are
passed through as-is in both directions (no copy), so treat them as read-only.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeAlias, TypeVar, Union, get_args, get_origin, overload

import attrs
import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    IterableValidationError,
    IterableValidationNote,
    StructureHandlerNotFoundError,
)
from cattrs.fns import identity
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from ._errors import InvalidAnswer

__all__ = [
    "LOGGING_LEVELS",
    "Annotations",
    "AudioContent",
    "BlobResourceContents",
    "CallToolRequestParams",
    "CallToolResult",
    "CancelledNotificationParams",
    "ClientCapabilities",
    "CompleteRequestParams",
    "CompleteResult",
    "Completion",
    "CompletionArgument",
    "CompletionContext",
    "ContentBlock",
    "CreateMessageRequestParams",
    "CreateMessageResult",
    "Cursor",
    "ElicitAction",
    "ElicitRequestFormParams",
    "ElicitRequestParams",
    "ElicitRequestURLParams",
    "ElicitResult",
    "ElicitationCompleteNotificationParams",
    "EmbeddedResource",
    "GetPromptRequestParams",
    "GetPromptResult",
    "Icon",
    "ImageContent",
    "Implementation",
    "IncludeContext",
    "InitializeRequestParams",
    "InitializeResult",
    "ListPromptsResult",
    "ListResourceTemplatesResult",
    "ListResourcesResult",
    "ListRootsResult",
    "ListToolsResult",
    "LoggingLevel",
    "LoggingMessageNotificationParams",
    "ModelHint",
    "ModelPreferences",
    "PaginatedRequestParams",
    "ProgressNotificationParams",
    "ProgressToken",
    "Prompt",
    "PromptArgument",
    "PromptMessage",
    "PromptReference",
    "ReadResourceRequestParams",
    "ReadResourceResult",
    "Reference",
    "RequestId",
    "Resource",
    "ResourceContents",
    "ResourceLink",
    "ResourceTemplate",
    "ResourceTemplateReference",
    "ResourceUpdatedNotificationParams",
    "Role",
    "Root",
    "SamplingContent",
    "SamplingMessage",
    "ServerCapabilities",
    "SetLevelRequestParams",
    "StopReason",
    "SubscribeRequestParams",
    "TaskSupport",
    "TextContent",
    "TextResourceContents",
    "Tool",
    "ToolAnnotations",
    "ToolChoice",
    "ToolExecution",
    "ToolResultContent",
    "ToolUseContent",
    "UnsubscribeRequestParams",
    "converter",
    "from_wire",
    "to_wire",
]

T = TypeVar("T")

# ---------------------------------------------------------------------------------------------
# Enum-like values. Closed sets are Literals checked on input; sets a newer peer may extend are
# documented as Literals but the fields themselves are typed ``str`` so new values get through.

Role: TypeAlias = Literal["user", "assistant"]
LoggingLevel: TypeAlias = Literal[
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"
]
#: The syslog levels, least severe first.
LOGGING_LEVELS: tuple[str, ...] = get_args(LoggingLevel)
ElicitAction: TypeAlias = Literal["accept", "decline", "cancel"]
#: Known values of ``CreateMessageRequestParams.include_context`` (the field is a ``str``).
IncludeContext: TypeAlias = Literal["none", "thisServer", "allServers"]
#: Known values of ``CreateMessageResult.stop_reason`` (the field is a ``str``).
StopReason: TypeAlias = Literal["endTurn", "stopSequence", "maxTokens", "toolUse"]
#: Known values of ``ToolExecution.task_support`` (the field is a ``str``).
TaskSupport: TypeAlias = Literal["forbidden", "optional", "required"]
ProgressToken: TypeAlias = str | int
RequestId: TypeAlias = str | int
Cursor: TypeAlias = str

# ---------------------------------------------------------------------------------------------
# Shared building blocks


@attrs.frozen
class Icon:
    """An image a client may show for a server, tool, prompt or resource."""

    src: str
    mime_type: str | None = None
    sizes: list[str] | None = None
    #: "light" or "dark" (kept as ``str`` so new themes pass through).
    theme: str | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Implementation:
    """Name and version of an MCP client or server (``clientInfo`` / ``serverInfo``)."""

    name: str
    version: str
    title: str | None = None
    description: str | None = None
    icons: list[Icon] | None = None
    website_url: str | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Annotations:
    """Hints for the client about who an item is for and how much it matters."""

    audience: list[Role] | None = None
    priority: float | None = None
    last_modified: str | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


# ---------------------------------------------------------------------------------------------
# Content


@attrs.frozen
class TextContent:
    """Plain text content."""

    text: str
    type: Literal["text"] = attrs.field(default="text", kw_only=True)
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ImageContent:
    """An image; ``data`` is base64."""

    data: str
    mime_type: str
    type: Literal["image"] = attrs.field(default="image", kw_only=True)
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class AudioContent:
    """Audio; ``data`` is base64."""

    data: str
    mime_type: str
    type: Literal["audio"] = attrs.field(default="audio", kw_only=True)
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class TextResourceContents:
    """The contents of a resource, as text."""

    uri: str
    text: str
    mime_type: str | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class BlobResourceContents:
    """The contents of a resource, as base64 binary data."""

    uri: str
    blob: str
    mime_type: str | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ResourceLink:
    """A pointer to a resource the client can read later."""

    uri: str
    name: str
    type: Literal["resource_link"] = attrs.field(default="resource_link", kw_only=True)
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    icons: list[Icon] | None = None
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class EmbeddedResource:
    """A resource's contents carried inline."""

    resource: ResourceContents
    type: Literal["resource"] = attrs.field(default="resource", kw_only=True)
    annotations: Annotations | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ToolUseContent:
    """A model's request to call a tool (sampling with tools)."""

    id: str
    name: str
    input: dict[str, Any]
    type: Literal["tool_use"] = attrs.field(default="tool_use", kw_only=True)
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ToolResultContent:
    """The outcome of a tool call, fed back to the model (sampling with tools)."""

    tool_use_id: str
    content: list[ContentBlock] = attrs.field(factory=list)
    structured_content: Any = None
    is_error: bool | None = None
    type: Literal["tool_result"] = attrs.field(default="tool_result", kw_only=True)
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


ContentBlock: TypeAlias = (
    TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource
)
ResourceContents: TypeAlias = TextResourceContents | BlobResourceContents
SamplingContent: TypeAlias = (
    TextContent | ImageContent | AudioContent | ToolUseContent | ToolResultContent
)

# ---------------------------------------------------------------------------------------------
# Tools


@attrs.frozen
class ToolAnnotations:
    """Untrusted hints about how a tool behaves."""

    title: str | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ToolExecution:
    """How a tool may be run; ``task_support`` is one of :data:`TaskSupport`."""

    task_support: str | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Tool:
    """A tool a server offers; ``input_schema``/``output_schema`` are JSON Schemas."""

    name: str
    input_schema: dict[str, Any]
    title: str | None = None
    description: str | None = None
    output_schema: dict[str, Any] | None = None
    annotations: ToolAnnotations | None = None
    icons: list[Icon] | None = None
    execution: ToolExecution | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class CallToolRequestParams:
    """Params of ``tools/call``."""

    name: str
    arguments: dict[str, Any] | None = None
    task: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class CallToolResult:
    """Result of ``tools/call``. ``content`` is always written, even when empty; ``is_error``
    is False unless the tool failed, and on the wire only when true (absent means false)."""

    content: list[ContentBlock] = attrs.field(factory=list)
    structured_content: Any = None
    is_error: bool = attrs.field(default=False, converter=bool)
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ListToolsResult:
    """Result of ``tools/list``."""

    tools: list[Tool]
    next_cursor: str | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


# ---------------------------------------------------------------------------------------------
# Prompts


@attrs.frozen
class PromptArgument:
    """An argument a prompt template accepts."""

    name: str
    title: str | None = None
    description: str | None = None
    required: bool | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Prompt:
    """A prompt or prompt template a server offers."""

    name: str
    title: str | None = None
    description: str | None = None
    arguments: list[PromptArgument] | None = None
    icons: list[Icon] | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class PromptMessage:
    """One message of a rendered prompt."""

    role: Role
    content: ContentBlock
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class GetPromptRequestParams:
    """Params of ``prompts/get``."""

    name: str
    arguments: dict[str, str] | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class GetPromptResult:
    """Result of ``prompts/get``."""

    messages: list[PromptMessage]
    description: str | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ListPromptsResult:
    """Result of ``prompts/list``."""

    prompts: list[Prompt]
    next_cursor: str | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


# ---------------------------------------------------------------------------------------------
# Resources


@attrs.frozen
class Resource:
    """A resource a server can read."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: Annotations | None = None
    icons: list[Icon] | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ResourceTemplate:
    """A family of resources described by an RFC 6570 URI template."""

    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    annotations: Annotations | None = None
    icons: list[Icon] | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ReadResourceRequestParams:
    """Params of ``resources/read``."""

    uri: str
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class SubscribeRequestParams:
    """Params of ``resources/subscribe``."""

    uri: str
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class UnsubscribeRequestParams:
    """Params of ``resources/unsubscribe``."""

    uri: str
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ResourceUpdatedNotificationParams:
    """Params of ``notifications/resources/updated``."""

    uri: str
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ReadResourceResult:
    """Result of ``resources/read``."""

    contents: list[ResourceContents]
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ListResourcesResult:
    """Result of ``resources/list``."""

    resources: list[Resource]
    next_cursor: str | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ListResourceTemplatesResult:
    """Result of ``resources/templates/list``."""

    resource_templates: list[ResourceTemplate]
    next_cursor: str | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class PaginatedRequestParams:
    """Params of the ``*/list`` requests."""

    cursor: str | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


# ---------------------------------------------------------------------------------------------
# Completion


@attrs.frozen
class PromptReference:
    """Completion target: a prompt's argument."""

    name: str
    type: Literal["ref/prompt"] = attrs.field(default="ref/prompt", kw_only=True)
    title: str | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ResourceTemplateReference:
    """Completion target: a resource template's variable."""

    uri: str
    type: Literal["ref/resource"] = attrs.field(default="ref/resource", kw_only=True)
    extra: dict[str, Any] = attrs.field(factory=dict)


Reference: TypeAlias = PromptReference | ResourceTemplateReference


@attrs.frozen
class CompletionArgument:
    """The argument being completed and what the user has typed so far."""

    name: str
    value: str
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class CompletionContext:
    """Values of arguments that are already resolved."""

    arguments: dict[str, str] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class CompleteRequestParams:
    """Params of ``completion/complete``."""

    ref: Reference
    argument: CompletionArgument
    context: CompletionContext | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Completion:
    """Suggested values (at most 100) for a completion request."""

    values: list[str]
    total: int | None = None
    has_more: bool | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class CompleteResult:
    """Result of ``completion/complete``."""

    completion: Completion
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


# ---------------------------------------------------------------------------------------------
# Roots


@attrs.frozen
class Root:
    """A directory or file the client exposes to the server."""

    uri: str
    name: str | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ListRootsResult:
    """Result of ``roots/list``."""

    roots: list[Root]
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


# ---------------------------------------------------------------------------------------------
# Sampling


@attrs.frozen
class ModelHint:
    """A model name (or substring of one) the server would like."""

    name: str | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ModelPreferences:
    """What the server values in a model; priorities are 0..1."""

    hints: list[ModelHint] | None = None
    cost_priority: float | None = None
    speed_priority: float | None = None
    intelligence_priority: float | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class SamplingMessage:
    """A message sent to or produced by an LLM; content is one block or a list of them."""

    role: Role
    content: SamplingContent | list[SamplingContent]
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ToolChoice:
    """How the model may use the offered tools: "auto", "required" or "none"."""

    mode: str | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class CreateMessageRequestParams:
    """Params of ``sampling/createMessage``; ``include_context`` is one of
    :data:`IncludeContext`."""

    messages: list[SamplingMessage]
    max_tokens: int
    model_preferences: ModelPreferences | None = None
    system_prompt: str | None = None
    include_context: str | None = None
    temperature: float | None = None
    stop_sequences: list[str] | None = None
    metadata: dict[str, Any] | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    task: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class CreateMessageResult:
    """Result of ``sampling/createMessage``; ``stop_reason`` is usually a :data:`StopReason`."""

    role: Role
    content: SamplingContent | list[SamplingContent]
    model: str
    stop_reason: str | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


# ---------------------------------------------------------------------------------------------
# Elicitation


@attrs.frozen
class ElicitRequestFormParams:
    """Params of ``elicitation/create`` asking for form input described by a JSON Schema."""

    message: str
    requested_schema: dict[str, Any]
    mode: Literal["form"] = attrs.field(default="form", kw_only=True)
    task: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ElicitRequestURLParams:
    """Params of ``elicitation/create`` sending the user to a URL."""

    message: str
    url: str
    elicitation_id: str
    mode: Literal["url"] = attrs.field(default="url", kw_only=True)
    task: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


ElicitRequestParams: TypeAlias = ElicitRequestFormParams | ElicitRequestURLParams


@attrs.frozen
class ElicitResult:
    """The user's answer to an elicitation."""

    action: ElicitAction
    content: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ElicitationCompleteNotificationParams:
    """Params of ``notifications/elicitation/complete``."""

    elicitation_id: str
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


# ---------------------------------------------------------------------------------------------
# Lifecycle


@attrs.frozen
class ClientCapabilities:
    """What a client supports; each member is the schema's object, kept as a dict."""

    experimental: dict[str, Any] | None = None
    roots: dict[str, Any] | None = None
    sampling: dict[str, Any] | None = None
    elicitation: dict[str, Any] | None = None
    tasks: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ServerCapabilities:
    """What a server supports; each member is the schema's object, kept as a dict."""

    experimental: dict[str, Any] | None = None
    logging: dict[str, Any] | None = None
    completions: dict[str, Any] | None = None
    prompts: dict[str, Any] | None = None
    resources: dict[str, Any] | None = None
    tools: dict[str, Any] | None = None
    tasks: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class InitializeRequestParams:
    """Params of ``initialize``."""

    protocol_version: str
    capabilities: ClientCapabilities
    client_info: Implementation
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class InitializeResult:
    """Result of ``initialize``."""

    protocol_version: str
    capabilities: ServerCapabilities
    server_info: Implementation
    instructions: str | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


# ---------------------------------------------------------------------------------------------
# Notifications and utilities


@attrs.frozen
class ProgressNotificationParams:
    """Params of ``notifications/progress``."""

    progress_token: ProgressToken
    progress: float
    total: float | None = None
    message: str | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class CancelledNotificationParams:
    """Params of ``notifications/cancelled``."""

    request_id: RequestId | None = None
    reason: str | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class LoggingMessageNotificationParams:
    """Params of ``notifications/message``; ``data`` is any JSON value and always written."""

    level: LoggingLevel
    data: Any
    logger: str | None = None
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class SetLevelRequestParams:
    """Params of ``logging/setLevel``."""

    level: LoggingLevel
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


# =============================================================================================
# The converter


class _WireError(ValueError):
    """A structuring failure with a readable message; ``key`` is a wire key below the path."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


converter = cattrs.Converter(detailed_validation=True)

_NoneType = type(None)
_UNION_ORIGINS = (Union, types.UnionType)
_PRIMITIVES = frozenset({str, int, float, bool})
#: class -> {python field name: wire key}, filled in as hooks are made; used by error messages.
_WIRE_KEYS: dict[type, dict[str, str]] = {}


def _describe(value: Any) -> str:
    """A short description of a bad value for an error message."""
    kind = {
        dict: "an object",
        list: "an array",
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        type(None): "null",
    }.get(type(value), type(value).__name__)
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{kind} ({text})" if value is not None else kind


def _wire_key(a: attrs.Attribute[Any]) -> str:
    """``snake_case`` -> ``camelCase``; ``meta`` -> ``_meta``; metadata ``wire`` overrides."""
    explicit = a.metadata.get("wire")
    if isinstance(explicit, str):
        return explicit
    if a.name == "meta":
        return "_meta"
    head, *rest = a.name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _has_extra(cls: type) -> bool:
    return any(a.name == "extra" for a in attrs.fields(cls))


def _wire_keys(cls: type) -> dict[str, str]:
    keys = _WIRE_KEYS.get(cls)
    if keys is None:
        attrs.resolve_types(cls)
        keys = {a.name: _wire_key(a) for a in attrs.fields(cls) if a.name != "extra"}
        _WIRE_KEYS[cls] = keys
    return keys


# --- primitives: strict, so a wrong JSON type is reported instead of silently coerced ---------


def _structure_str(value: Any, _: Any) -> str:
    if isinstance(value, str):
        return value
    raise _WireError(f"expected a string, got {_describe(value)}")


def _structure_bool(value: Any, _: Any) -> bool:
    if value is True or value is False:
        return value
    raise _WireError(f"expected a boolean, got {_describe(value)}")


def _structure_int(value: Any, _: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise _WireError(f"expected an integer, got {_describe(value)}")


def _structure_float(value: Any, _: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    raise _WireError(f"expected a number, got {_describe(value)}")


def _structure_any(value: Any, _: Any) -> Any:
    return value


converter.register_structure_hook(str, _structure_str)
converter.register_structure_hook(bool, _structure_bool)
converter.register_structure_hook(int, _structure_int)
converter.register_structure_hook(float, _structure_float)
converter.register_structure_hook_func(lambda t: t is Any, _structure_any)


def _is_literal(t: Any) -> bool:
    return get_origin(t) is Literal


def _literal_structure_factory(t: Any) -> Callable[[Any, Any], Any]:
    allowed = get_args(t)
    shown = ", ".join(repr(v) for v in allowed)

    def structure_literal(value: Any, _: Any) -> Any:
        # A tuple scan: the sets are tiny and unhashable input cannot raise.
        if value in allowed and type(value) in _PRIMITIVES:
            return value
        raise _WireError(f"expected one of {shown}, got {_describe(value)}")

    return structure_literal


def _is_primitive_union(t: Any) -> bool:
    if get_origin(t) not in _UNION_ORIGINS:
        return False
    # ``X | None`` goes to the optional factory, which reuses X's own (strict) hook.
    args = [a for a in get_args(t) if a is not _NoneType]
    return len(args) > 1 and all(a in _PRIMITIVES for a in args)


def _primitive_union_structure_factory(t: Any) -> Callable[[Any, Any], Any]:
    args = get_args(t)
    allow_none = _NoneType in args
    kinds = tuple(a for a in args if a is not _NoneType)
    allow_bool = bool in kinds
    # A JSON number may be written without a fraction: ints are valid where floats are.
    accepted = (*kinds, int) if float in kinds else kinds
    words = [
        {str: "a string", int: "an integer", float: "a number", bool: "a boolean"}[k] for k in kinds
    ]
    if allow_none:
        words.append("null")
    names = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]

    def structure_primitive_union(value: Any, _: Any) -> Any:
        if value is None:
            if allow_none:
                return None
        elif isinstance(value, accepted) and (allow_bool or not isinstance(value, bool)):
            return value
        raise _WireError(f"expected {names}, got {_describe(value)}")

    return structure_primitive_union


def _is_optional(t: Any) -> bool:
    if get_origin(t) not in _UNION_ORIGINS:
        return False
    args = get_args(t)
    return len(args) == 2 and _NoneType in args


def _optional_structure_factory(t: Any) -> Callable[[Any, Any], Any]:
    (inner,) = (a for a in get_args(t) if a is not _NoneType)
    inner_hook = converter.get_structure_hook(inner)

    def structure_optional(value: Any, _: Any) -> Any:
        return None if value is None else inner_hook(value, inner)

    return structure_optional


# --- containers: JSON arrays must be lists and objects dicts (a string is not a list) ---------


def _is_list(t: Any) -> bool:
    return get_origin(t) is list


def _list_structure_factory(t: Any) -> Callable[[Any, Any], Any]:
    args = get_args(t)
    elem_type: Any = args[0] if args else Any
    return _make_list_hook(converter.get_structure_hook(elem_type), elem_type)


def _make_list_hook(
    elem_hook: Callable[[Any, Any], Any], elem_type: Any
) -> Callable[[Any, Any], list[Any]]:
    def structure_list(value: Any, _: Any) -> list[Any]:
        if not isinstance(value, list):
            raise _WireError(f"expected an array, got {_describe(value)}")
        try:
            return [elem_hook(item, elem_type) for item in value]
        except Exception:
            pass
        # Slow path, only on failure: find every bad element and say where it is.
        errors: list[Exception] = []
        for index, item in enumerate(value):
            try:
                elem_hook(item, elem_type)
            except Exception as exc:
                exc.add_note(IterableValidationNote(f"item @ index {index}", index, elem_type))
                errors.append(exc)
        raise IterableValidationError("While structuring a list", errors, list)

    return structure_list


def _is_dict(t: Any) -> bool:
    return get_origin(t) is dict or t is dict


def _dict_structure_factory(t: Any) -> Callable[[Any, Any], Any]:
    args = get_args(t)
    value_type: Any = args[1] if len(args) == 2 else Any

    if value_type is Any:

        def structure_json_object(value: Any, _: Any) -> dict[str, Any]:
            if isinstance(value, dict):
                return value
            raise _WireError(f"expected an object, got {_describe(value)}")

        return structure_json_object

    value_hook = converter.get_structure_hook(value_type)

    def structure_dict(value: Any, _: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise _WireError(f"expected an object, got {_describe(value)}")
        errors: list[Exception] = []
        out: dict[str, Any] = {}
        for key, item in value.items():
            try:
                out[key] = value_hook(item, value_type)
            except Exception as exc:
                exc.add_note(IterableValidationNote(f"value @ key {key!r}", key, value_type))
                errors.append(exc)
        if errors:
            raise IterableValidationError("While structuring an object", errors, dict)
        return out

    return structure_dict


# --- discriminated unions ----------------------------------------------------------------------


def _by_key(
    key: str, table: Mapping[str, type], what: str, default: type | None = None
) -> Callable[[dict[str, Any]], type]:
    """Pick a union member by the value of a discriminator key."""
    shown = ", ".join(repr(k) for k in sorted(table))

    def pick(data: dict[str, Any]) -> type:
        tag = data.get(key)
        if tag is None:
            if default is not None:
                return default
            raise _WireError(f"missing {key!r}: expected one of {shown}", key)
        cls = table.get(tag) if isinstance(tag, str) else None
        if cls is None:
            shown_tag = repr(tag) if isinstance(tag, str) else _describe(tag)
            raise _WireError(f"unknown {what} {shown_tag}: expected one of {shown}", key)
        return cls

    return pick


def _pick_resource_contents(data: dict[str, Any]) -> type:
    if "text" in data:
        return TextResourceContents
    if "blob" in data:
        return BlobResourceContents
    raise _WireError("resource contents need a 'text' or a 'blob' field")


_CONTENT_TYPES: dict[str, type] = {
    "text": TextContent,
    "image": ImageContent,
    "audio": AudioContent,
    "resource_link": ResourceLink,
    "resource": EmbeddedResource,
}
_SAMPLING_CONTENT_TYPES: dict[str, type] = {
    "text": TextContent,
    "image": ImageContent,
    "audio": AudioContent,
    "tool_use": ToolUseContent,
    "tool_result": ToolResultContent,
}

#: Union members -> (how to pick one from a JSON object, a name for error messages).
_TAGGED_UNIONS: dict[frozenset[Any], tuple[Callable[[dict[str, Any]], type], str]] = {
    frozenset(get_args(ContentBlock)): (
        _by_key("type", _CONTENT_TYPES, "content type"),
        "content block",
    ),
    frozenset(get_args(SamplingContent)): (
        _by_key("type", _SAMPLING_CONTENT_TYPES, "sampling content type"),
        "sampling content block",
    ),
    frozenset(get_args(ResourceContents)): (_pick_resource_contents, "resource contents"),
    frozenset(get_args(Reference)): (
        _by_key(
            "type",
            {"ref/prompt": PromptReference, "ref/resource": ResourceTemplateReference},
            "reference type",
        ),
        "reference",
    ),
    frozenset(get_args(ElicitRequestParams)): (
        _by_key(
            "mode",
            {"form": ElicitRequestFormParams, "url": ElicitRequestURLParams},
            "elicitation mode",
            default=ElicitRequestFormParams,
        ),
        "elicitation params",
    ),
}


def _split_tagged_union(t: Any) -> tuple[frozenset[Any], bool, bool] | None:
    """For ``A | B [| list[A | B]] [| None]`` over a known tagged union: (members, list?, None?)."""
    if get_origin(t) not in _UNION_ORIGINS:
        return None
    members: set[Any] = set()
    list_members: frozenset[Any] | None = None
    has_none = False
    for arg in get_args(t):
        if arg is _NoneType:
            has_none = True
        elif get_origin(arg) is list and list_members is None:
            (inner,) = get_args(arg)
            list_members = frozenset(get_args(inner))
        else:
            members.add(arg)
    key = frozenset(members)
    if key not in _TAGGED_UNIONS or (list_members is not None and list_members != key):
        return None
    return key, list_members is not None, has_none


def _is_tagged_union(t: Any) -> bool:
    return _split_tagged_union(t) is not None


def _tagged_union_structure_factory(t: Any) -> Callable[[Any, Any], Any]:
    split = _split_tagged_union(t)
    assert split is not None
    key, allow_list, allow_none = split
    pick, what = _TAGGED_UNIONS[key]
    hooks = {cls: converter.get_structure_hook(cls) for cls in key}

    def structure_one(value: Any, _: Any = None) -> Any:
        if not isinstance(value, dict):
            raise _WireError(f"expected an object ({what}), got {_describe(value)}")
        cls = pick(value)
        return hooks[cls](value, cls)

    list_hook = _make_list_hook(structure_one, t) if allow_list else None

    if not allow_list and not allow_none:
        return structure_one

    def structure_union(value: Any, _: Any) -> Any:
        if value is None and allow_none:
            return None
        if list_hook is not None and isinstance(value, list):
            return list_hook(value, list)
        return structure_one(value)

    return structure_union


# --- attrs classes -----------------------------------------------------------------------------


def _structure_attrs_factory(cls: type) -> Callable[[Any, Any], Any]:
    keys = _wire_keys(cls)
    overrides: dict[str, Any] = {name: override(rename=wire) for name, wire in keys.items()}
    collect_extra = _has_extra(cls)
    if collect_extra:
        overrides["extra"] = override(omit=True)
    base: Callable[[Any], Any] = make_dict_structure_fn(cls, converter, **overrides)
    known = frozenset(keys.values())
    name = cls.__name__

    def structure_attrs(value: Any, _: Any = None) -> Any:
        if value.__class__ is not dict:
            if not isinstance(value, Mapping):
                raise _WireError(f"expected an object for {name}, got {_describe(value)}")
            value = dict(value)
        instance = base(value)
        if collect_extra and not value.keys() <= known:
            # The instance is brand new and not shared yet, so filling in the frozen field
            # here is safe; it avoids a second construction on the (rare) extra-keys path.
            object.__setattr__(
                instance, "extra", {k: v for k, v in value.items() if k not in known}
            )
        return instance

    return structure_attrs


def _is_json_native(t: Any) -> bool:
    """Whether values of type ``t`` are already JSON-ready (no unstructuring needed)."""
    if t is Any or t in _PRIMITIVES or t is _NoneType:
        return True
    origin = get_origin(t)
    if origin is Literal:
        return True
    if origin in _UNION_ORIGINS or origin is list or origin is dict:
        return all(_is_json_native(a) for a in get_args(t))
    return t is dict or t is list


def _unstructure_attrs_factory(cls: type) -> Callable[[Any], Any]:
    keys = _wire_keys(cls)
    overrides: dict[str, Any] = {}
    for a in attrs.fields(cls):
        if a.name not in keys:
            overrides[a.name] = override(omit=True)
            continue
        hook: Callable[[Any], Any] | None = None
        t = a.type
        if _is_json_native(t):
            hook = identity
        elif a.default is None and get_origin(t) in _UNION_ORIGINS:
            # Optional fields are skipped while None, so their hook never sees None.
            rest = [x for x in get_args(t) if x is not _NoneType]
            if len(rest) == 1:
                hook = converter.get_unstructure_hook(rest[0])
        # An absent optional field and a false flag (``isError``) are the same on the wire.
        omit = a.default is None or a.default is False
        overrides[a.name] = override(rename=keys[a.name], omit_if_default=omit, unstruct_hook=hook)
    base: Callable[[Any], dict[str, Any]] = make_dict_unstructure_fn(cls, converter, **overrides)
    if not _has_extra(cls):
        return base

    def unstructure_attrs(instance: Any) -> dict[str, Any]:
        out = base(instance)
        extra = instance.extra
        if extra:
            for key, value in extra.items():
                out.setdefault(key, value)  # a declared field wins over a stray extra key
        return out

    return unstructure_attrs


# Registered last so they are consulted first.
converter.register_structure_hook_factory(_is_literal, _literal_structure_factory)
converter.register_structure_hook_factory(_is_optional, _optional_structure_factory)
converter.register_structure_hook_factory(_is_primitive_union, _primitive_union_structure_factory)
converter.register_structure_hook_factory(_is_list, _list_structure_factory)
converter.register_structure_hook_factory(_is_dict, _dict_structure_factory)
converter.register_structure_hook_factory(_is_tagged_union, _tagged_union_structure_factory)
converter.register_structure_hook_factory(attrs.has, _structure_attrs_factory)
converter.register_unstructure_hook_factory(attrs.has, _unstructure_attrs_factory)


# --- public helpers ----------------------------------------------------------------------------


def to_wire(value: Any) -> Any:
    """Unstructure an attrs value (or a list/dict of them) into JSON-ready Python objects."""
    return converter.unstructure(value)


@overload
def from_wire(data: Any, cls: type[T]) -> T: ...
@overload
def from_wire(data: Any, cls: object) -> Any: ...
def from_wire(data: Any, cls: Any) -> Any:
    """Structure parsed JSON into ``cls`` (a class, or a union such as :data:`ContentBlock`).

    Raise ValueError, naming each offending field by its wire path, if ``data`` does not fit.
    """
    try:
        return converter.structure(data, cls)
    except StructureHandlerNotFoundError:
        raise
    except Exception as exc:
        problems = _problems(exc, "")
        raise ValueError(f"invalid {_type_name(cls)}: " + "; ".join(problems)) from exc


def result_from_wire(data: Any, cls: type[T]) -> T:
    """A result the peer answered with, structured as :func:`from_wire` does; one that does
    not fit is :class:`~trio_mcp.InvalidAnswer` (an ``MCPError``: whoever catches those catches
    it)."""
    try:
        return from_wire(data, cls)
    except ValueError as exc:
        raise InvalidAnswer(str(exc)) from None


def _type_name(cls: Any) -> str:
    name = getattr(cls, "__name__", None)
    if isinstance(name, str):
        return name
    split = _split_tagged_union(cls)
    if split is not None:
        return _TAGGED_UNIONS[split[0]][1]
    return repr(cls)


def _find_note(exc: BaseException, kind: type[T]) -> T | None:
    for note in getattr(exc, "__notes__", ()):
        if isinstance(note, kind):
            return note
    return None


def _problems(exc: BaseException, path: str) -> list[str]:
    """Flatten a (possibly nested) structuring failure into ``path: message`` lines."""
    if isinstance(exc, ClassValidationError):
        keys = _WIRE_KEYS.get(exc.cl, {})
        out: list[str] = []
        for sub in exc.exceptions:
            attr_note = _find_note(sub, AttributeValidationNote)
            if attr_note is None:
                out += _problems(sub, path)
            else:
                key = keys.get(attr_note.name, attr_note.name)
                out += _problems(sub, f"{path}.{key}" if path else key)
        return out
    if isinstance(exc, IterableValidationError):
        out = []
        for sub in exc.exceptions:
            item_note = _find_note(sub, IterableValidationNote)
            out += _problems(sub, f"{path}[{item_note.index!r}]" if item_note else path)
        return out
    if isinstance(exc, _WireError):
        if exc.key is not None:
            path = f"{path}.{exc.key}" if path else exc.key
        message = str(exc)
    elif isinstance(exc, KeyError):
        message = "required field is missing"
    else:
        message = f"{type(exc).__name__}: {exc}"
    return [f"{path}: {message}" if path else message]
