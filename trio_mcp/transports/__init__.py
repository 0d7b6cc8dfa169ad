"""Transports move framed messages; they never interpret methods."""

from ._memory import MemoryTransport, memory_transport_pair

__all__ = ["MemoryTransport", "memory_transport_pair"]
