"""The ASGI binding: Streamable HTTP, the 2024-11-05 HTTP+SSE transport and WebSocket, served by
hypercorn's trio worker; the stores a second worker shares (events, session records, the relay).

The server (:mod:`trio_mcp.server`) knows nothing of this room: ``Server.http_app()`` and
``Server.run("http")`` import it when they are called, so a stdio server never loads it.
"""

from ._app import McpHttpApp
from ._event_store import EventStore, EventStoreUnavailable, MemoryEventStore, Replay, StreamMeta
from ._hypercorn import serve_http
from ._limit_store import LimitStore, LimitStoreUnavailable, MemoryLimitStore
from ._options import (
    HostRules,
    HttpOptions,
    LegacySse,
    Limits,
    RateLimit,
    ScaleOut,
    WebSocketOptions,
)
from ._relay import MemoryRelay, Relay, RelayUnavailable
from ._session_store import MemorySessionStore, SessionRecord, SessionStore, SessionStoreUnavailable
from ._sessions import client_address

__all__ = [
    "EventStore",
    "EventStoreUnavailable",
    "HostRules",
    "HttpOptions",
    "LegacySse",
    "LimitStore",
    "LimitStoreUnavailable",
    "Limits",
    "McpHttpApp",
    "MemoryEventStore",
    "MemoryLimitStore",
    "MemoryRelay",
    "MemorySessionStore",
    "RateLimit",
    "Relay",
    "RelayUnavailable",
    "Replay",
    "ScaleOut",
    "SessionRecord",
    "SessionStore",
    "SessionStoreUnavailable",
    "StreamMeta",
    "WebSocketOptions",
    "client_address",
    "serve_http",
]
