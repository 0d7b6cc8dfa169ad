"""Transports move framed messages; they never interpret methods."""

from ..protocol._framing import DEFAULT_MAX_LINE_BYTES
from ._memory import MemoryTransport, memory_transport_pair
from ._stdio import (
    LineTransport,
    ProcessTransport,
    open_process_transport,
    serve_stdio_transport,
)
from ._transport import BaseSender, BaseTransport, OutgoingMessage, Sender, Transport

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "BaseSender",
    "BaseTransport",
    "LineTransport",
    "MemoryTransport",
    "OutgoingMessage",
    "ProcessTransport",
    "Sender",
    "Transport",
    "memory_transport_pair",
    "open_process_transport",
    "serve_stdio_transport",
]
