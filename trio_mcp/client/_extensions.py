"""Client extensions: the client half of a feature declared under the ``extensions`` capability.

An extension (tasks, and whatever comes next) lives in a room of its own; the client core names
none. What one gives a client, each optional (:class:`ClientExtension`'s defaults give nothing):

- the modern requests that declare it in their own client capabilities, and its entry there
  (:meth:`~ClientExtension.declares`, :meth:`~ClientExtension.capability`); declaring
  ``"initialize"`` declares it in the handshake era's ``initialize`` too;
- a ``resultType`` it takes in place of ``complete`` for a request it declared
  (:meth:`~ClientExtension.accepts`);
- how a ``tools/call`` answered that way is followed to its ``CallToolResult``
  (:meth:`~ClientExtension.follow_tool_call`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from ..protocol._jsonrpc import JSONObject
from ..protocol._types import CallToolResult, result_from_wire

#: Sends one request and returns its raw result: ``Client.request`` with the call's options.
Requester = Callable[[str, JSONObject], Awaitable[JSONObject]]
#: Answers a map of input requests by key, through the client's callbacks.
Fulfiller = Callable[[dict[str, Any]], Awaitable[JSONObject]]


class ClientExtension:
    """A client extension: subclass it and override what it gives. ``name`` is its key under
    ``extensions`` in a request's client capabilities."""

    name: str = ""

    def declares(self, method: str) -> bool:
        """Whether a modern request of ``method`` declares this extension (``"initialize"``:
        whether the handshake declares it)."""
        return False

    def capability(self) -> JSONObject:
        """Its entry under ``extensions`` in the client capabilities of a request declaring it."""
        return {}

    def accepts(self, method: str, result_type: str) -> bool:
        """Whether ``result_type`` answers ``method`` (declared by this extension) as a result
        the caller takes, rather than an error."""
        return False

    async def follow_tool_call(
        self, name: str, answer: JSONObject, send: Requester, fulfil: Fulfiller, deadline: float
    ) -> CallToolResult:
        """The result of the ``tools/call`` of tool ``name`` whose ``answer`` this extension
        accepted, by ``deadline`` (Trio's clock; ``inf``: none)."""
        await trio.lowlevel.checkpoint()
        return result_from_wire(answer, CallToolResult)
