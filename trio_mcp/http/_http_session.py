"""A Streamable HTTP session: its engine, its streams, and what routes the engine's messages
to them.

The app (``_app.py``) opens sessions, feeds them the messages of POSTs and hands their streams
to GETs; what a session needs of the app is named here (:class:`SessionHost`), so this module
does not import the app's.
"""

from __future__ import annotations

import enum
import math
import secrets
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import trio

from .._engine import Engine
from ..protocol._jsonrpc import Notification, Request, RequestId, parse
from ..protocol._sse import stream_id
from ..server._connection import ServerConnection
from ..server._registry import Registrations
from ..transports._transport import BaseSender
from ._asgi import Scope, too_many_in_flight
from ._event_store import StreamMeta
from ._fleet import Fleet
from ._options import HttpOptions
from ._sessions import RegisteredSession, SessionRegistry, TransportKind
from ._streams import NO_STORE, ByteBudget, EventStream, StreamLimits, StreamSink
from ._telemetry import observe_http


class HttpServable(Registrations, Protocol):
    """What the HTTP app needs of its server: the registrations a connection reads, and the set
    of live connections that the server's notifications go to (``Server`` is the one)."""

    @property
    def connections(self) -> set[ServerConnection]: ...

    async def run_notifications(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None: ...

    def running(self) -> AbstractAsyncContextManager[Any]: ...


class SessionKind(enum.Enum):
    """Whose an :class:`HttpSession`'s engine is, which decides how its requests are answered."""

    #: An ``Mcp-Session-Id`` session of the app, across POSTs (the handshake era).
    SESSION = "session"
    #: One stateless-mode POST's own, for its handshake-era message.
    STATELESS = "stateless"
    #: One POST's own, for its modern request (2026-07-28).
    MODERN = "modern"


class SessionHost(Protocol):
    """What an :class:`HttpSession` needs of the app that holds it (:class:`McpHttpApp`)."""

    @property
    def server(self) -> HttpServable: ...

    @property
    def options(self) -> HttpOptions: ...

    @property
    def registry(self) -> SessionRegistry: ...

    @property
    def fleet(self) -> Fleet[HttpSession] | None:
        """The other workers of its fleet (None: a single process)."""
        ...

    @property
    def sink(self) -> StreamSink:
        """Where the streams of its sessions hand their events."""
        ...

    @property
    def limits(self) -> StreamLimits: ...

    @property
    def budget(self) -> ByteBudget:
        """What every backlog and every connection's pending events hold together."""
        ...

    @property
    def handing_over(self) -> bool:
        """Whether its sessions outlive it as it stops (other workers adopt them)."""
        ...


class HttpSession(RegisteredSession, BaseSender):
    """One MCP session over HTTP: its engine, its streams, and its idle deadline.

    It is its engine's transport too (a :class:`Sender` that nothing reads: each POST feeds
    its message to the engine, ``Engine.feed``), which routes what the engine sends to the
    session's streams. One object, not two that hold each other. Its idle expiry, its caps and
    its drain are the registry's (:class:`RegisteredSession`), as for every transport: the
    registry watches its idle deadline and cancels its scope, around its engine's task.
    """

    __slots__ = (
        "_closing",
        "_key_prefix",
        "_stream_numbers",
        "app",
        "connection",
        "expires",
        "get_node",
        "kind",
        "observer",
        "on_event",
        "record_hearing",
        "record_until",
        "record_used",
        "replica",
        "request_streams",
        "standalone",
        "store",
    )

    over = TransportKind.STREAMABLE_HTTP
    engine: Engine

    def __init__(
        self,
        app: SessionHost,
        session_id: str,
        *,
        kind: SessionKind = SessionKind.SESSION,
        client: str = "",
        owner: str | None = None,
        replica: bool = False,
        scope: Scope | None = None,
    ) -> None:
        super().__init__(app.registry, session_id, client, owner)
        self.app = app
        self.kind = kind
        #: Whether it expires when idle: only a session of its own task (a POST's own engine
        #: ends with its POST).
        self.expires = kind is SessionKind.SESSION
        #: Whether it was built here from the record of a session opened on another worker.
        self.replica = replica
        # Stream keys of a replica name its node, and a random part: its streams never share
        # a name in a shared event store with those of the session's other copies, nor with
        # those of an earlier replica on this node.
        self._key_prefix = (
            f"{app.options.scale_out.node_id}-{secrets.token_hex(3)}-" if replica else ""
        )
        #: With a session store: the node whose copy holds the session's GET stream, as this
        #: copy last read it in the record (None: none, or this node).
        self.get_node: str | None = None
        #: With a session store: until when (trio's clock) the record this copy last read
        #: stands for its requests, without reading it again (``ScaleOut.record_cache``).
        self.record_until = -math.inf
        #: What the relay's ``hearing`` was when it was read: it stands only while unchanged.
        self.record_hearing: int | None = None
        #: Whether a request was served on that reading: it is read again before it lapses.
        self.record_used = False
        self.connection = ServerConnection(app.server)
        if kind is SessionKind.SESSION:
            self.connection.id = session_id  # what middleware calls the session
        if kind is SessionKind.STATELESS:
            self.connection.state.refuse_back_channel()
        self.connection.transport_name = "streamable-http"
        state = self.connection.state
        self.observer = observe_http(
            scope,
            "streamable-http",
            version=lambda: state.protocol_version,
            # Handshake era only: a POST's own connection has no Mcp-Session-Id.
            session_id=(lambda: session_id) if kind is SessionKind.SESSION else None,
        )
        self.engine = Engine(
            self,
            self.connection,
            drain_timeout=app.options.shutdown_grace,
            id_prefix=app.fleet.id_prefix if app.fleet is not None else "",
            observer=self.observer,
        )
        self.connection.session = self.engine
        # Only a session's streams can be resumed: nothing outlives a POST's own engine.
        self.store: StreamSink = app.sink if kind is SessionKind.SESSION else NO_STORE
        self.standalone = self._new_stream(self._key_prefix + "0", self.store)
        self.request_streams: dict[RequestId, EventStream] = {}
        self._stream_numbers = 0
        # Its ``used`` (the registry's): a request (or a GET stream) came after ``initialize``.
        self._closing = False
        #: A POST's own engine: called (once) when its request's first event that is not the
        #: response is on its stream, to start streaming SSE (see ``_session_post.serve_alone``).
        self.on_event: Callable[[], None] | None = None
        if kind is SessionKind.SESSION and app.fleet is not None:
            app.fleet.opened(self)

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
        fleet = self.app.fleet
        if (
            related is not None
            and self.standalone.listener is None
            and fleet is not None
            and fleet.forward_get(self, data)
        ):
            return
        if related is not None and self.standalone.listener is None and not _waits(data):
            # A request's progress and log messages that its own stream cannot carry (a JSON
            # response carries one message; or the stream is gone) go to the GET stream only
            # while one is open: queued, they would reach a later GET stale, or pile up for one
            # that never comes. A server request, which waits for its answer, and the cancel of
            # one are kept for the next GET.
            return
        self.standalone.push(data)

    def push_get(self, data: bytes) -> None:
        """A request's message for the GET stream that another worker's copy of the session
        relayed here: as for this copy's own, progress and logs only to a GET open now."""
        if self.standalone.listener is not None or _waits(data):
            self.standalone.push(data)

    def new_request_stream(self, request_id: RequestId) -> EventStream:
        limit = self.app.options.limits.max_requests_per_session
        if self.kind is SessionKind.SESSION and len(self.request_streams) >= limit:
            raise too_many_in_flight(limit, request_id)
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

    # -- lifetime ------------------------------------------------------------------------------

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
            or self.watch_ended  # nothing else cancels its scope
            or self.engine.is_closed
            or self.ended.is_set()
            or (self.expires and self.expiring)
        )

    async def run(self, *, task_status: trio.TaskStatus[Engine] = trio.TASK_STATUS_IGNORED) -> None:
        # Registered with the server so that notify_list_changed() reaches this client.
        self.app.server.connections.add(self.connection)
        if self.observer is not None:
            self.observer.session_started()
        try:
            # The engine runs in this task (it is started once its own nursery is open): no
            # nursery and task of the session's own around it, which every idle session held.
            with self.scope:
                self.touch()  # its deadline runs from its opening
                if self.expires:
                    self.registry.watch(self)
                await self.engine.run(pull=False, task_status=task_status)
        finally:
            if self.observer is not None:
                self.observer.session_ended()
            self._closing = True
            self.app.server.connections.discard(self.connection)
            self.close_streams()
            self.forget_events()
            self.registry.forget(self)
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
        """Nobody can resume a stream of an ended session: drop its events from the store.

        Unless the app hands its sessions over as it stops (a fleet with a session store):
        then the session lives on elsewhere, and its streams (finished by now) stay in the
        shared store, for a resume on another worker, until they expire."""
        if self.app.handing_over and self.kind is SessionKind.SESSION:
            return
        self.store.forget(self.standalone.stream_id)
        for number in range(1, self._stream_numbers + 1):
            self.store.forget(stream_id(self.id, f"{self._key_prefix}r{number}"))
        if not self.replica:
            self.store.end_session(self.id)  # a replica's end is not the session's


def _waits(data: bytes) -> bool:
    """Whether a message must wait for the next GET: a server request (its handler waits for
    the answer), or the cancel of one."""
    parsed = parse(data)
    if isinstance(parsed, Request):
        return True
    return isinstance(parsed, Notification) and parsed.method == "notifications/cancelled"
