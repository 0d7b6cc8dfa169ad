"""The server side: ``Server``, its decorators, and the ``Context`` handlers receive."""

from ._connection import ServerConnection, ToolError
from ._context import CapabilityMissing, Context
from ._server import RequestRecord, Server

__all__ = [
    "CapabilityMissing",
    "Context",
    "RequestRecord",
    "Server",
    "ServerConnection",
    "ToolError",
]
