"""Transports move framed messages; they never interpret methods."""

from ._memory import MemoryTransport, memory_transport_pair
from ._stdio import (
    DEFAULT_MAX_LINE_BYTES,
    LineTransport,
    ProcessTransport,
    open_process_transport,
    serve_stdio_transport,
)
from ._transport import BaseTransport, OutgoingMessage, Transport

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "BaseTransport",
    "LineTransport",
    "MemoryTransport",
    "OutgoingMessage",
    "ProcessTransport",
    "Transport",
    "memory_transport_pair",
    "open_process_transport",
    "serve_stdio_transport",
]
