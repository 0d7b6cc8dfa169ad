"""The exceptions trio_mcp raises on purpose, all derived from :class:`MCPError`.

Sans-IO, like the rest of ``protocol/``: none of them needs trio, so a transport can raise
:class:`ConnectionClosed` without importing the engine. The JSON-RPC error a
:class:`ProtocolError` carries is the framing's :class:`~trio_mcp.protocol._jsonrpc.ErrorObject`,
defined there with the error codes and :data:`~trio_mcp.protocol._jsonrpc.NO_DATA` (the data of
an error that has none), since parsing and encoding need them too.
"""

from __future__ import annotations

from typing import Any, Self

from ._jsonrpc import NO_DATA, ErrorObject, RequestId


class MCPError(Exception):
    """Base class of every error trio_mcp raises on purpose."""


class ProtocolError(MCPError):
    """A JSON-RPC error: received from the peer, or raised by a handler to answer with one.

    It carries one :class:`ErrorObject` (:attr:`error`); ``code``, ``message`` and ``data`` are
    read from it. ``data`` is :data:`NO_DATA` when the error has none (``None`` is a JSON null).
    The message and data of a ``ProtocolError`` raised in a handler reach the peer as written,
    so they must not carry internals. Any other exception becomes a generic -32603.
    """

    #: The error as it travels on the wire.
    error: ErrorObject

    def __init__(self, code: int, message: str | None = None, data: Any = NO_DATA) -> None:
        self.error = ErrorObject.make(code, message, data=data)
        super().__init__(f"{self.error.message} (code {code})")

    @classmethod
    def from_error(cls, error: ErrorObject) -> Self:
        return cls(error.code, error.message, error.data)

    @property
    def code(self) -> int:
        return self.error.code

    @property
    def message(self) -> str:
        return self.error.message

    @property
    def data(self) -> Any:
        return self.error.data


class InvalidAnswer(MCPError, ValueError):
    """The peer's answer does not fit what was asked: a result whose shape is not the
    protocol's (a tool call's ``content`` that is not a list, a text block with no ``text``),
    its message naming each field that does not fit; or, in a server, an elicitation answer
    that fails its schema. The request fails with it and the connection goes on. Left uncaught
    in a tool, its message is the tool's ``isError`` result, so the model learns what went
    wrong. A ``ValueError`` too, as a malformed value's conversion is anywhere."""


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
