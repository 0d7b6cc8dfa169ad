"""trio_mcp: a Trio-native Model Context Protocol server and client.

This is the public API: everything a server or a client uses. The modules behind it are private.
The engine (sessions, transports, dispatchers) is in :mod:`trio_mcp.lowlevel`, the sans-IO
protocol core in :mod:`trio_mcp.protocol`.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import TYPE_CHECKING

from .client import (
    Client,
    DiscoverInfo,
    InitializeError,
    PaginationError,
    Servable,
    Subscription,
    open_client,
)
from .protocol import (
    HANDSHAKE_VERSIONS,
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LATEST_HANDSHAKE_VERSION,
    LATEST_MODERN_VERSION,
    LOGGING_LEVELS,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    MODERN_VERSIONS,
    NO_DATA,
    PARSE_ERROR,
    RESOURCE_NOT_FOUND,
    SESSION_EXPIRED,
    UNSUPPORTED_PROTOCOL_VERSION,
    URL_ELICITATION_REQUIRED,
    Annotations,
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ClientCapabilities,
    CompleteResult,
    Completion,
    CompletionArgument,
    CompletionContext,
    ConnectionClosed,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    EmbeddedResource,
    Era,
    ErrorObject,
    GetPromptResult,
    Icon,
    ImageContent,
    Implementation,
    InitializeResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    LoggingMessageNotificationParams,
    MCPError,
    ModelHint,
    ModelPreferences,
    Notification,
    Prompt,
    PromptArgument,
    PromptMessage,
    PromptReference,
    ProtocolError,
    ReadResourceResult,
    RequestCancelled,
    RequestId,
    RequestTimeout,
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
    from_wire,
    to_wire,
)
from .server import (
    CapabilityMissing,
    Context,
    EventStore,
    HttpOptions,
    McpHttpApp,
    MemoryEventStore,
    RequestRecord,
    Server,
    ToolError,
)
from .server._context import NestedRequestError

if TYPE_CHECKING:
    from .server._hypercorn import serve_http
    from .transports._http_client import SessionExpired

__version__ = importlib.metadata.version("trio-mcp")

# Imported on first use, so that `import trio_mcp` (a stdio server, say) loads neither hypercorn
# nor httpx.
_LAZY = {
    "serve_http": "trio_mcp.server._hypercorn",
    "SessionExpired": "trio_mcp.transports._http_client",
}


if not TYPE_CHECKING:  # type checkers see the imports above, and no other name

    def __getattr__(name: str) -> object:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value


__all__ = [
    "HANDSHAKE_VERSIONS",
    "HEADER_MISMATCH",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "LATEST_HANDSHAKE_VERSION",
    "LATEST_MODERN_VERSION",
    "LOGGING_LEVELS",
    "METHOD_NOT_FOUND",
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "MODERN_VERSIONS",
    "NO_DATA",
    "PARSE_ERROR",
    "RESOURCE_NOT_FOUND",
    "SESSION_EXPIRED",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "URL_ELICITATION_REQUIRED",
    "Annotations",
    "AudioContent",
    "BlobResourceContents",
    "CallToolResult",
    "CapabilityMissing",
    "Client",
    "ClientCapabilities",
    "CompleteResult",
    "Completion",
    "CompletionArgument",
    "CompletionContext",
    "ConnectionClosed",
    "Context",
    "CreateMessageRequestParams",
    "CreateMessageResult",
    "DiscoverInfo",
    "ElicitRequestFormParams",
    "ElicitRequestURLParams",
    "ElicitResult",
    "EmbeddedResource",
    "Era",
    "ErrorObject",
    "EventStore",
    "GetPromptResult",
    "HttpOptions",
    "Icon",
    "ImageContent",
    "Implementation",
    "InitializeError",
    "InitializeResult",
    "ListPromptsResult",
    "ListResourceTemplatesResult",
    "ListResourcesResult",
    "ListToolsResult",
    "LoggingMessageNotificationParams",
    "MCPError",
    "McpHttpApp",
    "MemoryEventStore",
    "ModelHint",
    "ModelPreferences",
    "NestedRequestError",
    "Notification",
    "PaginationError",
    "Prompt",
    "PromptArgument",
    "PromptMessage",
    "PromptReference",
    "ProtocolError",
    "ReadResourceResult",
    "RequestCancelled",
    "RequestId",
    "RequestRecord",
    "RequestTimeout",
    "Resource",
    "ResourceLink",
    "ResourceTemplate",
    "ResourceTemplateReference",
    "Root",
    "SamplingMessage",
    "Servable",
    "Server",
    "ServerCapabilities",
    "SessionExpired",
    "Subscription",
    "TextContent",
    "TextResourceContents",
    "Tool",
    "ToolAnnotations",
    "ToolChoice",
    "ToolError",
    "ToolExecution",
    "ToolResultContent",
    "ToolUseContent",
    "from_wire",
    "open_client",
    "serve_http",
    "to_wire",
]
