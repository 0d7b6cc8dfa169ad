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
from ._redis_events import RedisEventStore
from ._registry import RequestRecord
from ._server import Server
from ._state import ConnectionState
from ._tasks import MemoryTaskStore, TaskRecord, TaskStore

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
    "LocalBus",
    "McpHttpApp",
    "MemoryEventStore",
    "MemoryTaskStore",
    "NotificationBus",
    "Principal",
    "RedisEventStore",
    "Replay",
    "RequestRecord",
    "ResourceNotFound",
    "Server",
    "ServerConnection",
    "StaticTokenVerifier",
    "StreamMeta",
    "TaskRecord",
    "TaskStore",
    "TokenVerifier",
    "ToolError",
    "VerifierUnavailable",
    "client_address",
]
