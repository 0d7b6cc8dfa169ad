"""The exceptions a user of trio_mcp sees, and the collapsing of exception groups.

Inside the library Trio's strict exception groups are the rule; at every public boundary a group
holding one real error (plus cancellations) is unwrapped so callers can write plain ``except``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import trio

from .protocol._jsonrpc import INTERNAL_ERROR, STANDARD_MESSAGES, ErrorObject, RequestId


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


def internal_error() -> ErrorObject:
    return ErrorObject.make(INTERNAL_ERROR, "Internal error")


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def single_error(exc: BaseException) -> BaseException | None:
    """The one meaningful exception inside ``exc`` (ignoring cancellations), if there is one."""
    if not isinstance(exc, BaseExceptionGroup):
        return exc
    real = [leaf for leaf in _leaves(exc) if not isinstance(leaf, trio.Cancelled)]
    return real[0] if len(real) == 1 else None


@contextmanager
def collapse_exception_groups() -> Iterator[None]:
    """Re-raise a group that holds one real error as that error alone."""
    try:
        yield
    except BaseExceptionGroup as group:
        only = single_error(group)
        if only is None:
            raise
        raise only from only.__cause__
