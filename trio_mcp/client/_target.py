"""What :func:`~trio_mcp.open_client` connects to.

The client knows no server class: an in-memory target is anything that can serve a connection
over a transport, which a :class:`~trio_mcp.Server` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeAlias, runtime_checkable

from ..transports._transport import Transport


@runtime_checkable
class Servable(Protocol):
    """Serves one connection on ``transport`` until the peer goes away."""

    async def serve_transport(self, transport: Transport, /) -> None: ...


#: A servable (served in memory), an ``http(s)://`` or ``ws(s)://`` URL, a command to spawn (a
#: program, or a sequence of the program and its arguments), or a transport.
Target: TypeAlias = Servable | str | Sequence[str] | Transport
