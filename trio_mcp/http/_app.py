"""Streamable HTTP, handshake era: a plain ASGI application for ``hypercorn --worker-class trio``.

The ASGI lifespan opens the nursery that owns every session, so nothing escapes structured
concurrency: a session is a child task whose deadline moves forward whenever it goes idle, and
shutdown cancels them all with a grace period. A POST is fed to the session's engine
synchronously, after its stream is registered, so the engine's routing decisions and the HTTP
layer's (409 for an id in flight) can never disagree.
"""

from __future__ import annotations

import enum
import functools
import ipaddress
import logging
import math
import re
import secrets
from collections.abc import (
    AsyncIterator,
    Callable,
    Iterable,
)
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

import attrs
import orjson
import trio

from .._exception_groups import single_error
from .._session import Session
from ..auth._gate import METADATA_MAX_AGE, HttpAuth, Refused
from ..protocol._envelope import has_envelope
from ..protocol._errors import ProtocolError
from ..protocol._headers import ParamHeaders, check_request
from ..protocol._jsonrpc import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    Batch,
    ErrorObject,
    ErrorResponse,
    Invalid,
    Notification,
    Request,
    RequestId,
    Response,
    encode,
    parse,
)
from ..protocol._sse import KEEPALIVE, encode_event, event_id, parse_event_id, stream_id
from ..protocol._types import ClientCapabilities, Implementation, from_wire, to_wire
from ..protocol._versions import (
    HANDSHAKE_VERSIONS,
    KNOWN_VERSIONS,
    MODERN_VERSIONS,
    V2025_11_25,
    is_at_least,
)
from ..server._bus import BusError
from ..server._connection import ServerConnection
from ..server._lifespan import LifespanFailed
from ..server._principal import Principal
from ..server._registry import Registrations
from ..server._tasks import TaskStoreUnavailable
from ..transports._transport import BaseSender
from ._asgi import HttpError, Message, Receive, Scope, Send, _refusal
from ._event_store import (
    NO_STORE,
    ByteBudget,
    EventStore,
    EventStoreUnavailable,
    EventStream,
    EventWriter,
    Listener,
    MemoryEventStore,
    MemorySink,
    Replay,
    StreamItem,
    StreamLimits,
    StreamMeta,
    StreamSink,
)
from ._modern import is_modern, status_for
from ._modern_post import _DISCONNECT_GRACE, ModernPost, _on_first_yield, serve_modern
from ._node_tags import check_node_id, is_minted_here, mint_session_id
from ._relay import Relay, RelayUnavailable
from ._session_store import SessionRecord, SessionStore, SessionStoreUnavailable
from ._websocket import WebSocketEndpoint

logger = logging.getLogger("trio_mcp.http")

MCP_HEADERS = "content-type, mcp-session-id, mcp-protocol-version, last-event-id, authorization"

#: What a request refused while draining is told: nothing of it ran, so it can go elsewhere.
DRAINING = (
    "Service Unavailable: this server is shutting down; retry the request (another server takes it)"
)
#: What a request still running at the end of the drain's grace is answered with.
CUT_BY_SHUTDOWN = (
    "Server shutting down: the request was ended before it finished; it may have partly run, "
    "retry it if that is safe (another server takes it)"
)
#: After the grace, how long the requests that were ended get to write their error.
CUT_WRITE_GUARD = 2.0


class HttpServable(Registrations, Protocol):
    """What the HTTP app needs of its server: the registrations a connection reads, and the set
    of live connections that the server's notifications go to (``Server`` is the one)."""

    @property
    def connections(self) -> set[ServerConnection]: ...

    async def run_notifications(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None: ...

    def running(self) -> AbstractAsyncContextManager[Any]: ...


class MountedEndpoints(Protocol):
    """Another transport's endpoints, served by the app beside its own (the HTTP+SSE
    transport's): the app hands it the requests for its paths, and ends it at shutdown."""

    def handles(self, route: str) -> bool: ...

    async def handle(self, scope: Scope, receive: Receive, send: Send, route: str) -> None: ...

    async def shutdown(self, grace: float) -> None: ...


def _valid_node_id(_options: object, _field: object, node_id: str | None) -> None:
    if node_id is not None:
        check_node_id(node_id)


@attrs.define
class HttpOptions:
    """Settings of the Streamable HTTP endpoint (see :meth:`Server.http_app`)."""

    path: str = "/mcp"
    json_response: bool = False
    stateless: bool = False
    session_idle_timeout: float = 1800.0
    max_sessions: int = 10_000
    #: Sessions one client may hold at once (opening ones count); beyond it, 429.
    max_sessions_per_client: int = 100
    #: A session that has carried no request (nor GET stream) since its ``initialize`` expires
    #: this long after it was opened, whatever ``session_idle_timeout`` says.
    unused_session_timeout: float = 60.0
    #: Who a request comes from, for ``max_sessions_per_client``; None: :func:`client_address`
    #: (with ``client_address_header``). A key may be anything a client cannot choose freely.
    client_key: Callable[[Scope], str] | None = None
    #: The header a trusted reverse proxy puts the client's address in (``x-forwarded-for``,
    #: ``x-real-ip``); its last value is the one taken. None: the peer address of the
    #: connection, which behind a proxy is the proxy's. Set it only when every request comes
    #: through that proxy, or a client can name itself anything.
    client_address_header: str | None = None
    #: Host header values accepted (``host`` or ``host:port``); None: loopback names for a
    #: request that arrived on a loopback address (127.0.0.1, or a 0.0.0.0 bind reached through
    #: loopback, as from a proxy on the same host), anything for one that arrived on another.
    allowed_hosts: list[str] | None = None
    #: Origin header values accepted; None: loopback origins on loopback, as for the Host.
    allowed_origins: list[str] | None = None
    max_body_bytes: int = 4 * 1024 * 1024
    #: Origins allowed by CORS (``["*"]`` for any); None disables CORS headers.
    cors_origins: list[str] | None = None
    keepalive_interval: float = 15.0
    retry_ms: int = 1000
    shutdown_grace: float = 5.0
    #: Where stream events are kept for a resume (None: a :class:`MemoryEventStore` of this
    #: app's own); a store shared by several workers (``RedisEventStore``) lets any of them
    #: serve a resume.
    event_store: EventStore | None = None
    #: Where handshake-era session records are kept (None: nowhere, and a session lives only
    #: on the worker that opened it); a store shared by several workers
    #: (``RedisSessionStore``) lets any of them serve any request of any session. A record
    #: expires ``session_idle_timeout`` after the session's last use on any worker.
    session_store: SessionStore | None = None
    #: With a session store, what carries the few messages of a session that belong to
    #: another worker's copy of it (a client's response to that copy's request, a cancel of a
    #: request running there, the end of the session): ``RedisRelay`` across processes. None:
    #: they are not carried (such a response finds no request waiting, such a cancel no
    #: request; other copies end when they next see the record gone, or idle).
    relay: Relay | None = None
    #: The writer's queue to the store: past either bound (the store too slow) a stream loses
    #: its resumability, logged, and its live connection goes on; a write that takes longer
    #: than ``event_store_timeout`` fails the same way.
    max_store_queue_events: int = 4096
    max_store_queue_bytes: int = 32 * 1024 * 1024
    event_store_timeout: float = 5.0
    #: How often a resume served from the shared store, for a session that lives on another
    #: worker, looks for the stream's new events.
    resume_poll_interval: float = 0.25
    #: Requests of one session running at once; one more gets 429 with ``Retry-After``.
    max_requests_per_session: int = 256
    #: Events handed to one SSE connection and not yet written to it (a client that does not
    #: read): past either bound the connection is ended, and its client resumes with
    #: ``Last-Event-ID``.
    max_pending_events: int = 1024
    max_pending_bytes: int = 8 * 1024 * 1024
    #: Events kept for a session's next GET while none is open (list changes, server requests),
    #: the oldest dropped first.
    max_backlog_events: int = 256
    max_backlog_bytes: int = 1024 * 1024
    #: All of those together, over every session and connection of the app.
    max_buffered_bytes: int = 64 * 1024 * 1024
    #: This node's routing tag (letters, digits, ``-``): session ids become ``NODE.<hex>``, so
    #: a load balancer can route a session's requests to the node that holds it (an nginx
    #: ``map`` on ``Mcp-Session-Id``, see ``deploy/nginx.conf``); an id tagged for another node
    #: is an unknown session here (404). None: plain hex ids.
    node_id: str | None = attrs.field(default=None, validator=_valid_node_id)
    #: Where a load balancer or an orchestrator asks whether to send traffic here: ``GET`` is
    #: 200 while serving, 503 before the lifespan started and once draining. None: no such path.
    ready_path: str | None = "/ready"
    #: How long :meth:`McpHttpApp.drain` (SIGTERM or SIGINT under ``serve_http``) lets requests
    #: in flight finish before it ends them with a JSON-RPC error telling the client to retry.
    drain_grace: float = 10.0
    #: The 2024-11-05 HTTP+SSE transport, beside Streamable HTTP: ``GET sse_path`` opens a
    #: session (its first event names the URL to POST to), ``POST sse_messages_path`` carries
    #: its messages. None: not served.
    sse_path: str | None = "/sse"
    sse_messages_path: str = "/messages/"
    #: Where WebSocket clients connect (``ws://host:port/ws``, subprotocol ``mcp``: see
    #: ``_http_ws``); None: no WebSocket endpoint (every upgrade is refused).
    ws_path: str | None = "/ws"
    #: The largest message a WebSocket client may send; a larger one closes its socket (1009).
    ws_max_message_bytes: int = 4 * 1024 * 1024
    #: How often the server sends each WebSocket client a ``ping`` request; one not answered
    #: within the same time closes its socket (1011) and cancels its work. None: never.
    ws_ping_interval: float | None = None


class SessionKind(enum.Enum):
    """Whose an :class:`HttpSession`'s engine is, which decides how its requests are answered."""

    #: An ``Mcp-Session-Id`` session of the app, across POSTs (the handshake era).
    SESSION = "session"
    #: One stateless-mode POST's own, for its handshake-era message.
    STATELESS = "stateless"
    #: One POST's own, for its modern request (2026-07-28).
    MODERN = "modern"


class HttpSession(BaseSender):
    """One MCP session over HTTP: its engine, its streams, and its idle deadline.

    It is its engine's transport too (a :class:`Sender` that nothing reads: each POST feeds
    its message to the engine, ``Session.feed``), which routes what the engine sends to the
    session's streams. One object, not two that hold each other.
    """

    def __init__(
        self,
        app: McpHttpApp,
        session_id: str,
        *,
        kind: SessionKind = SessionKind.SESSION,
        client: str = "",
        owner: str | None = None,
        replica: bool = False,
    ) -> None:
        self.app = app
        self.id = session_id
        self.kind = kind
        #: Whether it was built here from the record of a session opened on another worker.
        self.replica = replica
        # Stream keys of a replica name its node, and a random part: its streams never share
        # a name in a shared event store with those of the session's other copies, nor with
        # those of an earlier replica on this node.
        self._key_prefix = f"{app.options.node_id}-{secrets.token_hex(3)}-" if replica else ""
        #: With a session store: the node whose copy holds the session's GET stream, as this
        #: copy last read it in the record (None: none, or this node).
        self.get_node: str | None = None
        #: Whose it is, for the per-client limit (see ``HttpOptions.client_key``).
        self.client = client
        #: The ``Principal.identity`` of the request that opened it (None without
        #: authorization): only that identity can use it, whatever its token's age.
        self.owner = owner
        self.connection = ServerConnection(app.server)
        if kind is SessionKind.SESSION:
            self.connection.id = session_id  # what middleware calls the session
        if kind is SessionKind.STATELESS:
            self.connection.state.refuse_back_channel()
        # With a session store, the ids of the requests this copy sends name its node: the
        # client's response may reach any worker, which relays it here.
        prefix = f"{app.options.node_id}/" if app.options.session_store is not None else ""
        self.engine = Session(
            self,
            self.connection,
            drain_timeout=app.options.shutdown_grace,
            id_prefix=prefix,
        )
        self.connection.session = self.engine
        # Only a session's streams can be resumed: nothing outlives a POST's own engine.
        self.store: StreamSink = app.sink if kind is SessionKind.SESSION else NO_STORE
        self.standalone = self._new_stream(self._key_prefix + "0", self.store)
        self.request_streams: dict[RequestId, EventStream] = {}
        self._stream_numbers = 0
        self.active = 0
        #: Whether a request (or a GET stream) came after ``initialize``: until then the session
        #: lives at most ``unused_session_timeout`` from its opening.
        self.used = False
        self.unused_until = trio.current_time() + app.options.unused_session_timeout
        self.scope = trio.CancelScope()
        self.ended = trio.Event()
        self._closing = False
        #: A POST's own engine: called (once) when its request's first event that is not the
        #: response is on its stream, to start streaming SSE (see ``McpHttpApp._serve_alone``).
        self.on_event: Callable[[], None] | None = None
        if kind is SessionKind.SESSION and app.options.session_store is not None:
            self.connection.on_change = self.save

    def release(self) -> None:
        """A POST's own session, once its POST has ended: its engine and its connection let
        go of what holds each of them in turn, so that reference counting frees the whole
        session now. Left in reference cycles, they would wait for the cycle collector, which
        a modern server (one such session per request) then ran every few hundred requests,
        at a cost that grows with the process's heap."""
        self.engine.release()
        self.connection.release()

    # -- routing the engine's output (its Sender) --------------------------------------------

    async def send(
        self, data: bytes, *, related_request_id: RequestId | None = None, final: bool = False
    ) -> None:
        self.deliver(data, related_request_id, final)

    def request_suppressed(self, request_id: RequestId) -> None:
        stream = self.request_streams.get(request_id)
        if stream is not None:
            stream.finish(responded=False)
            self.forget_stream(stream)
        self.touch()

    def deliver(self, data: bytes, related: RequestId | None, final: bool) -> None:
        """Route one message to its stream. Routing never waits: the engine calls this in the
        task that decided the message."""
        stream = self.request_streams.get(related) if related is not None else None
        # A JSON response carries one message: the request's others cannot go on its stream.
        if (
            stream is not None
            and not stream.finished
            and (final or not self.app.options.json_response)
        ):
            stream.push(data)
            if final:
                stream.finish(responded=True)
                self.forget_stream(stream)
                self.touch()  # its client may be gone: the session can go idle now
            elif self.on_event is not None:
                start, self.on_event = self.on_event, None
                start()
            return
        if related is not None and self.standalone.listener is None and self._forward_get(data):
            return
        if related is not None and self.standalone.listener is None and not _waits(data):
            # A request's progress and log messages that its own stream cannot carry (a JSON
            # response carries one message; or the stream is gone) go to the GET stream only
            # while one is open: queued, they would reach a later GET stale, or pile up for one
            # that never comes. A server request, which waits for its answer, and the cancel of
            # one are kept for the next GET.
            return
        self.standalone.push(data)

    def _forward_get(self, data: bytes) -> bool:
        """A request's message for the GET stream, which another node's copy holds: sent
        there (True). Messages not tied to a request (list changes, resource updates) are
        not: every copy hears them from the notification bus, the GET's own included."""
        app = self.app
        relay, node = app.options.relay, self.get_node
        if relay is None or node is None or node == app.options.node_id or app._nursery is None:
            return False
        app._nursery.start_soon(_send_relayed, relay, node, _relayed("get", self.id, data))
        return True

    def new_request_stream(self, request_id: RequestId) -> EventStream:
        limit = self.app.options.max_requests_per_session
        if self.kind is SessionKind.SESSION and len(self.request_streams) >= limit:
            raise HttpError(
                429,
                f"Too Many Requests: this session already has {limit} requests in flight; "
                "retry when one has finished",
                request_id=request_id,
                headers=[(b"retry-after", b"1")],
            )
        self._stream_numbers += 1
        # A JSON response has no event ids: nothing of its stream can be resumed, or stored.
        store = NO_STORE if self.app.options.json_response else self.store
        key = f"{self._key_prefix}r{self._stream_numbers}"
        stream = self._new_stream(key, store, request_id)
        self.request_streams[request_id] = stream
        return stream

    def _new_stream(
        self, key: str, store: StreamSink, request_id: RequestId | None = None
    ) -> EventStream:
        app = self.app
        stream = EventStream(
            self.id,
            key,
            store,
            request_id,
            limits=app.limits,
            budget=app.budget,
            meta=None if store is NO_STORE else StreamMeta(self.id, self.owner, request_id),
        )
        if request_id is not None:
            stream.open()  # the GET stream is opened by its first event
        return stream

    def has_ended(self, request_id: RequestId) -> bool:
        """Whether a request of this session had its stream and no longer has: it was answered,
        or it ended with no answer."""
        return self._stream_numbers > 0 and request_id not in self.request_streams

    def forget_stream(self, stream: EventStream) -> None:
        """Removal by identity: a stream registered later under the same id stays."""
        if stream.request_id is not None and self.request_streams.get(stream.request_id) is stream:
            del self.request_streams[stream.request_id]

    def stream_for_key(self, key: str) -> EventStream | None:
        if key == self.standalone.key:
            return self.standalone
        for stream in self.request_streams.values():
            if stream.key == key:
                return stream
        return None

    # -- its record ----------------------------------------------------------------------------

    def record(self) -> SessionRecord:
        state = self.connection.state
        info = state.client_info
        return SessionRecord(
            self.owner or "",
            state.protocol_version,
            to_wire(info) if info is not None else {},
            to_wire(state.client_capabilities),
            state.announced,
            state.log_level,
            frozenset(self.connection.subscriptions),
            self.get_node,
        )

    async def save(self) -> None:
        """Write the session's record (after ``initialize``, and when the client changed its log
        level or its subscriptions), so that every worker serves it as this one does."""
        store = self.app.options.session_store
        assert store is not None
        try:
            await store.put(self.id, self.record(), self.app.options.session_idle_timeout)
        except SessionStoreUnavailable as error:
            logger.error("session %s: %s", self.id, error)
            raise ProtocolError(
                INTERNAL_ERROR,
                "Internal error: the change applies to this worker only, the session store "
                f"failed: {error}",
            ) from None

    def restore(self, record: SessionRecord) -> None:
        """Become the session the record describes, as its ``initialize`` left it."""
        self.connection.state.restore(
            record.protocol_version,
            from_wire(record.client_info, Implementation),
            from_wire(record.client_capabilities, ClientCapabilities),
            record.announced,
            record.log_level,
        )
        self.connection.subscriptions.update(record.subscriptions)
        self.get_node = record.get_node
        self.used = True

    def follow(self, record: SessionRecord) -> None:
        """Take what another worker changed: the log level and the subscriptions."""
        state = self.connection.state
        if record.log_level is not None and record.log_level != state.log_level:
            state.set_log_level(record.log_level)
        self.get_node = record.get_node
        if record.subscriptions != self.connection.subscriptions:
            self.connection.subscriptions.clear()
            self.connection.subscriptions.update(record.subscriptions)

    # -- lifetime ------------------------------------------------------------------------------

    def busy(self) -> None:
        self.active += 1
        if self.kind is SessionKind.SESSION:  # the others have no task to expire
            self.scope.deadline = math.inf

    def idle(self) -> None:
        self.active -= 1
        self.touch()

    def touch(self) -> None:
        if self.kind is SessionKind.SESSION and self.active == 0 and self.engine.idle:
            deadline = trio.current_time() + self.app.options.session_idle_timeout
            self.scope.deadline = deadline if self.used else min(deadline, self.unused_until)

    @property
    def closing(self) -> bool:
        """Whether the session is ending: expired (its deadline has passed, even if its task has
        not yet seen the cancel), closed, or its engine stopped. Decided synchronously, so a
        request that finds the session closing is refused (404, as for an expired one) before
        anything of it reaches the engine, and one that finds it open is registered (its
        stream, ``busy``) before the next checkpoint: no request can land in a session that is
        winding down."""
        return (
            self._closing
            or self.scope.cancel_called
            or self.engine.is_closed
            or self.ended.is_set()
        )

    async def run(
        self, *, task_status: trio.TaskStatus[Session] = trio.TASK_STATUS_IGNORED
    ) -> None:
        # Registered with the server so that notify_list_changed() reaches this client.
        self.app.server.connections.add(self.connection)
        try:
            # The engine runs in this task (it is started once its own nursery is open): no
            # nursery and task of the session's own around it, which every idle session held.
            with self.scope:
                await self.engine.run(pull=False, task_status=task_status)
        finally:
            self._closing = True
            self.app.server.connections.discard(self.connection)
            self.close_streams()
            self.forget_events()
            self.app.forget(self)
            self.ended.set()

    def close(self) -> None:
        """End the session: its requests are cancelled, its streams end."""
        self._closing = True
        self.engine.feed_eof()
        self.close_streams()

    def close_streams(self) -> None:
        for stream in list(self.request_streams.values()):
            stream.finish(responded=False)
        self.request_streams.clear()
        self.standalone.finish(responded=False)
        self.standalone.discard_backlog()

    def forget_events(self) -> None:
        """Nobody can resume a stream of an ended session: drop its events from the store."""
        self.store.forget(self.standalone.stream_id)
        for number in range(1, self._stream_numbers + 1):
            self.store.forget(stream_id(self.id, f"{self._key_prefix}r{number}"))
        if not self.replica:
            self.store.end_session(self.id)  # a replica's end is not the session's


def _header(scope: Scope, name: bytes) -> str | None:
    """A request header's value (``name`` lowercased); sent more than once, its values joined
    with ``", "`` (as HTTP combines a repeated field), so that a single-valued header sent twice
    fails its check rather than having one copy picked."""
    return _header_table(scope).get(name)


#: Where a request's header table is kept in its ASGI scope (scopes take extra keys).
_HEADER_TABLE = "trio_mcp.headers"


def _header_table(scope: Scope) -> dict[bytes, str]:
    """Every request header by lowercased name, built once per request and kept in its scope:
    a POST reads about nine of them, and each would otherwise walk the whole list."""
    table: dict[bytes, str] | None = scope.get(_HEADER_TABLE)
    if table is None:
        table = {}
        for key, value in scope.get("headers", ()):
            name = bytes(key).lower()
            text = bytes(value).decode("latin-1")
            table[name] = table[name] + ", " + text if name in table else text
        scope[_HEADER_TABLE] = table
    return table


def _mcp_headers(scope: Scope) -> dict[str, str]:
    """A request's ``Mcp-`` headers, by lowercased name, repeated ones joined as by
    :func:`_header`: all that a modern request's header check reads."""
    return {
        name.decode("latin-1"): value
        for name, value in _header_table(scope).items()
        if name.startswith(b"mcp-")
    }


def client_address(scope: Scope, *, header: str | None = None) -> str:
    """The address a request came from: the peer of its connection (the ASGI ``client``), or,
    with ``header``, the last value of that header, as a trusted proxy in front appends it
    (``x-forwarded-for``) or sets it (``x-real-ip``); the peer when the header is absent.

    Behind a proxy the peer is the proxy itself, so every client would share one key: name the
    proxy's header (``HttpOptions.client_address_header``), or let the ASGI server rewrite the
    scope (hypercorn's ``ProxyFixMiddleware``). Never trust the header without a proxy that
    writes it: a client can send any value.
    """
    if header is not None:
        value = _header(scope, header.lower().encode("latin-1"))
        if value:
            last = value.rsplit(",", 1)[-1].strip()
            if last:
                return last
    peer = scope.get("client")
    return str(peer[0]) if peer else ""


# RFC 9110 tokens and quoted strings: what a media type and its parameters are made of.
_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_QUOTED = r'"(?:[^"\\]|\\.)*"'
_MEDIA_TYPE = re.compile(
    rf"\s*({_TOKEN}/{_TOKEN})((?:\s*;\s*{_TOKEN}\s*=\s*(?:{_TOKEN}|{_QUOTED}))*)\s*"
)
_PARAMETER = re.compile(rf"\s*;\s*({_TOKEN})\s*=\s*({_TOKEN}|{_QUOTED})")
_QVALUE = re.compile(r"0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?")


# The checks below are pure functions of a header's text, which a client sends the same on
# every request: remembered (a bounded number of texts, so that no client can grow them).
@functools.lru_cache(maxsize=256)
def _is_json(content_type: str | None) -> bool:
    """Whether a Content-Type is exactly one media type, ``application/json`` in any case,
    with parameters or without (``text/plain, application/json`` is two, and refused)."""
    match = _MEDIA_TYPE.fullmatch(content_type or "")
    return match is not None and match[1].lower() == "application/json"


@functools.lru_cache(maxsize=256)
def _accepts(accept: str | None, media_type: str) -> bool:
    """Whether an Accept header admits ``media_type``: the most specific range that matches it
    (the type itself, then ``type/*``, then ``*/*``) decides, and ``q=0`` refuses. A range
    that does not parse admits nothing."""
    main = media_type.split("/")[0] + "/*"
    best: tuple[int, bool] | None = None  # (specificity, acceptable)
    for part in (accept or "").split(","):
        match = _MEDIA_TYPE.fullmatch(part)
        if match is None:
            continue
        media_range = match[1].lower()
        if media_range == media_type:
            specificity = 2
        elif media_range == main:
            specificity = 1
        elif media_range == "*/*":
            specificity = 0
        else:
            continue
        acceptable = True
        for name, value in _PARAMETER.findall(match[2]):
            if name.lower() == "q":
                acceptable = _QVALUE.fullmatch(value) is not None and float(value) > 0
        if best is None or specificity > best[0]:
            best = (specificity, acceptable)
    return best is not None and best[1]


_PORT = re.compile(r"[0-9]{1,5}")


@functools.lru_cache(maxsize=256)
def _parse_host(value: str) -> tuple[str, str | None] | None:
    """A Host header's host (lowercased: names are case-insensitive) and port, or None if it is
    not ``host[:port]``: the port is digits, an IPv6 address is bracketed (``[::1]:8000``)."""
    if value.startswith("["):
        end = value.find("]")
        host, rest = value[1:end], value[end + 1 :]
        if end < 0 or not _is_ipv6(host):
            return None
    else:
        host, colon, port = value.partition(":")
        rest = colon + port
    if not host:
        return None
    if not rest:
        return host.lower(), None
    if rest[0] == ":" and _PORT.fullmatch(rest[1:]):
        return host.lower(), rest[1:]
    return None


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def _parse_origin(value: str) -> tuple[str, str, str | None] | None:
    """An Origin's scheme (lowercased), host and port, or None if it is not
    ``scheme://host[:port]`` (``null``, a path, user info)."""
    scheme, sep, rest = value.partition("://")
    if not sep or not scheme or any(c in rest for c in "/?#@\\"):
        return None
    parsed = _parse_host(rest)
    return (scheme.lower(), *parsed) if parsed is not None else None


def _host_allowed(host: tuple[str, str | None], allowed: Iterable[str]) -> bool:
    """Whether a parsed Host is one of ``allowed`` (``host`` for any port, or ``host:port``)."""
    for entry in allowed:
        parsed = _parse_host(entry.strip())
        if parsed is not None and parsed[0] == host[0] and parsed[1] in (None, host[1]):
            return True
    return False


def _origin_allowed(origin: str, allowed: Iterable[str], *, wildcard: bool = True) -> bool:
    """Whether an Origin is one of ``allowed``: the same scheme, host and port (scheme and host
    in any case), or the same text (``null``, if it is listed); with ``wildcard``, ``*`` allows
    any."""
    parsed = _parse_origin(origin)
    for entry in allowed:
        if (wildcard and entry == "*") or entry.lower() == origin.lower():
            return True
        if parsed is not None and _parse_origin(entry) == parsed:
            return True
    return False


@functools.lru_cache(maxsize=256)
def _is_loopback(host: str) -> bool:
    """Whether a host (as :func:`_parse_host` gives it, or an address) is a loopback name."""
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _route_path(scope: Scope) -> str:
    """The path below the app's mount point (``root_path``, e.g. Starlette's ``Mount("/api")``).

    The ASGI specification lets ``path`` come in two forms: newer servers and routers include
    ``root_path`` in it (``/api/mcp``), older ones strip it (``/mcp``); both reach the endpoint.
    """
    path: str = scope["path"]
    root = str(scope.get("root_path") or "").rstrip("/")
    if root and (path == root or path.startswith(root + "/")):
        return path[len(root) :] or "/"
    return path


class McpHttpApp:
    """The ASGI application. Build it with :meth:`Server.http_app`."""

    def __init__(self, server: HttpServable, options: HttpOptions | None = None) -> None:
        self.server = server
        self.options = options or HttpOptions()
        self.store: EventStore = (
            self.options.event_store if self.options.event_store is not None else MemoryEventStore()
        )
        self.sessions: dict[str, HttpSession] = {}
        options = self.options
        #: The one task that writes every stream's events to the store, in order.
        self.writer = EventWriter(
            self.store,
            max_queued=options.max_store_queue_events,
            max_queued_bytes=options.max_store_queue_bytes,
            timeout=options.event_store_timeout,
            live_sessions=self.sessions.keys,
        )
        #: Where the streams of sessions hand their events: the writer, or, for a store whose
        #: writes never wait (an in-process MemoryEventStore), the store itself, at once.
        self.sink: StreamSink = (
            MemorySink(self.store, self.writer)
            if type(self.store) is MemoryEventStore
            else self.writer
        )
        self.limits = StreamLimits(
            pending_events=options.max_pending_events,
            pending_bytes=options.max_pending_bytes,
            backlog_events=options.max_backlog_events,
            backlog_bytes=options.max_backlog_bytes,
        )
        #: What every backlog and every connection's pending events hold together.
        self.budget = ByteBudget(options.max_buffered_bytes)
        self._nursery: trio.Nursery | None = None
        self._shutting_down = False
        self._draining = False
        #: Requests being served (``_serve``), and the event set when they next are none: made
        #: only while someone waits for that (a drain), not for every POST.
        self._serving = 0
        self._none_serving: trio.Event | None = None
        #: The engines of stateless POSTs (and of modern ones on a server with mounts), each
        #: alive for its one request.
        self._posts: set[HttpSession] = set()
        #: The modern POSTs being served (``_modern_post``), each the connection of its request.
        self._alone: set[ModernPost] = set()
        #: Sessions whose initialize is still running: not yet kept, but counted for the cap.
        self._opening: set[HttpSession] = set()
        #: Each client's sessions, opening or kept (``HttpOptions.max_sessions_per_client``).
        self._by_client: dict[str, set[HttpSession]] = {}
        self._client_key: Callable[[Scope], str] = self.options.client_key or functools.partial(
            client_address, header=self.options.client_address_header
        )
        path = self.options.path.rstrip("/") or "/"
        self._paths = {path, path + "/"} if path != "/" else {"/"}
        #: The authorization gate, with ``Server(auth=...)``; None: every request is let in.
        self.gate = HttpAuth(server, server.auth) if server.auth is not None else None
        #: Sessions whose record is being read to build a replica here, by id.
        self._replicating: dict[str, trio.Event] = {}
        #: The HTTP+SSE endpoints (``HttpOptions.sse_path``), which :meth:`Server.http_app`
        #: attaches; None: not served.
        self.sse: MountedEndpoints | None = None
        self.websockets = WebSocketEndpoint(self)
        if options.session_store is not None and options.node_id is None:
            raise ValueError(
                "HttpOptions(session_store=...) needs a node_id: it names this worker's streams "
                "and the messages other workers send it"
            )

    @property
    def metadata_paths(self) -> tuple[str, ...]:
        """Where this app serves its Protected Resource Metadata (RFC 9728): the path-based
        well-known path of ``Auth.resource``, then the root one; empty without authorization
        or in bearer-only mode.

        They are the public paths, built from ``Auth.resource`` (which behind a proxy may
        differ from ``HttpOptions.path``). A host app that mounts this one (under a
        ``root_path``) must route these paths to it as well: they are matched either below the
        mount point or whole, so a route for exactly the path, or a mount above it, both work.
        """
        return self.gate.metadata_paths if self.gate is not None else ()

    # -- lifespan ------------------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[McpHttpApp]:
        """Own the sessions' nursery; the ASGI lifespan does this, or a host app can.

        The event store starts first and the server's notification bus (``Server(bus=...)``)
        next: a store or a bus that cannot be reached fails the start here, saying where it is,
        before anything is served.
        """
        await self.store.start()
        started = False
        records = self.options.session_store
        try:
            if records is not None:
                await records.start()
            async with (
                self._records_open(records),
                self.server.running(),
                trio.open_nursery() as nursery,
            ):
                await nursery.start(self.writer.run)
                await nursery.start(self.server.run_notifications)
                if records is not None:
                    nursery.start_soon(self._keep_records, records)
                if self.options.relay is not None and self.options.node_id is not None:
                    await nursery.start(
                        self.options.relay.subscribe, self.options.node_id, self._on_relayed
                    )
                started = True
                self._nursery = nursery
                self._shutting_down = False
                self._draining = False
                try:
                    yield self
                finally:
                    await self._shutdown()
                    self._nursery = None
                    nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            error = single_error(group)
            unavailable = BusError | RelayUnavailable | TaskStoreUnavailable
            if not started and isinstance(error, unavailable):
                raise error from None
            raise
        finally:
            with trio.CancelScope(shield=True):
                await self.store.aclose()

    async def _keep_records(self, records: SessionStore) -> None:
        """Push forward the records of the sessions busy here (a tool running for longer than
        the idle timeout, a GET stream held open), which no request may touch meanwhile: a
        session in use anywhere never expires everywhere else."""
        ttl = self.options.session_idle_timeout
        while True:
            await trio.sleep(ttl / 3)
            for session in list(self.sessions.values()):
                if session.closing or (session.active == 0 and session.engine.idle):
                    continue
                try:
                    await records.touch(session.id, ttl)
                except SessionStoreUnavailable as error:
                    logger.warning("the records of busy sessions were not refreshed: %s", error)
                    break

    @asynccontextmanager
    async def _records_open(self, records: SessionStore | None) -> AsyncIterator[None]:
        """Close the session store (started just before) when the block ends."""
        try:
            yield
        finally:
            if records is not None:
                with trio.CancelScope(shield=True):
                    await records.aclose()

    async def _shutdown(self) -> None:
        self._shutting_down = True
        self.websockets.shutdown()
        if self.sse is not None:
            await self.sse.shutdown(self.options.shutdown_grace)
        sessions = list(self.sessions.values())
        for session in sessions:
            session.close()
        with trio.move_on_after(self.options.shutdown_grace):
            for session in sessions:
                await session.ended.wait()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        if not _under_trio():
            # Under asyncio (hypercorn's default worker) nothing of Trio can run: say so.
            await send({"type": "lifespan.startup.failed", "message": NOT_UNDER_TRIO})
            return
        started = False
        try:
            async with self.running():
                started = True
                await send({"type": "lifespan.startup.complete"})
                while (await receive())["type"] != "lifespan.shutdown":
                    pass
        except (
            EventStoreUnavailable,
            SessionStoreUnavailable,
            BusError,
            RelayUnavailable,
            LifespanFailed,
        ) as error:
            if started:
                raise
            # Raised before the startup completed: the server says why it does not start.
            logger.error("cannot start: %s", error)
            await send({"type": "lifespan.startup.failed", "message": str(error)})
            return
        await send({"type": "lifespan.shutdown.complete"})

    def forget(self, session: HttpSession) -> None:
        if self.sessions.get(session.id) is session:
            del self.sessions[session.id]
        owned = self._by_client.get(session.client)
        if owned is not None:
            owned.discard(session)
            if not owned:
                del self._by_client[session.client]

    def _retry_after(self, sessions: Iterable[HttpSession]) -> tuple[bytes, bytes]:
        """``Retry-After``: the seconds until the first of ``sessions`` is due to expire; when
        none is (each has a request or a stream open), the time a session may stay unused."""
        now = trio.current_time()
        deadline = min((session.scope.deadline for session in sessions), default=math.inf)
        wait = deadline - now if deadline != math.inf else self.options.unused_session_timeout
        return (b"retry-after", str(max(1, math.ceil(wait))).encode())

    # -- readiness and drain -------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Whether to send this app traffic: serving (its lifespan runs), and not draining."""
        return self._nursery is not None and not (self._draining or self._shutting_down)

    @property
    def draining(self) -> bool:
        return self._draining

    def begin_drain(self) -> None:
        """Stop taking work, at once: readiness answers 503, and every new request is refused
        with 503, ``Retry-After`` and ``Connection: close`` before any of it runs (so a proxy
        may send it to another server). The requests in flight go on, and so do the client's
        answers and cancels they may wait for."""
        self._draining = True

    async def wait_idle(self) -> None:
        """Return once no request is being served (GET streams do not count)."""
        while self._serving:
            if self._none_serving is None:
                self._none_serving = trio.Event()
            await self._none_serving.wait()

    async def end_requests(self) -> None:
        """End every request still running with a JSON-RPC error that tells its client to
        retry (-32603, :data:`CUT_BY_SHUTDOWN`), on its own stream or as its JSON response,
        never a silent end; then wait (a little) until those errors are written."""
        error = ErrorObject.make(INTERNAL_ERROR, CUT_BY_SHUTDOWN, data={"retry": True})
        for session in [*self.sessions.values(), *self._opening, *self._posts]:
            for request_id in list(session.request_streams):
                session.engine.cancel_incoming(
                    request_id, "the server is shutting down", error=error
                )
        for post in self._alone:
            if post.record is not None:
                post.record.cancel("the server is shutting down", error=error)
        with trio.move_on_after(CUT_WRITE_GUARD):
            await self.wait_idle()

    async def drain(self, grace: float | None = None) -> None:
        """Shut down gracefully, as ``serve_http`` does on SIGTERM: :meth:`begin_drain`, let the
        requests in flight finish for ``grace`` seconds (default ``HttpOptions.drain_grace``),
        then :meth:`end_requests`. The ASGI server stops afterwards."""
        self.begin_drain()
        with trio.move_on_after(self.options.drain_grace if grace is None else grace):
            await self.wait_idle()
        await self.end_requests()

    def _refused_draining(self, request_id: RequestId | None = None) -> HttpError:
        return HttpError(
            503,
            DRAINING,
            request_id=request_id,
            headers=[(b"retry-after", b"1"), (b"connection", b"close")],
        )

    async def _readiness(self, scope: Scope, send: Send) -> None:
        """``GET ready_path``: 200 while serving, 503 otherwise; no MCP, no authorization
        (it tells nothing but that), for a load balancer's or an orchestrator's probe."""
        if scope["method"] not in ("GET", "HEAD"):
            raise HttpError(405, "Method Not Allowed", headers=[(b"allow", b"GET, HEAD")])
        ready = self.ready
        stopping = self._draining or self._shutting_down
        status = "ready" if ready else "draining" if stopping else "starting"
        body = b'{"status":"%s"}' % status.encode()
        headers = [(b"cache-control", b"no-store")]
        if not ready:
            headers.append((b"retry-after", b"1"))
        await self._respond(
            scope, send, 200 if ready else 503, body if scope["method"] == "GET" else b"", headers
        )

    # -- ASGI entry ----------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] == "websocket":
            await self.websockets(scope, receive, send, _route_path(scope))
            return
        if scope["type"] != "http":
            raise RuntimeError(f"trio_mcp's HTTP app does not speak {scope['type']!r}")
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self._http(scope, receive, tracked)
        except HttpError as error:
            await self._error(scope, send, error)
        except Exception:
            # The last resort, for a fault of ours: client input is refused by HttpError
            # above, always with a 4xx. The details go to the log, never to the peer.
            logger.exception("unexpected error serving %s %s", scope["method"], scope["path"])
            if not started:
                internal = ErrorObject.make(INTERNAL_ERROR, "Internal error")
                await self._error(scope, send, HttpError(500, internal))
            # Otherwise the response stays unfinished, and the server cuts the connection.

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = _route_path(scope)
        if route == self.options.ready_path:
            await self._readiness(scope, send)
            return
        if self.gate is not None and self._is_metadata(scope, route):
            self._check_host_and_origin(scope)
            await self._metadata(scope, send, self.gate)
            return
        if self.sse is not None and self.sse.handles(route):
            await self.sse.handle(scope, receive, send, route)
            return
        if route not in self._paths:
            mounted = scope.get("root_path", "")
            raise HttpError(404, "Not Found: the MCP endpoint is " + mounted + self.options.path)
        self._check_host_and_origin(scope)
        method = scope["method"]
        if method == "OPTIONS" and self.options.cors_origins is not None:
            await self._preflight(scope, send)
            return
        principal: Principal | None = None
        if self.gate is not None and method != "OPTIONS":
            # Who it is, before anything of MCP is read; a POST's scopes are checked once its
            # body says what it asks for, anything else needs the base scopes.
            try:
                principal = await self.gate.authenticate(scope)
                if method != "POST":
                    self.gate.authorize(principal, self.gate.needed(None, None))
            except Refused as refused:
                raise _refusal(refused) from None
        if self._nursery is None:
            raise HttpError(
                500,
                ErrorObject.make(
                    INTERNAL_ERROR,
                    "Internal error: the app's lifespan did not run; serve it with an ASGI server "
                    "that runs lifespan (hypercorn does), or wrap it in `async with app.running()`",
                ),
            )
        if self._shutting_down:
            raise HttpError(503, "Service Unavailable: the server is shutting down")
        if self._draining and method != "POST":
            raise self._refused_draining()
        if self.options.session_store is not None and method in ("POST", "GET", "DELETE"):
            await self._follow_record(scope, principal, method)
        if method == "POST":
            await self._post(scope, receive, send, principal)
        elif method == "GET":
            await self._get(scope, receive, send, principal)
        elif method == "DELETE":
            await self._delete(scope, send, principal)
        else:
            raise HttpError(405, "Method Not Allowed", headers=[(b"allow", b"GET, POST, DELETE")])

    # -- checks --------------------------------------------------------------------------------

    def _check_host_and_origin(self, scope: Scope) -> None:
        # The default guards against DNS rebinding: a browser on this machine, tricked into
        # resolving an attacker's name to 127.0.0.1, sends that name as Host and its page's
        # origin as Origin. So a request that reached us on a loopback address (whatever the bind:
        # 127.0.0.1, or 0.0.0.0 reached through loopback, as from a proxy on this host) needs
        # loopback names, unless the names are configured. A request that reached a network
        # address is not checked by default: that server is reachable without any rebinding.
        server_addr = scope.get("server") or ("", None)
        local = str(server_addr[0] or "")
        on_loopback = _is_loopback(local)
        host = _header(scope, b"host") or ""
        # Compared as a host name (any case) and a port (digits): nothing else slips through.
        parsed = _parse_host(host) if host else ("", None)
        if parsed is None:
            raise HttpError(
                400, f"Bad Request: Host {host!r} is not a host name with an optional port number"
            )
        name = f"[{parsed[0]}]" if ":" in parsed[0] else parsed[0]
        allowed_hosts = self.options.allowed_hosts
        if allowed_hosts is not None:
            if not host or not _host_allowed(parsed, allowed_hosts):
                raise HttpError(
                    403,
                    f"Forbidden: Host {host!r} is not in allowed_hosts; to accept it, "
                    f"add {name!r} to HttpOptions(allowed_hosts=[...]) "
                    "or pass `--allowed-host` to trio-mcp serve",
                )
        elif on_loopback and not _is_loopback(parsed[0]):
            raise HttpError(
                403,
                f"Forbidden: Host {host!r} refused: the request arrived on the loopback address "
                f"{local}, where only loopback names (localhost, 127.0.0.1, [::1]) are accepted "
                "by default, against DNS rebinding; if this name is yours (a proxy in front, "
                f"say), accept it with HttpOptions(allowed_hosts=[{name!r}]) or "
                f"`trio-mcp serve --allowed-host {name}`",
            )
        origin = _header(scope, b"origin")
        if origin is None:
            return
        if _origin_allowed(origin, self.options.cors_origins or (), wildcard=False):
            return  # an origin explicitly allowed to call us from a browser
        allowed_origins = self.options.allowed_origins
        if allowed_origins is not None:
            if not _origin_allowed(origin, allowed_origins):
                raise HttpError(
                    403,
                    f"Forbidden: Origin {origin!r} is not in allowed_origins; to accept it, "
                    "add it to HttpOptions(allowed_origins=[...]) or pass `--allowed-origin` "
                    "to trio-mcp serve",
                )
            return
        origin_parts = _parse_origin(origin)
        if on_loopback and (
            origin_parts is None
            or origin_parts[0] not in ("http", "https")
            or not _is_loopback(origin_parts[1])
        ):
            raise HttpError(
                403,
                f"Forbidden: Origin {origin!r} refused: the request arrived on the loopback "
                f"address {local}, where only loopback origins are accepted by default, against "
                f"DNS rebinding; accept it with HttpOptions(allowed_origins=[{origin!r}]) or "
                f"`trio-mcp serve --allowed-origin {origin}`",
            )

    def _cors_headers(self, scope: Scope) -> list[tuple[bytes, bytes]]:
        origins = self.options.cors_origins
        origin = _header(scope, b"origin")
        if origins is None or origin is None:
            return []
        if not _origin_allowed(origin, origins):
            return []
        exposed = b"mcp-session-id, mcp-protocol-version"
        if self.gate is not None:
            exposed += b", www-authenticate"  # a browser client reads the challenge
        return [
            (b"access-control-allow-origin", origin.encode()),
            (b"access-control-expose-headers", exposed),
            (b"vary", b"origin"),
        ]

    async def _preflight(
        self, scope: Scope, send: Send, methods: bytes = b"GET, POST, DELETE, OPTIONS"
    ) -> None:
        headers = self._cors_headers(scope)
        if headers:
            headers += [
                (b"access-control-allow-methods", methods),
                (b"access-control-allow-headers", MCP_HEADERS.encode()),
                (b"access-control-max-age", b"600"),
            ]
        await send({"type": "http.response.start", "status": 204, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    def _is_metadata(self, scope: Scope, route: str) -> bool:
        """Whether a request is for the Protected Resource Metadata: its path below the mount
        point, or whole (a host app may route the well-known path to a mounted app as is)."""
        paths = self.metadata_paths
        whole = str(scope.get("root_path") or "").rstrip("/") + route
        return route in paths or whole in paths

    async def _metadata(self, scope: Scope, send: Send, gate: HttpAuth) -> None:
        """The Protected Resource Metadata (RFC 9728): public, cacheable for a few minutes,
        and behind the same Host and Origin checks as the MCP path."""
        method = scope["method"]
        if method == "OPTIONS" and self.options.cors_origins is not None:
            await self._preflight(scope, send, b"GET, HEAD, OPTIONS")
            return
        if method not in ("GET", "HEAD"):
            raise HttpError(405, "Method Not Allowed", headers=[(b"allow", b"GET, HEAD, OPTIONS")])
        body = gate.metadata()
        headers = [
            (b"cache-control", f"max-age={METADATA_MAX_AGE}".encode()),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *self._cors_headers(scope),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body if method == "GET" else b""})

    async def _follow_record(self, scope: Scope, principal: Principal | None, method: str) -> None:
        """With a session store, before a request of a session is served: its record, read
        with its expiry pushed forward. A session held here takes what other workers changed,
        and ends if its record is gone (DELETEd elsewhere, or expired); a session held
        elsewhere gets a replica here, as its ``initialize`` left it and as its client set it
        since. Then the request is served as any other, and 404 if none of this applied."""
        store = self.options.session_store
        assert store is not None
        session_id = _header(scope, b"mcp-session-id")
        if not session_id or len(session_id) > 200:
            return
        local = self.sessions.get(session_id)
        if local is None and method == "GET":
            last_event = _header(scope, b"last-event-id")
            if last_event and parse_event_id(last_event) is not None:
                return  # a resume of a stream held elsewhere: served from the event store
        pending = self._replicating.get(session_id)
        if local is None and pending is not None:
            await pending.wait()  # another request is building the replica
            return
        done = trio.Event()
        if local is None:
            self._replicating[session_id] = done
        try:
            try:
                record = await store.touch(session_id, self.options.session_idle_timeout)
            except SessionStoreUnavailable as error:
                logger.error("session %s: %s", session_id, error)
                if local is not None:
                    return  # held here: it goes on as it is
                raise HttpError(
                    503,
                    "Service Unavailable: the session store cannot be reached; retry",
                    headers=[(b"retry-after", b"1")],
                ) from None
            owner = _identity(principal)
            if record is None or record.owner != (owner or ""):
                if record is None and local is not None and local.owner == owner:
                    self.forget(local)  # ended elsewhere: gone here too
                    local.close()
                return  # an unknown session, to this principal: 404 as usual
            if local is not None:
                local.follow(record)
                return
            await self._replicate(scope, session_id, owner, record)
        finally:
            if local is None:
                del self._replicating[session_id]
                done.set()

    async def _replicate(
        self, scope: Scope, session_id: str, owner: str | None, record: SessionRecord
    ) -> None:
        if len(self.sessions) + len(self._opening) >= self.options.max_sessions:
            raise HttpError(
                503,
                "Service Unavailable: the server has reached its session limit",
                headers=[self._retry_after(self.sessions.values())],
            )
        session = HttpSession(
            self, session_id, client=self._client_key(scope), owner=owner, replica=True
        )
        try:
            session.restore(record)
        except (ProtocolError, ValueError) as error:
            logger.error("session %s: its record cannot be restored: %s", session_id, error)
            return  # 404: nothing of it can be served here
        assert self._nursery is not None
        await self._nursery.start(session.run)
        self.sessions[session_id] = session
        session.touch()  # idle until its request registers: a refused one leaves it to expire

    async def _send_elsewhere(
        self, session: HttpSession, message: Notification | Response | ErrorResponse, body: bytes
    ) -> bool:
        """Send on a message that belongs to another worker's copy of the session: True if it
        was sent on (or is for every copy), False if it is this copy's."""
        relay = self.options.relay
        assert relay is not None
        node: str | None
        if isinstance(message, Notification):
            if message.method != "notifications/cancelled":
                return False
            params = message.params or {}
            rid = params.get("requestId")
            if rid is None or session.engine.in_flight(rid) is not None:
                return False  # runs here (or is nothing): this copy's
            node, kind = None, "cancel"  # it runs elsewhere, if anywhere: every copy hears it
        else:
            rid = message.id
            mine = f"{self.options.node_id}/"
            if not isinstance(rid, str) or "/" not in rid or rid.startswith(mine):
                return False
            node, kind = rid.partition("/")[0], "message"
        try:
            await relay.send(node, _relayed(kind, session.id, body))
        except RelayUnavailable as error:
            logger.error("session %s: %s", session.id, error)
            raise HttpError(
                503,
                "Service Unavailable: the message is for another worker, and the relay to it "
                "failed; retry",
                headers=[(b"retry-after", b"1")],
            ) from None
        return True

    async def _hold_get(self, session: HttpSession) -> None:
        """This copy holds the session's GET stream now: say so in the record, so that the
        other copies send it their requests' messages for it."""
        session.get_node = self.options.node_id
        try:
            await session.save()
        except ProtocolError as error:
            # The stream works here; the other copies keep the messages for a GET of theirs.
            logger.warning("session %s: %s", session.id, error.message)

    def _on_relayed(self, data: bytes) -> None:
        """A message another worker relayed to this one (or to every one)."""
        try:
            note = orjson.loads(data)
            kind, session_id, body = note["k"], note["s"], note.get("m")
        except (orjson.JSONDecodeError, KeyError, TypeError):
            logger.warning("relay: ignored a message that is not one of ours")
            return
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if session is None or session.closing:
            return
        if kind == "end":
            self.forget(session)
            session.close()
            return
        if not isinstance(body, str):
            return
        parsed = parse(body)
        if kind == "get":
            data = body.encode()
            # As for this copy's own: progress and logs only to a GET open now.
            if session.standalone.listener is not None or _waits(data):
                session.standalone.push(data)
        elif kind == "message" and isinstance(parsed, Response | ErrorResponse):
            session.engine.feed(parsed)
            session.touch()
        elif kind == "cancel" and isinstance(parsed, Notification):
            rid = (parsed.params or {}).get("requestId")
            if rid is not None and session.engine.in_flight(rid) is not None:
                session.engine.feed(parsed)

    def _session_for(self, scope: Scope, principal: Principal | None) -> HttpSession:
        session_id = _header(scope, b"mcp-session-id")
        if not session_id:
            raise HttpError(400, "Bad Request: Missing session ID")
        session = self._live_session(session_id, principal)
        if session is None or session.closing:
            # Expiring (its deadline passed, its task has not yet ended) is expired: decided
            # here, with no checkpoint before the caller registers its request.
            raise HttpError(404, "Session not found")
        return session

    def _live_session(self, session_id: str, principal: Principal | None) -> HttpSession | None:
        """The session of that id, if the principal is the one that opened it: to anyone else
        it does not exist (the same 404, the same routing as an unknown id), so a session id
        seen elsewhere is worth nothing without its owner's token."""
        if self.options.session_store is None and not is_minted_here(
            session_id, self.options.node_id
        ):
            return None  # another node's tag, or no id of ours: never looked up
        session = self.sessions.get(session_id)
        if session is None or session.owner != _identity(principal):
            return None
        return session

    def _check_version(self, scope: Scope) -> None:
        version = _header(scope, b"mcp-protocol-version")
        if version is None:
            return  # assumed 2025-03-26
        if version not in KNOWN_VERSIONS:
            raise HttpError(
                400,
                f"Bad Request: Unsupported protocol version: {version}. Supported versions: "
                + ", ".join(reversed(HANDSHAKE_VERSIONS)),
            )

    # -- responses -----------------------------------------------------------------------------

    async def _error(self, scope: Scope, send: Send, error: HttpError) -> None:
        body = encode(ErrorResponse(error.request_id, error.error))
        await self._respond(scope, send, error.status, body, error.headers)

    async def _respond(
        self,
        scope: Scope,
        send: Send,
        status: int,
        body: bytes = b"",
        headers: Iterable[tuple[bytes, bytes]] = (),
        content_type: bytes = b"application/json",
    ) -> None:
        all_headers = [*headers, *self._cors_headers(scope)]
        if body:
            all_headers.append((b"content-type", content_type))
        all_headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": all_headers})
        await send({"type": "http.response.body", "body": body})

    async def _read_body(self, receive: Receive) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise HttpError(400, "Bad Request: the client disconnected")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.options.max_body_bytes:
                raise HttpError(
                    413, f"Payload Too Large: the limit is {self.options.max_body_bytes} bytes"
                )
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    # -- POST ----------------------------------------------------------------------------------

    async def _post(
        self, scope: Scope, receive: Receive, send: Send, principal: Principal | None
    ) -> None:
        accept = _header(scope, b"accept")
        needs = (
            ["application/json"]
            if self.options.json_response
            else ["application/json", "text/event-stream"]
        )
        if not all(_accepts(accept, media_type) for media_type in needs):
            raise HttpError(
                406,
                "Not Acceptable: the client must accept " + " and ".join(needs),
            )
        if not _is_json(_header(scope, b"content-type")):
            raise HttpError(
                415, "Unsupported Media Type: the body must be application/json (one media type)"
            )
        body = await self._read_body(receive)
        parsed = parse(body)
        if isinstance(parsed, Batch):
            raise HttpError(400, "Invalid Request: JSON-RPC body must be a single request object")
        if isinstance(parsed, Invalid):  # -32700 for a body that is not JSON, else -32600
            raise HttpError(400, parsed.error, request_id=parsed.id)
        if self._draining and isinstance(parsed, Request):
            # A client's answer to one of our requests, or its cancel, still gets through: a
            # request in flight may be waiting for it.
            raise self._refused_draining(parsed.id)
        if self.gate is not None:
            assert principal is not None
            request = parsed if isinstance(parsed, Request) else None
            needed = self.gate.needed(
                request.method if request else None, request.params if request else None
            )
            try:
                # Before the engine sees it: every scope it needs, in one challenge.
                self.gate.authorize(principal, needed)
            except Refused as refused:
                raise _refusal(refused, request.id if request else None) from None
        plain_initialize = (
            isinstance(parsed, Request)
            and parsed.method == "initialize"
            and not has_envelope(parsed.params)
        )
        if is_modern(
            _header(scope, b"mcp-protocol-version"),
            self._has_session(scope, principal),
            plain_initialize,
        ):
            await self._post_modern(scope, receive, send, parsed, principal)
            return
        if self.options.stateless:
            await self._post_stateless(scope, receive, send, parsed, principal)
            return
        if isinstance(parsed, Notification) and parsed.method == "initialize":
            # An initialize without an id asks for nothing: accepted, and no session is kept.
            await self._respond(scope, send, 202)
            return
        if isinstance(parsed, Request) and parsed.method == "initialize":
            if _header(scope, b"mcp-session-id"):
                raise HttpError(
                    400,
                    "Invalid Request: Server already initialized",
                    request_id=parsed.id,
                )
            await self._initialize(scope, receive, send, parsed, principal)
            return
        session = self._session_for(scope, principal)
        self._check_version(scope)
        if isinstance(parsed, Request):
            await self._request(scope, receive, send, session, parsed, principal)
            return
        # A notification, or the client's response to one of our requests.
        if self.options.relay is not None and await self._send_elsewhere(session, parsed, body):
            await self._respond(scope, send, 202)
            return
        session.engine.feed(parsed)
        session.touch()
        if isinstance(parsed, Notification) and parsed.method == "notifications/cancelled":
            # The cancelled request's task is runnable now: it takes its step (its cancellation
            # reaches the handler, whose cleanup runs) before this POST writes its answer,
            # rather than after that write. The client learns nothing sooner either way.
            for _ in range(_PATIENCE):
                await trio.lowlevel.checkpoint()
        await self._respond(scope, send, 202)

    async def _initialize(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        request: Request,
        principal: Principal | None,
    ) -> None:
        """An ``initialize`` with no session: it opens one, kept only if it succeeds."""
        # Sessions still opening count too, so a burst cannot overshoot either limit. One
        # client is refused before everyone is: 429 for its own limit, 503 for the server's.
        # Both say when a session is next due to expire.
        client = self._client_key(scope)
        owned = self._by_client.get(client, set())
        limit = self.options.max_sessions_per_client
        if len(owned) >= limit:
            raise HttpError(
                429,
                f"Too Many Requests: this client already has {limit} sessions, the limit; end "
                "one with DELETE, or retry later",
                request_id=request.id,
                headers=[self._retry_after(owned)],
            )
        if len(self.sessions) + len(self._opening) >= self.options.max_sessions:
            raise HttpError(
                503,
                "Service Unavailable: the server has reached its session limit",
                request_id=request.id,
                headers=[self._retry_after(self.sessions.values())],
            )
        assert self._nursery is not None
        session = HttpSession(
            self,
            mint_session_id(self.options.node_id),
            client=client,
            owner=_identity(principal),
        )
        self._opening.add(session)
        self._by_client.setdefault(client, set()).add(session)
        try:
            await self._nursery.start(session.run)
            await self._serve(scope, receive, send, session, request, principal)
        finally:
            self._opening.discard(session)
            if session.id not in self.sessions:
                self.forget(session)  # refused, or the POST failed: it holds no place

    async def _request(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        session: HttpSession,
        request: Request,
        principal: Principal | None,
    ) -> None:
        if has_envelope(request.params):
            if _header(scope, b"mcp-protocol-version") in MODERN_VERSIONS:
                raise HttpError(
                    400,
                    "Invalid Request: this session negotiated the legacy lifecycle via "
                    "`initialize`; a request with a per-request protocol version does not "
                    "belong on it",
                    request_id=request.id,
                )
            raise HttpError(
                400,
                ErrorObject.make(
                    HEADER_MISMATCH,
                    "Header mismatch: the body carries a modern protocol version but the "
                    "MCP-Protocol-Version header does not",
                ),
                request_id=request.id,
            )
        session.used = True
        if request.id in session.request_streams or session.engine.in_flight(request.id):
            raise HttpError(
                409,
                "Conflict: Request id is already in flight for this session",
                request_id=request.id,
            )
        await self._serve(scope, receive, send, session, request, principal)

    def _priming(self, session: HttpSession, stream: EventStream) -> str | None:
        """A priming event id, sent first so that a client can resume the stream (2025-11-25)."""
        if is_at_least(session.connection.state.protocol_version, V2025_11_25):
            return event_id(session.id, stream.key, stream.seq)
        return None

    async def _post_stateless(
        self, scope: Scope, receive: Receive, send: Send, message: Any, principal: Principal | None
    ) -> None:
        """No sessions: each POST gets its own engine, served inside this POST's task.

        Nothing can resume or cancel it from elsewhere, so its events are not stored, and the
        client going away cancels it.
        """
        session = HttpSession(self, "stateless", kind=SessionKind.STATELESS)
        if isinstance(message, Request) and message.method != "initialize":
            session.connection.state.skip_handshake()
        if not isinstance(message, Request):
            await self._respond(scope, send, 202)
            return
        await self._serve_alone(scope, receive, send, session, message, principal)

    async def _post_modern(
        self, scope: Scope, receive: Receive, send: Send, message: Any, principal: Principal | None
    ) -> None:
        """A modern request: checked against its headers, then served inside this POST's own
        task, so the client closing the stream is the cancel (2026-07-28)."""
        version = _header(scope, b"mcp-protocol-version") or ""
        if version not in MODERN_VERSIONS:
            supported = {"supported": list(MODERN_VERSIONS), "requested": version}
            raise HttpError(
                400,
                ErrorObject.make(
                    UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", data=supported
                ),
                request_id=getattr(message, "id", None),
            )
        if _header(scope, b"mcp-session-id") is not None:
            raise HttpError(
                400,
                "Invalid Request: a modern request belongs to no session; drop Mcp-Session-Id",
                request_id=getattr(message, "id", None),
            )
        if not isinstance(message, Request):
            if isinstance(message, Notification):
                await self._respond(scope, send, 202)
                return
            raise HttpError(400, "Invalid Request: a modern client sends no responses")
        try:
            check_request(message, _mcp_headers(scope), self._param_headers)
        except ProtocolError as problem:
            raise HttpError(
                status_for(problem.code), problem.error, request_id=message.id
            ) from None
        if not self.server.mounts:
            await serve_modern(self, scope, receive, send, message, principal)
            return
        # Mounted servers and proxies read their connection's engine: this request gets one.
        session = HttpSession(self, "modern", kind=SessionKind.MODERN)
        # Registered while it runs, so that list changes reach its listen streams.
        self.server.connections.add(session.connection)
        try:
            await self._serve_alone(scope, receive, send, session, message, principal)
        finally:
            self.server.connections.discard(session.connection)

    def _param_headers(self, tool: str) -> ParamHeaders:
        """A tool's ``x-mcp-header`` declarations, for a modern POST's header check."""
        entry = self.server.tools.get(tool)
        return {} if entry is None else entry.param_headers()

    # -- serving one request -------------------------------------------------------------------

    async def _serve(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        session: HttpSession,
        request: Request,
        principal: Principal | None,
    ) -> None:
        """Feed one request to its session's engine and answer this POST with what it sends.

        Every POST that carries a request on a session (``Mcp-Session-Id``) ends here, once its
        caller has picked the session and made its checks; a POST's own engine is served by
        :meth:`_serve_alone`. The request's stream is registered and listened to before the
        engine sees the request, so nothing the engine sends for it can be missed, and ``feed``
        takes no checkpoint, so the engine's routing and this stream cannot disagree. The
        request carries the principal of this POST's own token (``ctx.auth``), whoever opened
        the session. The reply:

        - the ``initialize`` that opens a session: once complete, with the session id only if
          it succeeded (:meth:`_answer_initialize`);
        - JSON mode: the response alone, once the request ends (:meth:`_answer_json`);
        - otherwise SSE as the events come, which the client can resume (a priming event id
          first, from 2025-11-25); a client that goes away leaves the request running.
        """
        stream, events = self._begin(session, request)
        try:
            session.engine.feed(request, principal=principal)
            if request.method == "initialize":
                items = await _ended(stream, events)
                stream.delivered()  # answered whole, at once: there is nothing to resume
                await self._answer_initialize(scope, send, session, items, request.id)
            elif self.options.json_response:
                items = await _ended(stream, events)
                stream.delivered()  # a JSON response carries no event id to resume from
                await self._answer_json(scope, send, stream, items)
            else:
                prime = self._priming(session, stream)
                await self._stream(scope, receive, send, stream, events, prime)
        finally:
            self._end(session, stream, events)

    async def _serve_alone(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        session: HttpSession,
        request: Request,
        principal: Principal | None,
    ) -> None:
        """Serve the one request of this POST's own engine (modern, stateless) in this task.

        The engine runs the request right here (``Session.serve_one``): no engine task and no
        writer. A watcher beside it sees the client go away, which is the request's cancel.
        The answer is written once the request has ended (one JSON object, or an SSE body of
        its one event), unless a notification comes first: a task of this POST then streams
        SSE from that event on, while the request runs. Nothing is stored: nothing of a POST's
        own engine can be resumed.
        """
        stream, events = self._begin(session, request)
        self._posts.add(session)  # so that a drain can end its request
        try:
            async with trio.open_nursery() as nursery:
                watcher = _Watcher(receive, nursery, session, request.id)

                def stream_now() -> None:
                    nursery.start_soon(
                        self._stream_alone, scope, send, stream, events, nursery, watcher
                    )

                session.on_event = stream_now
                await _on_first_yield(
                    session.engine.serve_one(request, nursery, principal=principal),
                    watcher.start,
                )
                if session.on_event is not None:  # nothing was streamed: answer it whole
                    session.on_event = None
                    await self._answer_alone(scope, send, session, stream, events)
                    _wind_down(nursery, ended=True, own=watcher.started)
        finally:
            self._posts.discard(session)
            self._end(session, stream, events)
            session.release()

    def _begin(self, session: HttpSession, request: Request) -> tuple[EventStream, Listener]:
        """Register a request's stream, and listen to it, before the engine sees the request."""
        if session.closing:
            # A session winding down takes nothing new (its engine may be gone); the same
            # refusal as an expired one. No checkpoint between here and the feed.
            raise HttpError(404, "Session not found", request_id=request.id)
        stream = session.new_request_stream(request.id)
        events = stream.attach()
        session.busy()
        self._serving += 1
        return stream, events

    def _end(
        self,
        session: HttpSession,
        stream: EventStream,
        events: Listener,
    ) -> None:
        stream.detach(events)
        session.idle()
        self._request_done()

    def _request_done(self) -> None:
        """A request served here ended (see :meth:`wait_idle`)."""
        self._serving -= 1
        if self._serving == 0 and self._none_serving is not None:
            self._none_serving.set()
            self._none_serving = None

    async def _answer_alone(
        self,
        scope: Scope,
        send: Send,
        session: HttpSession,
        stream: EventStream,
        events: Listener,
    ) -> None:
        """The whole answer of a POST's own request, once it has ended. A modern request's
        status follows its error code; an empty 202 when it was cancelled with no response
        (the client went away), never the 500 an ASGI server answers for an app that sent
        nothing."""
        items = _drain_now(events)
        stream.delivered()
        if not stream.responded or not items:
            await self._respond(scope, send, 202)
        elif session.kind is SessionKind.MODERN:
            data = items[-1][1]
            await self._respond(scope, send, status_for(_error_code(data)), data)
        elif self.options.json_response:
            await self._respond(scope, send, 200, items[-1][1])
        else:
            await self._sse(scope, send, items, ())

    async def _stream_alone(
        self,
        scope: Scope,
        send: Send,
        stream: EventStream,
        events: Listener,
        done: trio.Nursery,
        watcher: _Watcher,
    ) -> None:
        """SSE for a POST's own request whose notifications come before its response, as they
        come; then the POST winds down (``done``, its nursery). A cut or a client gone cancels
        the request, which nobody could read any more."""
        ended = False
        try:
            await self._sse_start(scope, send)
            ended = await self._relay(send, stream, events)
        finally:
            _wind_down(done, ended=ended, own=1 + watcher.started)

    async def _answer_initialize(
        self,
        scope: Scope,
        send: Send,
        session: HttpSession,
        items: list[tuple[str, bytes]],
        request_id: RequestId,
    ) -> None:
        """The session is kept, and its id sent, only once its ``initialize`` succeeded."""
        self._opening.discard(session)
        if not session.connection.state.initialized:
            # Refused (bad params): no session is kept.
            session.close()
            data = items[-1][1] if items else b""
            await self._respond(scope, send, 200, data)
            return
        if self.options.session_store is not None:
            try:
                # Before the client learns the id: its next request may reach any worker.
                await session.save()
            except ProtocolError:
                session.close()
                raise HttpError(
                    503,
                    "Service Unavailable: the session could not be recorded for the other "
                    "workers; retry",
                    request_id=request_id,
                    headers=[(b"retry-after", b"1")],
                ) from None
        self.sessions[session.id] = session
        headers = [(b"mcp-session-id", session.id.encode())]
        if self.options.json_response:
            await self._respond(scope, send, 200, items[-1][1], headers)
            return
        await self._sse(scope, send, items, headers)

    async def _answer_json(
        self, scope: Scope, send: Send, stream: EventStream, items: list[tuple[str, bytes]]
    ) -> None:
        """JSON mode: the response alone; 202 with no body when the request was cancelled."""
        if not stream.responded or not items:
            await self._respond(scope, send, 202)
            return
        await self._respond(scope, send, 200, items[-1][1])

    # -- SSE -----------------------------------------------------------------------------------

    async def _sse_start(
        self, scope: Scope, send: Send, headers: Iterable[tuple[bytes, bytes]] = ()
    ) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream"),
                    (b"cache-control", b"no-cache"),
                    (b"x-accel-buffering", b"no"),
                    *headers,
                    *self._cors_headers(scope),
                ],
            }
        )

    async def _sse(
        self,
        scope: Scope,
        send: Send,
        items: list[tuple[str, bytes]],
        headers: Iterable[tuple[bytes, bytes]],
    ) -> None:
        """A complete SSE response whose events are already known: its body in one write."""
        await self._sse_start(scope, send, headers)
        body = b"".join(encode_event(data, event="message", id=event) for event, data in items)
        await send({"type": "http.response.body", "body": body})

    async def _stream(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        stream: EventStream,
        events: Listener,
        prime: str | None,
        headers: Iterable[tuple[bytes, bytes]] = (),
        *,
        first: Iterable[tuple[str, bytes]] = (),
    ) -> None:
        """Relay a stream's events until it ends, its listener is cut (replaced, or too far
        behind), or the client goes; ``first`` (replayed from the store) before them.

        The stream itself outlives a client that goes away: it waits for a resume. A watcher
        of ``receive`` sees the client go, only while there is something to wait for.
        """
        await self._sse_start(scope, send, headers)
        # The priming event, then what was replayed: written first, with whatever events are
        # ready by then (alone if none is, so that a client can resume a slow request).
        prefix = b"".join(
            [
                encode_event(b"", id=prime, retry=self.options.retry_ms) if prime else b"",
                *(encode_event(data, event="message", id=event) for event, data in first),
            ]
        )
        for _ in range(_PATIENCE):
            # A request about to be answered (already runnable) gets a scheduling round or two
            # to end: then its whole stream goes in one write with the priming event, not one
            # write for each, and it needs no watcher.
            if stream.finished:
                break
            await trio.lowlevel.checkpoint()
        if stream.finished:
            await self._relay(send, stream, events, prefix)  # nothing left to wait for
            return
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_cancel_on_disconnect, receive, nursery.cancel_scope)
            _wind_down(nursery, ended=await self._relay(send, stream, events, prefix), own=1)

    async def _relay(
        self,
        send: Send,
        stream: EventStream,
        events: Listener,
        prefix: bytes = b"",
    ) -> bool:
        """Write a stream's events as SSE until its end or a cut (a replacing listener, or too
        far behind), ``prefix`` (already encoded) first; True once the end was written: the
        response is complete.

        Every event already waiting when a write is due goes in that write (up to
        ``_WRITE_BYTES``), and the end in the same one as the last events: a request answered
        at once costs the client's connection one body, as a JSON response does, instead of one
        per event and one for the end.

        Once the end is taken, every event before it was written to a live connection (a
        disconnect would have cancelled this): the stream is delivered, nothing is left to
        resume. Decided before the last write, which the disconnect that hypercorn reports once
        a response is complete may interrupt.
        """
        interval = self.options.keepalive_interval
        ended = False
        body = bytearray(prefix)

        def take(item: StreamItem) -> bool:
            """Add a taken item to ``body``; True for the end."""
            if item is None:
                stream.delivered()
                return True
            stream.settle(events)
            body.extend(encode_event(item[1], event="message", id=item[0]))
            return False

        try:
            while True:
                if not body and not len(events):
                    # Only a real wait needs a scope for its keep-alive: what is there already
                    # is taken below.
                    with trio.move_on_after(interval):
                        try:
                            item = await events.receive()
                        except trio.EndOfChannel:
                            break  # cut: the client resumes with Last-Event-ID
                        if take(item):
                            break
                    if not body:
                        body.extend(KEEPALIVE)  # nothing came within the interval
                        await send(
                            {"type": "http.response.body", "body": bytes(body), "more_body": True}
                        )
                        body.clear()
                        continue
                # Whatever else is ready goes with it.
                done = False
                while len(body) < _WRITE_BYTES:
                    try:
                        item = events.receive_nowait()
                    except trio.WouldBlock:
                        break
                    except trio.EndOfChannel:
                        done = True  # cut
                        break
                    if take(item):
                        done = True
                        break
                if done:
                    break
                await send({"type": "http.response.body", "body": bytes(body), "more_body": True})
                body.clear()
            ended = True
            await send({"type": "http.response.body", "body": bytes(body)})
        except OSError:
            return False  # the client went away; the stream waits for a resume
        except trio.Cancelled:
            if not ended:
                # The server is shutting down (or the client left): end the response properly
                # if the connection is still there, so the client sees an end, not a cut.
                with trio.move_on_after(1) as cleanup:
                    cleanup.shield = True
                    try:
                        await send({"type": "http.response.body", "body": b""})
                    except OSError:
                        pass
            raise
        return ended

    # -- GET and DELETE ------------------------------------------------------------------------

    def _has_session(self, scope: Scope, principal: Principal | None) -> bool:
        """Whether the request names a live session (of this principal): only then does a
        modern header stay on the session's (handshake-era) path."""
        session_id = _header(scope, b"mcp-session-id")
        return session_id is not None and self._live_session(session_id, principal) is not None

    def _refuse_modern(self, scope: Scope, principal: Principal | None) -> None:
        """The modern era has one endpoint and POST only: GET and DELETE are 405 there."""
        version = _header(scope, b"mcp-protocol-version")
        if is_modern(version, self._has_session(scope, principal), False):
            raise HttpError(
                405,
                "Method Not Allowed: the modern protocol uses POST only",
                headers=[(b"allow", b"POST")],
            )

    async def _get(
        self, scope: Scope, receive: Receive, send: Send, principal: Principal | None
    ) -> None:
        self._refuse_modern(scope, principal)
        if self.options.stateless:
            raise HttpError(
                405, "Method Not Allowed: this server is stateless", headers=[(b"allow", b"POST")]
            )
        if not _accepts(_header(scope, b"accept"), "text/event-stream"):
            raise HttpError(406, "Not Acceptable: the client must accept text/event-stream")
        last_event = _header(scope, b"last-event-id")
        parsed = parse_event_id(last_event) if last_event else None
        session_id = _header(scope, b"mcp-session-id")
        local = self.sessions.get(session_id) if session_id is not None else None
        elsewhere = local is None or (
            # With a session store, a stream none of this worker's copy holds may be live
            # on another worker's copy of the session.
            self.options.session_store is not None
            and parsed is not None
            and parsed[0] == local.id
            and local.stream_for_key(parsed[1]) is None
        )
        if parsed is not None and session_id is not None and elsewhere:
            # Not here: a session of another worker (or one that died), whose streams a shared
            # store may hold.
            self._check_version(scope)
            await self._resume_elsewhere(scope, receive, send, principal, session_id, parsed)
            return
        session = self._session_for(scope, principal)
        self._check_version(scope)
        stream: EventStream | None = session.standalone
        after: int | None = None
        if last_event:
            if parsed is None or parsed[0] != session.id:
                raise HttpError(400, "Bad Request: unknown Last-Event-ID")
            _, key, after = parsed
            stream = session.stream_for_key(key)
            if stream is None:
                # Finished: replay what the store still has, if it knows the stream at all.
                replay = await self._replay(stream_id(session.id, key), after)
                if replay is None:
                    raise HttpError(400, "Bad Request: unknown Last-Event-ID")
                await self._sse(scope, send, _items(session.id, key, replay.events), ())
                session.store.forget(stream_id(session.id, key))  # delivered: nothing is left
                return
            if after > stream.seq:
                raise HttpError(400, "Bad Request: unknown Last-Event-ID")  # never issued
        assert stream is not None
        session.used = True
        # Attached first, so that nothing pushed while the store is read is missed: what the
        # store gives up to this point is written first, then what came since.
        upto = stream.seq
        events = stream.attach(resumed=after is not None)
        session.busy()
        try:
            if stream is session.standalone and self.options.session_store is not None:
                await self._hold_get(session)
            missed: list[tuple[str, bytes]] = []
            if after is not None and after < upto:
                replay = None
                if not session.store.is_lost(stream.stream_id):
                    replay = await self._replay(stream.stream_id, after)
                if replay is None:
                    # Live, but what the client missed is no longer kept: a silent gap would
                    # lose messages, so say so and let the client start over.
                    raise HttpError(
                        400, "Bad Request: the events after Last-Event-ID are no longer kept"
                    )
                kept = [(seq, data) for seq, data in replay.events if seq <= upto]
                missed = _items(session.id, stream.key, kept)
            await self._stream(scope, receive, send, stream, events, None, first=missed)
        finally:
            stream.detach(events)
            session.idle()

    async def _replay(self, stream: str, after: int) -> Replay | None:
        """What the store holds of ``stream`` after ``after``, once everything this app handed
        its writer is in it; 503 while the store cannot be reached."""
        try:
            await self.writer.flush()
            return await self.store.replay(stream, after)
        except EventStoreUnavailable as error:
            logger.error("a resume could not be served: %s", error)
            raise HttpError(
                503,
                "Service Unavailable: the event store cannot be reached; retry the resume later",
                headers=[(b"retry-after", b"5")],
            ) from None

    async def _resume_elsewhere(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        principal: Principal | None,
        session_id: str,
        parsed: tuple[str, str, int],
    ) -> None:
        """A resume of a stream whose session this worker does not hold, from the shared store.

        Served only if the event id names the session of the request, and the store has that
        stream for the same owner; anything else is the 404 of an unknown session. Then the
        events after the id, and, while the stream is not finished and its session lives on
        another worker (its liveness key), the new ones as they come. A stream that ends
        unfinished, its session living nowhere (its worker died), ends with an error response
        for its request: the client never waits for an answer that cannot come.
        """
        owner, key, after = parsed
        stream = stream_id(owner, key) if owner == session_id else None
        replay = await self._replay(stream, after) if stream is not None else None
        meta = replay.meta if replay is not None else None
        if (
            stream is None
            or replay is None
            or meta is None
            or meta.session_id != session_id
            or meta.owner != _identity(principal)
        ):
            raise HttpError(404, "Session not found")
        await self._sse_start(scope, send)
        options = self.options
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_cancel_on_disconnect, receive, nursery.cancel_scope)
                last = after
                idle = 0.0
                while True:
                    for seq, data in replay.events:
                        body = encode_event(data, event="message", id=event_id(owner, key, seq))
                        await send({"type": "http.response.body", "body": body, "more_body": True})
                        last = seq
                        idle = 0.0
                    if replay.finished:
                        break
                    try:
                        alive = await self.store.session_alive(session_id)
                        if not alive:
                            # Its worker is gone: anything it wrote before it went is in the
                            # store by now.
                            replay = await self.store.replay(stream, last)
                    except EventStoreUnavailable as error:
                        logger.error("a resumed stream lost its store: %s", error)
                        alive, replay = False, None
                    if not alive:
                        if replay is not None:
                            for seq, data in replay.events:
                                body = encode_event(
                                    data, event="message", id=event_id(owner, key, seq)
                                )
                                await send(
                                    {"type": "http.response.body", "body": body, "more_body": True}
                                )
                        if (replay is None or not replay.finished) and meta.request_id is not None:
                            body = encode_event(_orphaned(meta.request_id), event="message")
                            await send(
                                {"type": "http.response.body", "body": body, "more_body": True}
                            )
                        break
                    await trio.sleep(options.resume_poll_interval)
                    idle += options.resume_poll_interval
                    if idle >= options.keepalive_interval:
                        await send(
                            {"type": "http.response.body", "body": KEEPALIVE, "more_body": True}
                        )
                        idle = 0.0
                    try:
                        replay = await self.store.replay(stream, last)
                    except EventStoreUnavailable:
                        replay = None
                    if replay is None:
                        break  # forgotten (delivered, or its session ended) or dropped
                nursery.cancel_scope.cancel()
            await send({"type": "http.response.body", "body": b""})
        except OSError:
            return  # the client went away; it may resume again

    async def _delete(self, scope: Scope, send: Send, principal: Principal | None) -> None:
        self._refuse_modern(scope, principal)
        if self.options.stateless:
            raise HttpError(
                405, "Method Not Allowed: this server is stateless", headers=[(b"allow", b"POST")]
            )
        session = self._session_for(scope, principal)
        self.forget(session)
        session.close()
        if self.options.session_store is not None:
            try:
                await self.options.session_store.delete(session.id)
                if self.options.relay is not None:
                    await self.options.relay.send(None, _relayed("end", session.id))
            except RelayUnavailable as error:
                # Its record is gone: every other copy ends at its next request, or idle.
                logger.warning("session %s: no other worker was told: %s", session.id, error)
            except SessionStoreUnavailable as error:
                logger.error("session %s: %s", session.id, error)
                raise HttpError(
                    503,
                    "Service Unavailable: the session ended on this worker, but the session "
                    "store failed: retry the DELETE",
                    headers=[(b"retry-after", b"1")],
                ) from None
        await self._respond(scope, send, 200)


async def _send_relayed(relay: Relay, node: str, message: bytes) -> None:
    try:
        await relay.send(node, message)
    except RelayUnavailable as error:
        logger.error("a message for the GET stream on %s was lost: %s", node, error)


def _relayed(kind: str, session_id: str, body: bytes | None = None) -> bytes:
    note: dict[str, str] = {"k": kind, "s": session_id}
    if body is not None:
        note["m"] = body.decode()
    return orjson.dumps(note)


async def _cancel_on_disconnect(receive: Receive, scope: trio.CancelScope) -> None:
    """Cancel ``scope`` once the client has gone away (its request body was already read)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


class _Watcher:
    """The disconnect watcher of a POST's own request (:func:`_watch_disconnect`), started
    once the request first yields (:func:`_on_first_yield`)."""

    __slots__ = ("_nursery", "_receive", "_request_id", "_session", "started")

    def __init__(
        self, receive: Receive, nursery: trio.Nursery, session: HttpSession, request_id: RequestId
    ) -> None:
        self._receive = receive
        self._nursery = nursery
        self._session = session
        self._request_id = request_id
        self.started = False

    def start(self) -> None:
        self.started = True
        nursery = self._nursery
        nursery.start_soon(
            _watch_disconnect, self._receive, nursery.cancel_scope, self._session, self._request_id
        )


async def _watch_disconnect(
    receive: Receive, scope: trio.CancelScope, session: HttpSession, rid: RequestId
) -> None:
    """:func:`_cancel_on_disconnect` for a POST's own engine: a disconnect once its request has
    ended cancels nothing, for hypercorn reports the end of a complete response as a
    disconnect too."""
    while (await receive())["type"] != "http.disconnect":
        pass
    if session.has_ended(rid):
        return
    session.engine.cancel_incoming(rid, "the client closed the connection")
    scope.cancel()


#: The checkpoints a POST waits for a task that is already runnable to take its step: two, because
#: trio runs the tasks of a scheduling round in either order. An SSE response waits so, before its
#: first write, for a request about to end; a cancel's POST, for the request it cancelled.
_PATIENCE = 2


def _wind_down(nursery: trio.Nursery, *, ended: bool, own: int) -> None:
    """End a POST's nursery once its response is written (``ended``) or given up.

    A complete response lets its disconnect watcher end by itself: an ASGI server reports the
    end of a complete response as a disconnect (hypercorn does so before the last ``send``
    returns), which costs less than cancelling the watcher. Only when the response was cut,
    or something more than the POST's ``own`` tasks (its watcher, its stream's task) is left in
    the nursery (a handler's), is it cancelled; and a server that never reports the end is
    waited for only ``_DISCONNECT_GRACE``.
    """
    left = len(nursery.child_tasks)
    if not ended or left > own:
        nursery.cancel_scope.cancel()
    elif left:
        nursery.cancel_scope.deadline = trio.current_time() + _DISCONNECT_GRACE


def _items(session_id: str, key: str, events: list[tuple[int, bytes]]) -> list[tuple[str, bytes]]:
    """Stored events as a stream writes them: with their event ids."""
    return [(event_id(session_id, key, seq), data) for seq, data in events]


def _orphaned(request_id: RequestId) -> bytes:
    """The end of a resumed stream whose request can no longer be answered."""
    error = ErrorObject.make(
        INTERNAL_ERROR,
        "The server handling this request stopped before it answered; retry the request",
    )
    return encode(ErrorResponse(request_id, error))


def _identity(principal: Principal | None) -> str | None:
    return principal.identity if principal is not None else None


def _waits(data: bytes) -> bool:
    """Whether a message must wait for the next GET: a server request (its handler waits for
    the answer), or the cancel of one."""
    parsed = parse(data)
    if isinstance(parsed, Request):
        return True
    return isinstance(parsed, Notification) and parsed.method == "notifications/cancelled"


def _error_code(data: bytes) -> int | None:
    """The error code of an encoded response of ours; None for a result. A result whose body
    does not even contain the key ``"error"`` is not parsed again."""
    if b'"error"' not in data:
        return None
    parsed = parse(data)
    return parsed.error.code if isinstance(parsed, ErrorResponse) else None


async def _ended(stream: EventStream, events: Listener) -> list[tuple[str, bytes]]:
    """Everything a request's stream carried, once the request has ended."""
    await stream.done.wait()
    return _drain_now(events)


#: Events waiting for an SSE connection are written together up to about this many bytes.
_WRITE_BYTES = 64 * 1024


def _drain_now(events: Listener) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    while True:
        try:
            item = events.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel):
            return out
        if item is None:
            return out
        out.append(item)


NOT_UNDER_TRIO = (
    "trio_mcp's HTTP app runs on Trio, but this ASGI server runs it on asyncio: "
    "start hypercorn with --worker-class trio"
)


def _under_trio() -> bool:
    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        return False
    return True
