"""WebSocket: one MCP connection per socket, on the ASGI app's ``websocket`` scopes.

hypercorn serves the socket (wsproto under it: the handshake, pings answered with pongs,
fragments joined, its own bound ``websocket_max_message_size`` on what it buffers); this module
decides whether to accept it and then moves messages: one JSON-RPC message (or batch) per text
frame, each way. The socket is a transport the engine reads, so a connection here is exactly a
stdio connection: :meth:`Server.serve_transport` runs it, one task per request, both eras
(``initialize`` and then the handshake era, or modern requests each carrying their own version).

The handshake is refused, before anything of MCP runs, with an HTTP response (ASGI's
``websocket.http.response``, which hypercorn supports) carrying a JSON-RPC error body: the
Host/Origin checks of Streamable HTTP (the same functions) and the authorization gate (401 with
its challenge), then a client that does not offer the ``mcp`` subprotocol (400: the TypeScript
SDK's ``WebSocketClientTransport`` offers it, and a browser refuses a socket whose server picked
none it offered). Once open, the socket is closed with 1003 on a binary frame, 1009 on a
message over ``WebSocketOptions.max_message_bytes``, 1001 when the server shuts down, 1011 when
the client did not answer a keep-alive ``ping`` request (``WebSocketOptions.ping_interval``: ASGI
has no WebSocket ping for an app to send), 1000 when the connection simply ends. A dropped
socket is the peer gone: what it had in flight is cancelled. Writes wait for the socket
(hypercorn writes to TCP before a send returns), so a client that does not read holds up its own
connection's writer, and the engine stops reading from it once ``Server.max_queued_bytes`` are
queued: memory stays bounded.
"""

from __future__ import annotations

import logging
import math
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

import trio

from ..protocol._errors import ConnectionClosed, ProtocolError, RequestTimeout
from ..protocol._jsonrpc import (
    Batch,
    ErrorResponse,
    Invalid,
    Parsed,
    Request,
    RequestId,
    encode,
    parse,
)
from ..server._principal import Principal
from ..transports._transport import BaseTransport
from ._admission import Admission, draining_error
from ._asgi import HttpError, Receive, Scope, Send
from ._options import HttpOptions, WebSocketOptions
from ._sessions import RegisteredSession, SessionRegistry, TransportKind

if TYPE_CHECKING:
    from .._engine import Engine
    from ..transports._transport import Transport
    from ._client_limits import ClientLimits

logger = logging.getLogger("trio_mcp.http")

#: The WebSocket subprotocol of MCP (the TypeScript SDK's ``WebSocketClientTransport`` offers it).
SUBPROTOCOL = "mcp"

#: Close codes (RFC 6455 section 7.4.1).
NORMAL = 1000
GOING_AWAY = 1001
UNSUPPORTED_DATA = 1003
MESSAGE_TOO_BIG = 1009
INTERNAL = 1011

#: After a shutdown or a cut, how long the close frame may take to be written.
_CLOSE_GUARD = 1.0


class _Serves(Protocol):
    """What the endpoint needs of its server beyond the HTTP app's needs (``Server`` has it)."""

    async def serve_transport(
        self,
        transport: Transport,
        *,
        principal: Principal | None = None,
        transport_name: str = ...,
        task_status: trio.TaskStatus[Engine] = ...,
    ) -> None: ...


class WebSocketHost(Protocol):
    """What the endpoint needs of the app it is part of (``McpHttpApp``, which imports this
    module: named here by its shape)."""

    @property
    def options(self) -> HttpOptions: ...
    @property
    def server(self) -> object: ...
    @property
    def admission(self) -> Admission: ...
    @property
    def registry(self) -> SessionRegistry: ...
    @property
    def client_limits(self) -> ClientLimits: ...


class SocketSession(RegisteredSession):
    """One open socket, as the registry counts it: its caps, its idle expiry and its drain
    are those of every transport. Idle past its deadline, it is closed with 1001 (the
    registry watches that deadline and cancels the session's scope)."""

    __slots__ = ()

    over = TransportKind.WEBSOCKET

    def close(self) -> None:
        self.scope.cancel()


class WebSocketTransport(BaseTransport):
    """One accepted socket as the engine's transport: text frames in, text frames out."""

    def __init__(
        self, receive: Receive, send: Send, session: SocketSession, *, max_message_bytes: int
    ) -> None:
        self._receive = receive
        self._send = send
        self.session = session
        self.max_message_bytes = max_message_bytes
        #: How to close the socket once the engine is done (None: the peer closed it).
        self.close_code: int | None = NORMAL
        self.close_reason = ""

    async def receive(self) -> Parsed | Batch:
        session = self.session
        # The engine asks for the next message once it took the last one: its deadline runs
        # from here if nothing is in flight.
        session.touch()
        message = await self._receive()
        kind = message["type"]
        if kind == "websocket.disconnect":
            self.close_code = None
            raise trio.EndOfChannel
        if kind != "websocket.receive":
            raise self._closing(INTERNAL, f"unexpected ASGI message {kind!r}")
        text = message.get("text")
        if text is None:
            raise self._closing(
                UNSUPPORTED_DATA, "binary frames are not MCP: send each message as a text frame"
            )
        limit = self.max_message_bytes
        # A character is 1 to 4 bytes in UTF-8: most texts are decided without encoding them.
        if len(text) > limit or (len(text) * 4 > limit and len(text.encode()) > limit):
            raise self._closing(MESSAGE_TOO_BIG, f"message over the limit of {limit} bytes")
        parsed = parse(text)
        if isinstance(parsed, Request):
            if session.registry.draining:
                # New work, refused as on every transport while draining; answers and cancels
                # go on (a request in flight may wait for them).
                return Invalid(parsed.id, draining_error())
            session.arrived(request=parsed.method != "initialize")
        else:
            session.arrived(request=isinstance(parsed, Batch))
        return parsed

    def _closing(self, code: int, reason: str) -> ConnectionClosed:
        """The socket is to be closed with ``code`` (a close reason fits in 123 bytes): what
        the read loop is told, so that the engine winds the connection down."""
        self.close_code, self.close_reason = code, reason
        return ConnectionClosed(reason)

    async def send(
        self, data: bytes, *, related_request_id: RequestId | None = None, final: bool = False
    ) -> None:
        if final:
            self.session.touch()  # a request ended: the socket may be idle now
        try:
            await self._send({"type": "websocket.send", "text": data.decode()})
        except (OSError, RuntimeError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            # hypercorn refuses a send once the socket closed (its own error type).
            raise ConnectionClosed(f"cannot write to the peer: {exc}") from None

    def request_suppressed(self, request_id: RequestId) -> None:
        self.session.touch()

    async def close(self, code: int, reason: str = "") -> None:
        """Send the close frame (bounded, shielded: it is also sent while being cancelled)."""
        with trio.CancelScope(shield=True), trio.move_on_after(_CLOSE_GUARD):
            try:
                await self._send({"type": "websocket.close", "code": code, "reason": reason})
            except Exception as exc:  # the socket is gone already: nothing more to tell it
                logger.debug("closing a WebSocket: %s", exc)


class _Opened:
    """What a socket does once its engine runs, told as a nursery's task status is (the
    engine runs in the socket's own task, not one started for it): its deadline runs from its
    opening, the registry watches it (expiry cancels the session's scope around the engine),
    and ``then`` starts what runs beside it."""

    __slots__ = ("_registry", "_session", "_then")

    def __init__(
        self,
        registry: SessionRegistry,
        session: SocketSession,
        then: Callable[[Engine], None] | None = None,
    ) -> None:
        self._registry = registry
        self._session = session
        self._then = then

    def started(self, value: Engine | None = None) -> None:
        assert value is not None  # an engine says it runs with itself
        session = self._session
        session.engine = value
        session.touch()
        self._registry.watch(session)
        if self._then is not None:
            self._then(value)


class WebSocketEndpoint:
    """The app's WebSocket endpoint (``HttpOptions.websocket``); its sockets are the registry's."""

    def __init__(self, app: WebSocketHost) -> None:
        self.app = app
        #: The endpoint's settings; None: no endpoint (every upgrade is refused).
        self.settings = app.options.websocket
        path = self.settings.path if self.settings is not None else None
        normal = (path.rstrip("/") or "/") if path is not None else None
        self._paths = (
            set() if normal is None else {normal, normal + "/"} if normal != "/" else {"/"}
        )

    @property
    def _settings(self) -> WebSocketOptions:
        """The settings of an endpoint that serves (a socket was admitted on its path)."""
        assert self.settings is not None
        return self.settings

    @property
    def sockets(self) -> dict[str, SocketSession]:
        """The open sockets, by the id the registry knows them by."""
        return self.app.registry.table(TransportKind.WEBSOCKET)

    def shutdown(self) -> None:
        """Close every open socket with 1001."""
        for socket in list(self.sockets.values()):
            socket.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send, route: str) -> None:
        """Serve one ``websocket`` scope; ``route`` is its path below the app's mount point."""
        if (await receive())["type"] != "websocket.connect":
            return
        registry = self.app.registry
        try:
            principal = await self._admit(scope, route)
            # No checkpoint since the check: a burst cannot overshoot the caps.
            session = self._claim(scope, principal)
        except HttpError as error:
            await _refuse(scope, send, error)
            return
        try:
            await self.app.client_limits.open_session(session)
        except HttpError as error:
            registry.forget(session)
            session.ended.set()
            await _refuse(scope, send, error)
            return
        try:
            await self._open(scope, receive, send, session, principal)
        finally:
            registry.forget(session)
            session.ended.set()

    def _claim(self, scope: Scope, principal: Principal | None) -> SocketSession:
        """Count a new socket against the caps every session counts against: 429 for one
        client's (``max_sessions_per_client``), 503 for the server's (``max_sessions``)."""
        registry = self.app.registry
        client = registry.client_of(scope, principal)
        registry.check(client)
        session = SocketSession(
            registry, secrets.token_hex(16), client, principal.identity if principal else None
        )
        registry.claim(session)
        registry.keep(session)
        return session

    async def _open(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        session: SocketSession,
        principal: Principal | None,
    ) -> None:
        transport = WebSocketTransport(
            receive, send, session, max_message_bytes=self._settings.max_message_bytes
        )
        await send({"type": "websocket.accept", "subprotocol": SUBPROTOCOL})
        with session.scope:
            try:
                await self._serve(transport, session, principal)
            except Exception:
                logger.exception("unexpected error serving a WebSocket on %s", scope["path"])
                transport.close_code, transport.close_reason = INTERNAL, "internal error"
            finally:
                if session.expired:
                    transport.close_code = GOING_AWAY
                    transport.close_reason = (
                        f"idle for {self.app.registry.options.limits.session_idle_timeout:g}s"
                        if session.used
                        else "no request came"
                    )
                elif trio.current_effective_deadline() == -math.inf:
                    # Cancelled: by the app's shutdown, or by hypercorn stopping. The close
                    # frame still goes out (shielded, bounded).
                    transport.close_code = GOING_AWAY
                    transport.close_reason = "the server is shutting down"
                if transport.close_code is not None:
                    await transport.close(transport.close_code, transport.close_reason)

    async def _serve(
        self, transport: WebSocketTransport, session: SocketSession, principal: Principal | None
    ) -> None:
        """The socket's connection, run in this task (an idle socket holds no task of its own
        but its engine's writer); with ``ping_interval`` its keep-alive beside it."""
        server = cast(_Serves, self.app.server)  # a Server: it serves any transport
        interval = self._settings.ping_interval
        registry = self.app.registry
        if interval is None:
            opened = _Opened(registry, session)
            await server.serve_transport(
                transport, principal=principal, transport_name="websocket", task_status=opened
            )
            return
        async with trio.open_nursery() as nursery:

            def keep_alive(engine: Engine) -> None:
                nursery.start_soon(_keep_alive, engine, transport, interval, nursery.cancel_scope)

            try:
                await server.serve_transport(
                    transport,
                    principal=principal,
                    transport_name="websocket",
                    task_status=_Opened(registry, session, keep_alive),
                )
            finally:
                nursery.cancel_scope.cancel()  # the keep-alive ends with it

    async def _admit(self, scope: Scope, route: str) -> Principal | None:
        """The app's admission step, with the handshake's own checks (the path, the
        subprotocol); raises :class:`HttpError` for a refusal. Returns who the socket acts
        for."""
        app = self.app
        if route not in self._paths:
            mounted = scope.get("root_path", "")
            where = self.settings.path if self.settings is not None else None
            raise HttpError(
                404,
                "Not Found: "
                + (f"the WebSocket endpoint is {mounted}{where}" if where else "no WebSocket here"),
            )
        principal = await app.admission.admit(scope)
        if SUBPROTOCOL not in (scope.get("subprotocols") or ()):
            raise HttpError(
                400,
                f"Bad Request: an MCP WebSocket needs the subprotocol {SUBPROTOCOL!r}: offer it "
                f"(Sec-WebSocket-Protocol: {SUBPROTOCOL})",
            )
        app.admission.check_serving()  # a new socket is new work: refused while draining
        return principal


async def _keep_alive(
    session: Engine, transport: WebSocketTransport, interval: float, scope: trio.CancelScope
) -> None:
    """Every ``interval``, a ``ping`` request; a client that does not answer it within another
    ``interval`` is taken for gone (a half-open TCP connection, say): its socket is closed with
    1011 and its work cancelled. An error answer is an answer."""
    while True:
        await trio.sleep(interval)
        try:
            await session.request("ping", timeout=interval)
        except RequestTimeout:
            transport.close_code = INTERNAL
            transport.close_reason = f"no answer to ping within {interval:g}s"
            scope.cancel()
            return
        except ProtocolError:
            pass
        except ConnectionClosed:
            return


async def _refuse(scope: Scope, send: Send, error: HttpError) -> None:
    """Turn a handshake away with an HTTP response, its body the JSON-RPC error; where the
    ASGI server cannot send one, with a close before the accept (HTTP 403 from the server)."""
    if "websocket.http.response" not in (scope.get("extensions") or {}):
        await send({"type": "websocket.close", "code": 1008, "reason": error.error.message})
        return
    body = encode(ErrorResponse(error.request_id, error.error))
    headers: list[Any] = [
        *error.headers,
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send(
        {"type": "websocket.http.response.start", "status": error.status, "headers": headers}
    )
    await send({"type": "websocket.http.response.body", "body": body})
