"""WebSocket client: one MCP connection over a ``ws://`` or ``wss://`` socket (trio-websocket).

One JSON-RPC message per text frame each way, the subprotocol ``mcp`` offered (a server that
picks none is accepted, as browsers do; one that picks another is refused by trio-websocket's
handshake). trio-websocket answers pings and bounds what it buffers: a message over
``max_message_bytes`` closes the socket with 1009. Sending waits for the socket, so a server
that does not read holds up our writer, never our memory. trio-websocket is an optional
dependency (the ``websocket`` extra), imported only when a socket is opened.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import orjson

from ..protocol._errors import ConnectionClosed
from ..protocol._jsonrpc import Batch, Parsed, RequestId, parse
from ._transport import BaseTransport

if TYPE_CHECKING:
    from trio_websocket import WebSocketConnection

#: The WebSocket subprotocol of MCP.
SUBPROTOCOL = "mcp"
DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024
#: Close codes (RFC 6455 section 7.4.1).
NORMAL = 1000
UNSUPPORTED_DATA = 1003

MISSING = (
    "a ws:// or wss:// target needs trio-websocket: pip install 'trio-mcp[websocket]' "
    "(or pip install trio-websocket)"
)


def is_ws_url(target: object) -> bool:
    return isinstance(target, str) and target.lower().startswith(("ws://", "wss://"))


class WebSocketClientTransport(BaseTransport):
    """An open socket as the engine's transport."""

    def __init__(self, connection: WebSocketConnection) -> None:
        self._connection = connection

    @property
    def subprotocol(self) -> str | None:
        """What the server picked (``mcp``, or None if it picked none)."""
        return self._connection.subprotocol

    async def receive(self) -> Parsed | Batch:
        from trio_websocket import ConnectionClosed as SocketClosed

        try:
            message = await self._connection.get_message()
        except SocketClosed as exc:
            raise ConnectionClosed(f"the WebSocket closed: {_describe(exc)}") from None
        if isinstance(message, bytes):
            await self._connection.aclose(UNSUPPORTED_DATA, "MCP messages are text frames")
            raise ConnectionClosed("the server sent a binary frame: the socket was closed (1003)")
        return parse(message)

    async def send(
        self, data: bytes, *, related_request_id: RequestId | None = None, final: bool = False
    ) -> None:
        from trio_websocket import ConnectionClosed as SocketClosed

        try:
            await self._connection.send_message(data.decode())
        except SocketClosed as exc:
            raise ConnectionClosed(f"the WebSocket closed: {_describe(exc)}") from None

    async def aclose(self) -> None:
        await self._connection.aclose(NORMAL)


def _describe(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    if reason is None:
        return str(exc)
    code, text = getattr(reason, "code", None), getattr(reason, "reason", None)
    return f"{code} {text}" if text else str(code)


@asynccontextmanager
async def open_ws_transport(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ssl_context: ssl.SSLContext | None = None,
    connect_timeout: float = 30.0,
    close_timeout: float = 2.0,
) -> AsyncIterator[WebSocketClientTransport]:
    """A WebSocket to ``url`` (``ws://`` or ``wss://``), closed (1000) on exit.

    ``headers`` go on the upgrade request (``Authorization: Bearer ...``, say). A refused
    handshake raises :class:`ConnectionClosed` naming the status and the server's reason.
    """
    if not is_ws_url(url):
        raise ValueError(f"not a ws(s) URL: {url!r}")
    try:
        import trio_websocket
    except ImportError:
        raise ImportError(MISSING) from None
    if ssl_context is None and url.lower().startswith("wss://"):
        ssl_context = ssl.create_default_context()
    extra = [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    opened = False
    try:
        async with trio_websocket.open_websocket_url(
            url,
            ssl_context,
            subprotocols=[SUBPROTOCOL],
            extra_headers=extra,
            max_message_size=max_message_bytes,
            connect_timeout=connect_timeout,
            disconnect_timeout=close_timeout,
        ) as connection:
            opened = True
            yield WebSocketClientTransport(connection)
    except trio_websocket.ConnectionRejected as rejected:
        if opened:
            raise
        raise ConnectionClosed(
            f"the WebSocket handshake with {url} was refused: HTTP {rejected.status_code}"
            + _reason(rejected.body)
        ) from None
    except (trio_websocket.HandshakeError, trio_websocket.ConnectionTimeout, OSError) as exc:
        if opened:
            raise
        raise ConnectionClosed(f"cannot open a WebSocket to {url}: {exc!r}") from None


def _reason(body: bytes | None) -> str:
    """The message of a JSON-RPC error body (ours), or the body's start."""
    if not body:
        return ""
    try:
        error = orjson.loads(body).get("error", {})
        return f": {error['message']}"
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError):
        return ": " + body[:200].decode(errors="replace")
