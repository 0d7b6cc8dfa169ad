"""The server side: ``Server``, its decorators, and the ``Context`` handlers receive."""

from ..http._app import HttpOptions, McpHttpApp, client_address
from ..http._event_store import (
    EventStore,
    EventStoreUnavailable,
    MemoryEventStore,
    Replay,
    StreamMeta,
)
from ..http._relay import MemoryRelay, Relay, RelayUnavailable
from ..http._session_store import (
    MemorySessionStore,
    SessionRecord,
    SessionStore,
    SessionStoreUnavailable,
)
from ..redis._event_store import RedisEventStore
from ..redis._relay import RedisRelay
from ..redis._session_store import RedisSessionStore
from ..redis._task_store import RedisTaskStore
from ._bus import BusError, BusEvent, LocalBus, NotificationBus
from ._connection import ResourceNotFound, ServerConnection, ToolError
from ._context import CapabilityMissing, Context, InvalidAnswer
from ._lifespan import LifespanFailed
from ._middleware import MiddlewareContext, MiddlewareServer
from ._mount import Mount
from ._principal import (
    Auth,
    InvalidToken,
    Principal,
    StaticTokenVerifier,
    TokenVerifier,
    VerifierUnavailable,
)
from ._registry import RequestRecord
from ._server import Server
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
