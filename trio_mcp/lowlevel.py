"""The engine and its hooks: for writing a transport or a dispatcher, not for daily use.

:class:`Engine` runs one connection in either role: it reads framed messages from a
:class:`Transport`, asks a :class:`Dispatcher` where each request goes, runs every request in its
own task and cancel scope, and writes through one ordered writer. The server's dispatcher is
:class:`ServerConnection`, the client's :class:`ClientDispatcher`.

What composition and proxies are built on is here too, public: ``Engine.nursery`` (the
connection's own tasks), ``ServerConnection.share``, ``handle`` and ``authorize`` (a server
answering on another server's connection).
"""

from ._engine import Dispatcher, Engine, InFlight, Observer, ProgressCallback, Route, Watch
from .client._client import ClientDispatcher
from .server._connection import ServerConnection
from .server._context import ConnectionView
from .transports._memory import MemoryTransport, memory_transport_pair
from .transports._transport import BaseSender, BaseTransport, OutgoingMessage, Sender, Transport

__all__ = [
    "BaseSender",
    "BaseTransport",
    "ClientDispatcher",
    "ConnectionView",
    "Dispatcher",
    "Engine",
    "InFlight",
    "MemoryTransport",
    "Observer",
    "OutgoingMessage",
    "ProgressCallback",
    "Route",
    "Sender",
    "ServerConnection",
    "Transport",
    "Watch",
    "memory_transport_pair",
]


def __getattr__(name: str) -> object:
    if name == "Session":  # its name until 0.1: an engine, not an MCP session
        import warnings

        warnings.warn(
            "trio_mcp.lowlevel.Session is trio_mcp.lowlevel.Engine",
            DeprecationWarning,
            stacklevel=2,
        )
        return Engine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
