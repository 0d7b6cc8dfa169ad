"""Transports move framed messages; they never interpret methods."""

from ..protocol._framing import DEFAULT_MAX_LINE_BYTES
from ._memory import MemoryTransport, memory_transport_pair
from ._stdio import (
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
