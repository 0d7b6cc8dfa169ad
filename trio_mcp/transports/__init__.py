"""Transports move framed messages; they never interpret methods."""

from ._events import EventStore, MemoryEventStore
from ._http_server import HttpOptions, McpHttpApp
from ._memory import MemoryTransport, memory_transport_pair
from ._stdio import (
    DEFAULT_MAX_LINE_BYTES,
    LineTransport,
    ProcessTransport,
    open_process_transport,
    serve_stdio_transport,
)

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "EventStore",
    "HttpOptions",
    "LineTransport",
    "McpHttpApp",
    "MemoryEventStore",
    "MemoryTransport",
    "ProcessTransport",
    "memory_transport_pair",
    "open_process_transport",
    "serve_stdio_transport",
]
