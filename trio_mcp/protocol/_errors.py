"""The exceptions trio_mcp raises on purpose, all derived from :class:`MCPError`.

Sans-IO, like the rest of ``protocol/``: none of them needs trio, so a transport can raise
:class:`ConnectionClosed` without importing the engine. The JSON-RPC error they carry on the
wire is :class:`~trio_mcp.protocol._jsonrpc.ErrorObject`.
"""

from __future__ import annotations

from typing import Any

from ._jsonrpc import STANDARD_MESSAGES, ErrorObject, RequestId


class MCPError(Exception):
    """Base class of every error trio_mcp raises on purpose."""


class ProtocolError(MCPError):
    """A JSON-RPC error: received from the peer, or raised by a handler to answer with one.

    The message and data of a ``ProtocolError`` raised in a handler reach the peer as written,
    so they must not carry internals. Any other exception becomes a generic -32603.
    """

    def __init__(self, code: int, message: str | None = None, *data: Any) -> None:
        self.code = code
        self.message = message if message is not None else STANDARD_MESSAGES.get(code, "Error")
        self.has_data = bool(data)
        self.data = data[0] if data else None
        super().__init__(f"{self.message} (code {code})")

    @classmethod
    def from_error(cls, error: ErrorObject) -> ProtocolError:
        if error.has_data:
            return cls(error.code, error.message, error.data)
        return cls(error.code, error.message)

    def to_error(self) -> ErrorObject:
        if self.has_data:
            return ErrorObject.make(self.code, self.message, self.data)
        return ErrorObject.make(self.code, self.message)


class ConnectionClosed(MCPError):
    """The connection to the peer ended; every pending request fails with this at once."""


class RequestTimeout(MCPError):
    """A request got no answer in time; the peer has been told to cancel it."""

    def __init__(self, method: str, timeout: float | None, max_total: float | None) -> None:
        self.method = method
        self.timeout = timeout
        self.max_total = max_total
        parts = []
        if timeout is not None:
            parts.append(f"no response or progress for {timeout:g}s")
        if max_total is not None:
            parts.append(f"total limit {max_total:g}s")
        super().__init__(f"{method} timed out ({'; '.join(parts)})")


class RequestCancelled(MCPError):
    """A request was cancelled by id, not by the caller's own Trio scope.

    Raised in a client caller when ``client.cancel(request_id)`` cancels its request; raised by
    a server handler to end its request with no response.
    """

    def __init__(self, request_id: RequestId | None = None, reason: str | None = None) -> None:
        self.request_id = request_id
        self.reason = reason
        super().__init__("Request was cancelled" + (f": {reason}" if reason else ""))
