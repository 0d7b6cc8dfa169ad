"""The 2024-11-05 HTTP+SSE transport, server side, beside Streamable HTTP in the same ASGI app.

A client opens a session with ``GET LegacySse.path``: an SSE stream whose first event,
``endpoint``, names the URL it POSTs its messages to (``LegacySse.messages_path?session_id=...``,
relative, below the app's mount point); every message of the server follows as an
``event: message``. Each POST carries one JSON-RPC message (or a batch, which 2024-11-05 allows),
is answered 202 Accepted, and is fed to the session's engine; what the engine answers goes down
the GET stream.

The GET stream is the session: when it closes, the session ends and its requests in flight are
cancelled. The checks are the app's one admission step (Host and Origin, CORS, the
authorization gate, whether the app serves), and the session is one of the app's registry, as a
Streamable HTTP session or a socket is: the same caps (sessions in all, per client, counted over
every transport), the same idle expiry (its stream ends), the same drain.
"""

from __future__ import annotations

import logging
import secrets
import urllib.parse

import trio

from .._engine import Engine
from ..protocol._jsonrpc import Batch, Invalid, Notification, Request, RequestId, parse
from ..protocol._sse import KEEPALIVE, encode_event
from ..server._connection import ServerConnection
from ..server._principal import Principal
from ..transports._transport import BaseSender
from . import _app as _app  # the app imports this module: its names are read at call time
from ._asgi import HttpError, Receive, Scope, Send, header, is_json
from ._sessions import RegisteredSession, TransportKind, identity
from ._telemetry import observe_http

logger = logging.getLogger("trio_mcp.http.sse")

#: The query parameter of the messages URL that names the session (as the official SDKs do).
SESSION_PARAM = "session_id"


class _StreamSender(BaseSender):
    """The engine's transport of one HTTP+SSE session: every message goes down the GET stream.

    It delivers (``deliver``, which the engine calls in the task that decided the message):
    each message is framed as an SSE event at once and queued for the stream's task, which
    writes whatever is queued when it wakes in one write. The engine has no writer task for
    it, and nothing here waits. The queue is bounded (``max_pending_events`` and
    ``max_pending_bytes``): a client that stops reading has its session ended, as a
    Streamable HTTP stream's listener is cut.
    """

    def __init__(self, session: SseSession, max_events: int, max_bytes: int) -> None:
        self._session = session
        self._max_events = max_events
        self._max_bytes = max_bytes
        #: The framed events not yet taken by the stream's task, and their size.
        self.queue: list[bytes] = []
        self.queued_bytes = 0
        #: When the stream was last written to (its keep-alive runs from there).
        self.last_write = trio.current_time()
        #: Set once the session ended: the stream ends when its queue is written.
        self.ended = False
        #: The stream's task while it waits for something to write.
        self._parked: trio.lowlevel.Task | None = None

    async def send(
        self, data: bytes, *, related_request_id: RequestId | None = None, final: bool = False
    ) -> None:
        self.deliver(data, related_request_id, final)

    def deliver(self, data: bytes, related: RequestId | None, final: bool) -> None:
        if final:
            self._session.touch()  # a request ended: the session may be idle now
        self.push(
            _MESSAGE_HEAD + data + _EVENT_END
            if _plain(data)
            else encode_event(data, event="message")
        )

    def push(self, event: bytes) -> None:
        """Queue one framed event (or comment) for the stream."""
        if self.ended:
            return  # the stream is gone: nothing sent now can arrive
        if len(self.queue) >= self._max_events or self.queued_bytes + len(event) > self._max_bytes:
            self._session.overflow()
            return
        self.queue.append(event)
        self.queued_bytes += len(event)
        self._wake()

    def take(self) -> bytes:
        """Everything queued, as one body chunk."""
        queue = self.queue
        body = queue[0] if len(queue) == 1 else b"".join(queue)
        queue.clear()
        self.queued_bytes = 0
        self.last_write = trio.current_time()
        return body

    def end(self) -> None:
        """The session ended: the stream ends once what is queued is written."""
        self.ended = True
        self._wake()

    async def wait(self) -> None:
        """Park the stream's task until something is queued or the session ends."""
        if self.queue or self.ended:
            await trio.lowlevel.checkpoint()
            return
        self._parked = trio.lowlevel.current_task()
        await trio.lowlevel.wait_task_rescheduled(self._unpark)

    def _unpark(self, _: object) -> trio.lowlevel.Abort:
        self._parked = None  # cancelled while it waited
        return trio.lowlevel.Abort.SUCCEEDED

    def _wake(self) -> None:
        task = self._parked
        if task is not None:
            self._parked = None
            trio.lowlevel.reschedule(task)

    def request_suppressed(self, request_id: RequestId) -> None:
        self._session.touch()


#: What frames a message as an ``event: message`` (the common case, with no line break in it).
_MESSAGE_HEAD = b"event: message\ndata: "
_EVENT_END = b"\n\n"


def _plain(data: bytes) -> bool:
    """Whether ``data`` is one line (encoded JSON always is): framed with no scan of ours."""
    return b"\n" not in data and b"\r" not in data


class SseSession(RegisteredSession):
    """One HTTP+SSE session: its engine, and the queue its GET stream writes from. Its caps,
    its idle expiry and its drain are the registry's, as for every transport: idle past its
    deadline, its task is cancelled and its stream ends. The registry watches that deadline
    and, through :meth:`tick`, keeps the stream alive while nothing is written to it."""

    __slots__ = ("_closing", "connection", "endpoint", "observer", "overflowed", "transport")

    over = TransportKind.HTTP_SSE
    engine: Engine

    def __init__(self, endpoint: SseEndpoint, session_id: str, client: str, owner: str | None):
        app = endpoint.app
        super().__init__(app.registry, session_id, client, owner)
        self.endpoint = endpoint
        self.connection = ServerConnection(app.server)
        self.transport = _StreamSender(
            self, app.options.limits.max_pending_events, app.options.limits.max_pending_bytes
        )
        self.connection.transport_name = "sse"
        state = self.connection.state
        #: The session's observer (spans, metrics), or None when nothing listens.
        self.observer = observe_http(
            None, "sse", version=lambda: state.protocol_version, session_id=lambda: session_id
        )
        self.engine = Engine(
            self.transport,
            self.connection,
            drain_timeout=app.options.shutdown_grace,
            observer=self.observer,
        )
        self.connection.session = self.engine
        self.overflowed = False
        self._closing = False

    @property
    def closing(self) -> bool:
        return self._closing or self.engine.is_closed or self.scope.cancel_called

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

    async def run(self, *, task_status: trio.TaskStatus[Engine] = trio.TASK_STATUS_IGNORED) -> None:
        # Registered with the server so that notify_list_changed() reaches this client.
        server = self.endpoint.app.server
        server.connections.add(self.connection)
        if self.observer is not None:
            self.observer.session_started()
        try:
            # Its engine runs in this task; the registry's watch ends it (cancels its scope)
            # when it is idle past its deadline, and calls its tick for the keep-alive.
            with self.scope:
                self.touch()  # its deadline runs from its opening
                self.registry.watch(self)
                await self.engine.run(pull=False, task_status=task_status)
            if self.expired:
                logger.info("HTTP+SSE session %s was idle past its deadline; it ends", self.id)
        finally:
            if self.observer is not None:
                self.observer.session_ended()
            self._closing = True
            server.connections.discard(self.connection)
            self.transport.end()
            self.registry.forget(self)
            self.ended.set()

    def tick(self, now: float) -> float:
        """A keep-alive comment once the stream was written nothing for ``keepalive_interval``
        (a proxy in front may cut a silent response); when to look again."""
        stream = self.transport
        interval = self.endpoint.app.options.keepalive_interval
        due = stream.last_write + interval
        if now < due:
            return due
        if not stream.queue:
            stream.push(KEEPALIVE)
        return now + interval


class SseEndpoint:
    """The HTTP+SSE endpoints of one :class:`McpHttpApp`: ``GET sse_path`` and
    ``POST sse_messages_path``. The app hands it the requests for those paths; admission and
    the sessions are the app's (``app.admission``, ``app.registry``)."""

    def __init__(self, app: _app.McpHttpApp, sse_path: str, messages_path: str) -> None:
        self.app = app
        self.sse_path = sse_path
        self.messages_path = messages_path
        self._sse_paths = _both_forms(sse_path)
        self._message_paths = _both_forms(messages_path)
        #: The registry's table of HTTP+SSE sessions (the same dict for the app's life).
        self._table: dict[str, SseSession] = app.registry.table(TransportKind.HTTP_SSE)

    @property
    def sessions(self) -> dict[str, SseSession]:
        """The open HTTP+SSE sessions, by id (the registry's table of them)."""
        return self.app.registry.table(TransportKind.HTTP_SSE)

    def handles(self, route: str) -> bool:
        return route in self._sse_paths or route in self._message_paths

    # -- the requests ------------------------------------------------------------------------

    async def handle(self, scope: Scope, receive: Receive, send: Send, route: str) -> None:
        admission = self.app.admission
        method = scope["method"]
        if method == "OPTIONS" and await admission.answer_preflight(
            scope, send, b"GET, POST, OPTIONS"
        ):
            return
        expected = "GET" if route in self._sse_paths else "POST"
        if method != expected:
            raise HttpError(405, "Method Not Allowed", headers=[(b"allow", expected.encode())])
        # A POST's scopes are checked once its body says what it asks for.
        if admission.gate is None:  # decided with no coroutine of its own
            admission.admit_anonymous(scope)
            principal = None
        else:
            principal = await admission.admit(scope, base_scopes=method == "GET")
        if method == "GET":
            admission.check_serving()  # a new session is new work: refused while draining
            await self._open(scope, receive, send, principal)
        else:
            await self._message(scope, receive, send, principal)

    async def _open(
        self, scope: Scope, receive: Receive, send: Send, principal: Principal | None
    ) -> None:
        """``GET sse_path``: a new session, whose stream lasts as long as this response."""
        registry = self.app.registry
        client = registry.client_of(scope, principal)
        registry.check(client)  # before anything is built for it
        session = SseSession(self, secrets.token_hex(16), client, identity(principal))
        registry.claim(session)
        registry.keep(session)
        try:
            await self.app.client_limits.open_session(session)
            assert registry.nursery is not None
            await registry.nursery.start(session.run)
            await self._stream(scope, receive, send, session)
        finally:
            # The stream is the session: when it ends (the client went away), so does it.
            session.close()
            registry.forget(session)

    async def _stream(
        self, scope: Scope, receive: Receive, send: Send, session: SseSession
    ) -> None:
        await self.app.sse_start(scope, send)
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
        """Write the session's events (and its keep-alive comments) as they are queued, until
        the session ends (closed, or idle past its deadline)."""
        stream = session.transport
        while True:
            if stream.queue:
                body = stream.take()
                await send({"type": "http.response.body", "body": body, "more_body": True})
            elif stream.ended:
                return  # the session ended: so does its stream
            else:
                await stream.wait()

    async def _message(
        self, scope: Scope, receive: Receive, send: Send, principal: Principal | None
    ) -> None:
        """``POST messages_path?session_id=...``: one message (or a batch) for a session."""
        app = self.app
        ids = _session_ids(scope.get("query_string") or b"")
        if len(ids) != 1 or not ids[0]:
            raise HttpError(400, f"Bad Request: the URL must name the session ({SESSION_PARAM})")
        session = self._table.get(ids[0])
        if session is None or session.closing or session.owner != identity(principal):
            raise HttpError(404, "Session not found")
        if not is_json(header(scope, b"content-type")):
            raise HttpError(
                415, "Unsupported Media Type: the body must be application/json (one media type)"
            )
        body = await app.read_body(receive)
        parsed = parse(body)
        admission = app.admission
        if type(parsed) is Request:  # the commonest: one request, told apart with no list
            # New work: refused while draining (answers and cancels are not).
            admission.check_serving(request_id=parsed.id)
            if admission.gate is not None:
                admission.authorize(principal, (parsed,), parsed.id)
            request = parsed.method != "initialize"
        else:
            if isinstance(parsed, Invalid):  # -32700 for a body that is not JSON, else -32600
                raise HttpError(400, parsed.error, request_id=parsed.id)
            items = parsed.items if isinstance(parsed, Batch) else (parsed,)
            requests = [item for item in items if isinstance(item, Request)]
            rid = requests[0].id if len(items) == 1 and requests else None
            if requests:
                # Answers and cancels still get through a drain: a request may wait for them.
                admission.check_serving(request_id=rid)
            notes = [item for item in items if isinstance(item, Notification)]
            admission.authorize(principal, [*requests, *notes], rid)
            request = any(r.method != "initialize" for r in requests)
        if session.closing:
            raise HttpError(404, "Session not found")  # ended while the body was read
        session.arrived(request=request)
        session.engine.feed(parsed, principal=principal)
        session.touch()
        if admission.options.hosts.cors_origins is None:  # no CORS headers to add
            await send({"type": "http.response.start", "status": 202, "headers": _ACCEPTED()})
            await send({"type": "http.response.body", "body": b"Accepted"})
            return
        await app.respond(scope, send, 202, b"Accepted", content_type=b"text/plain")


#: A 202's headers, when no CORS header goes with them (a new list each time: a server may
#: take it over).
_ACCEPTED = [(b"content-type", b"text/plain"), (b"content-length", b"8")].copy
#: How the usual messages URL's query starts: the session's id, and nothing else.
_SESSION_QUERY = SESSION_PARAM.encode() + b"="


def _session_ids(query: bytes) -> list[str]:
    """The values the query string gives ``session_id``, as ``urllib.parse.parse_qs`` reads
    them (blank ones left out); the URL the ``endpoint`` event names (that parameter alone,
    nothing escaped) with no parse."""
    if (
        query.startswith(_SESSION_QUERY)
        and b"&" not in query
        and b"%" not in query
        and b"+" not in query
    ):
        value = query[len(_SESSION_QUERY) :]
        return [value.decode("latin-1")] if value else []
    parsed = urllib.parse.parse_qs(bytes(query).decode("latin-1"))
    return parsed.get(SESSION_PARAM, [])


def _both_forms(path: str) -> set[str]:
    path = path.rstrip("/") or "/"
    return {path, path + "/"} if path != "/" else {"/"}


async def _close_on_disconnect(receive: Receive, scope: trio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()
