"""The 2024-11-05 HTTP+SSE transport, server side, beside Streamable HTTP in the same ASGI app.

A client opens a session with ``GET sse_path``: an SSE stream whose first event, ``endpoint``,
names the URL it POSTs its messages to (``sse_messages_path?session_id=...``, relative, below the
app's mount point); every message of the server follows as an ``event: message``. Each POST
carries one JSON-RPC message (or a batch, which 2024-11-05 allows), is answered 202 Accepted, and
is fed to the session's engine; what the engine answers goes down the GET stream.

The GET stream is the session: when it closes, the session ends and its requests in flight are
cancelled. The checks are the app's own (Host and Origin, the authorization gate, the body size
limit), and so are the limits (sessions in all, per client; an unused session's lifetime).
"""

from __future__ import annotations

import functools
import logging
import secrets
import urllib.parse

import trio

from .._session import Session
from ..auth._gate import Refused
from ..protocol._jsonrpc import Batch, Invalid, Request, RequestId, parse
from ..protocol._sse import KEEPALIVE, encode_event
from ..server._connection import ServerConnection
from ..server._principal import Principal
from ..transports._transport import BaseSender
from . import _app as _app  # the app imports this module: its names are read at call time
from ._asgi import HttpError, Receive, Scope, Send, _refusal, header, is_json
from ._sessions import identity

logger = logging.getLogger("trio_mcp.http.sse")

#: The query parameter of the messages URL that names the session (as the official SDKs do).
SESSION_PARAM = "session_id"


class _StreamSender(BaseSender):
    """The engine's transport of one HTTP+SSE session: every message goes down the GET stream.

    The queue is bounded (``max_pending_events`` and ``max_pending_bytes``): a client that
    stops reading has its session ended, as a Streamable HTTP stream's listener is cut.
    """

    def __init__(self, session: SseSession, max_events: int, max_bytes: int) -> None:
        self._session = session
        self._max_bytes = max_bytes
        self.queued_bytes = 0
        self.outgoing, self.incoming = trio.open_memory_channel[bytes](max_events)

    async def send(
        self, data: bytes, *, related_request_id: RequestId | None = None, final: bool = False
    ) -> None:
        if self.queued_bytes + len(data) > self._max_bytes:
            self._session.overflow()
            return
        try:
            self.outgoing.send_nowait(data)
        except trio.WouldBlock:
            self._session.overflow()
            return
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            return  # the stream is gone: nothing sent now can arrive
        self.queued_bytes += len(data)

    def taken(self, data: bytes) -> None:
        self.queued_bytes -= len(data)


class SseSession:
    """One HTTP+SSE session: its engine, and the queue its GET stream writes from."""

    def __init__(self, endpoint: SseEndpoint, session_id: str, client: str, owner: str | None):
        app = endpoint.app
        self.endpoint = endpoint
        self.id = session_id
        self.client = client
        #: The ``Principal.identity`` of the GET that opened it: only that identity may POST.
        self.owner = owner
        self.connection = ServerConnection(app.server)
        self.transport = _StreamSender(
            self, app.options.max_pending_events, app.options.max_pending_bytes
        )
        self.engine = Session(
            self.transport, self.connection, drain_timeout=app.options.shutdown_grace
        )
        self.connection.session = self.engine
        self.ended = trio.Event()
        self.overflowed = False
        self._closing = False

    @property
    def closing(self) -> bool:
        return self._closing or self.engine.is_closed or self.ended.is_set()

    def overflow(self) -> None:
        if not self.overflowed:
            logger.warning(
                "HTTP+SSE session %s: the client does not read its stream; the session ends",
                self.id,
            )
        self.overflowed = True
        self.close()

    def close(self) -> None:
        """End the session: its requests in flight are cancelled, its stream ends."""
        self._closing = True
        self.engine.feed_eof()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        # Registered with the server so that notify_list_changed() reaches this client.
        server = self.endpoint.app.server
        server.connections.add(self.connection)
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(functools.partial(self.engine.run, pull=False))
                task_status.started()
        finally:
            self._closing = True
            server.connections.discard(self.connection)
            self.transport.outgoing.close()
            self.endpoint.forget(self)
            self.ended.set()


class SseEndpoint:
    """The HTTP+SSE endpoints of one :class:`McpHttpApp`: ``GET sse_path`` and
    ``POST sse_messages_path``. The app hands it the requests for those paths."""

    def __init__(self, app: _app.McpHttpApp, sse_path: str, messages_path: str) -> None:
        self.app = app
        self.sse_path = sse_path
        self.messages_path = messages_path
        self._sse_paths = _both_forms(sse_path)
        self._message_paths = _both_forms(messages_path)
        self.sessions: dict[str, SseSession] = {}
        self._by_client: dict[str, set[SseSession]] = {}

    def handles(self, route: str) -> bool:
        return route in self._sse_paths or route in self._message_paths

    def forget(self, session: SseSession) -> None:
        if self.sessions.get(session.id) is session:
            del self.sessions[session.id]
        owned = self._by_client.get(session.client)
        if owned is not None:
            owned.discard(session)
            if not owned:
                del self._by_client[session.client]

    async def shutdown(self, grace: float) -> None:
        """End every session (their streams end), and give them ``grace`` to wind down."""
        sessions = list(self.sessions.values())
        for session in sessions:
            session.close()
        with trio.move_on_after(grace):
            for session in sessions:
                await session.ended.wait()

    # -- the requests ------------------------------------------------------------------------

    async def handle(self, scope: Scope, receive: Receive, send: Send, route: str) -> None:
        app = self.app
        app.admission.check_host_and_origin(scope)
        method = scope["method"]
        if method == "OPTIONS" and app.options.cors_origins is not None:
            await app.admission.preflight(scope, send, b"GET, POST, OPTIONS")
            return
        expected = "GET" if route in self._sse_paths else "POST"
        if method != expected:
            raise HttpError(405, "Method Not Allowed", headers=[(b"allow", expected.encode())])
        principal: Principal | None = None
        if app.gate is not None:
            try:
                principal = await app.gate.authenticate(scope)
                if method == "GET":
                    app.gate.authorize(principal, app.gate.needed(None, None))
            except Refused as refused:
                raise _refusal(refused) from None
        if app._nursery is None:
            raise HttpError(
                500,
                "Internal error: the app's lifespan did not run; serve it with an ASGI server "
                "that runs lifespan (hypercorn does), or wrap it in `async with app.running()`",
            )
        if app._shutting_down:
            raise HttpError(503, "Service Unavailable: the server is shutting down")
        if method == "GET":
            if app.draining:
                raise app._refused_draining()
            await self._open(scope, receive, send, principal)
        else:
            await self._message(scope, receive, send, principal)

    async def _open(
        self, scope: Scope, receive: Receive, send: Send, principal: Principal | None
    ) -> None:
        """``GET sse_path``: a new session, whose stream lasts as long as this response."""
        app = self.app
        client = app._client_key(scope)
        owned = self._by_client.get(client, set())
        limit = app.options.max_sessions_per_client
        if len(owned) >= limit:
            raise HttpError(
                429,
                f"Too Many Requests: this client already has {limit} sessions, the limit; "
                "close one, or retry later",
                headers=[(b"retry-after", b"1")],
            )
        if len(self.sessions) + len(app.sessions) + len(app._opening) >= app.options.max_sessions:
            raise HttpError(
                503,
                "Service Unavailable: the server has reached its session limit",
                headers=[(b"retry-after", b"1")],
            )
        assert app._nursery is not None
        session = SseSession(self, secrets.token_hex(16), client, identity(principal))
        self.sessions[session.id] = session
        self._by_client.setdefault(client, set()).add(session)
        try:
            await app._nursery.start(session.run)
            await self._stream(scope, receive, send, session)
        finally:
            # The stream is the session: when it ends (the client went away), so does it.
            session.close()
            self.forget(session)

    async def _stream(
        self, scope: Scope, receive: Receive, send: Send, session: SseSession
    ) -> None:
        app = self.app
        await app._sse_start(scope, send)
        root = str(scope.get("root_path") or "").rstrip("/")
        endpoint = urllib.parse.quote(root + self.messages_path) + f"?{SESSION_PARAM}={session.id}"
        body = encode_event(endpoint.encode(), event="endpoint")
        await send({"type": "http.response.body", "body": body, "more_body": True})
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_close_on_disconnect, receive, nursery.cancel_scope)
            try:
                await self._pump(send, session)
                with trio.move_on_after(1.0):
                    await send({"type": "http.response.body", "body": b""})
            except OSError:
                pass  # the client went away: the caller ends the session
            nursery.cancel_scope.cancel()

    async def _pump(self, send: Send, session: SseSession) -> None:
        """Write the session's messages as they come, and keep-alive comments while idle, until
        the session ends (or, never initialized, outlives ``unused_session_timeout``)."""
        options = self.app.options
        unused_until = trio.current_time() + options.unused_session_timeout
        incoming = session.transport.incoming
        while True:
            with trio.move_on_after(options.keepalive_interval):
                try:
                    data = await incoming.receive()
                except trio.EndOfChannel:
                    return  # the session ended: so does its stream
                session.transport.taken(data)
                event = encode_event(data, event="message")
                await send({"type": "http.response.body", "body": event, "more_body": True})
                continue
            if not session.connection.state.initialized and trio.current_time() >= unused_until:
                logger.info("HTTP+SSE session %s was never initialized; it ends", session.id)
                return
            await send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})

    async def _message(
        self, scope: Scope, receive: Receive, send: Send, principal: Principal | None
    ) -> None:
        """``POST messages_path?session_id=...``: one message (or a batch) for a session."""
        app = self.app
        query = urllib.parse.parse_qs(bytes(scope.get("query_string") or b"").decode("latin-1"))
        ids = query.get(SESSION_PARAM, [])
        if len(ids) != 1 or not ids[0]:
            raise HttpError(400, f"Bad Request: the URL must name the session ({SESSION_PARAM})")
        session = self.sessions.get(ids[0])
        if session is None or session.closing or session.owner != identity(principal):
            raise HttpError(404, "Session not found")
        if not is_json(header(scope, b"content-type")):
            raise HttpError(
                415, "Unsupported Media Type: the body must be application/json (one media type)"
            )
        body = await app._read_body(receive)
        parsed = parse(body)
        if isinstance(parsed, Invalid):  # -32700 for a body that is not JSON, else -32600
            raise HttpError(400, parsed.error, request_id=parsed.id)
        items = parsed.items if isinstance(parsed, Batch) else (parsed,)
        requests = [item for item in items if isinstance(item, Request)]
        if app.draining and requests:
            raise app._refused_draining(requests[0].id if len(items) == 1 else None)
        if app.gate is not None:
            assert principal is not None
            needed = app.gate.needed(None, None)
            for request in requests:
                needed |= app.gate.needed(request.method, request.params)
            try:
                app.gate.authorize(principal, needed)
            except Refused as refused:
                rid = requests[0].id if len(items) == 1 and requests else None
                raise _refusal(refused, rid) from None
        if session.closing:
            raise HttpError(404, "Session not found")  # ended while the body was read
        session.engine.feed(parsed, principal=principal)
        await app._respond(scope, send, 202, b"Accepted", content_type=b"text/plain")


def _both_forms(path: str) -> set[str]:
    path = path.rstrip("/") or "/"
    return {path, path + "/"} if path != "/" else {"/"}


async def _close_on_disconnect(receive: Receive, scope: trio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()
