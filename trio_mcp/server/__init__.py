"""The server side: ``Server``, its decorators, and the ``Context`` handlers receive."""

from ._auth import (
    Auth,
    InvalidToken,
    Principal,
    StaticTokenVerifier,
    TokenVerifier,
    VerifierUnavailable,
)
from ._bus import BusError, BusEvent, LocalBus, NotificationBus
from ._connection import ResourceNotFound, ServerConnection, ToolError
from ._context import CapabilityMissing, Context, InvalidAnswer
from ._event_store import EventStore, EventStoreUnavailable, MemoryEventStore, Replay, StreamMeta
from ._http_app import HttpOptions, McpHttpApp, client_address
from ._lifespan import LifespanFailed
from ._middleware import MiddlewareContext, MiddlewareServer
from ._mount import Mount
from ._redis_events import RedisEventStore
from ._redis_relay import RedisRelay
from ._redis_sessions import RedisSessionStore
from ._redis_tasks import RedisTaskStore
from ._registry import RequestRecord
from ._relay import MemoryRelay, Relay, RelayUnavailable
from ._server import Server
from ._session_store import (
    MemorySessionStore,
    SessionRecord,
    SessionStore,
    SessionStoreUnavailable,
)
from ._state import ConnectionState
from ._tasks import MemoryTaskStore, TaskRecord, TaskStore, TaskStoreUnavailable

__all__ = [
    "Auth",
    "BusError",
    "BusEvent",
    "CapabilityMissing",
    "ConnectionState",
    "Context",
    "EventStore",
    "EventStoreUnavailable",
    "HttpOptions",
    "InvalidAnswer",
    "InvalidToken",
    "LifespanFailed",
    "LocalBus",
    "McpHttpApp",
    "MemoryEventStore",
    "MemoryRelay",
    "MemorySessionStore",
    "MemoryTaskStore",
    "MiddlewareContext",
    "MiddlewareServer",
    "Mount",
    "NotificationBus",
    "Principal",
    "RedisEventStore",
    "RedisRelay",
    "RedisSessionStore",
    "RedisTaskStore",
    "Relay",
    "RelayUnavailable",
    "Replay",
    "RequestRecord",
    "ResourceNotFound",
    "Server",
    "ServerConnection",
    "SessionRecord",
    "SessionStore",
    "SessionStoreUnavailable",
    "StaticTokenVerifier",
    "StreamMeta",
    "TaskRecord",
    "TaskStore",
    "TaskStoreUnavailable",
    "TokenVerifier",
    "ToolError",
    "VerifierUnavailable",
    "client_address",
]
