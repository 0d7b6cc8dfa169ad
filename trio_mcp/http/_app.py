"""Streamable HTTP, handshake era: a plain ASGI application for ``hypercorn --worker-class trio``.

The ASGI lifespan opens the nursery that owns every session, so nothing escapes structured
concurrency: a session is a child task whose deadline moves forward whenever it goes idle, and
shutdown cancels them all with a grace period. A POST is fed to the session's engine
synchronously, after its stream is registered, so the engine's routing decisions and the HTTP
layer's (409 for an id in flight) can never disagree.
"""

from __future__ import annotations

import logging
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Iterable,
    Sequence,
)
from contextlib import asynccontextmanager
from typing import Any, Protocol

import trio

from .._exception_groups import single_error
from ..auth._gate import METADATA_MAX_AGE, HttpAuth
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
    encode,
    parse,
)
from ..protocol._sse import event_id, parse_event_id, stream_id
from ..protocol._versions import (
    HANDSHAKE_VERSIONS,
    KNOWN_VERSIONS,
    MODERN_VERSIONS,
)
from ..server._bus import BusError
from ..server._lifespan import LifespanFailed
from ..server._principal import Principal, VerifierUnavailable
from ..server._state_claims import StateClaimsUnavailable
from ..tasks import TaskStoreUnavailable
from ._admission import Admission
from ._asgi import (
    HttpError,
    Message,
    Receive,
    Scope,
    Send,
    accepts,
    header,
    header_table,
    is_json,
    mcp_headers,
)
from ._card import ServerCardEndpoint
from ._client_limits import ClientLimits
from ._event_store import EventStore, EventStoreUnavailable, MemoryEventStore, Replay
from ._fleet import Fleet
from ._health import Health
from ._heap import settle_heap
from ._http_session import HttpServable, HttpSession, SessionKind
from ._limit_store import LimitStore, LimitStoreUnavailable
from ._modern import is_modern, status_for
from ._modern_post import serve_modern
from ._node_tags import mint_session_id
from ._options import HttpOptions
from ._relay import RelayUnavailable
from ._session_post import PATIENCE, send_sse, serve_alone, serve_on_session, stream_sse
from ._session_store import SessionStoreUnavailable
from ._sessions import SessionRegistry, TransportKind, identity
from ._streams import (
    ByteBudget,
    EventStream,
    EventWriter,
    MemorySink,
    StreamLimits,
    StreamSink,
)
from ._websocket import WebSocketEndpoint

logger = logging.getLogger("trio_mcp.http")


class MountedEndpoints(Protocol):
    """Another transport's endpoints, served by the app beside its own (the HTTP+SSE
    transport's): the app hands it the requests for its paths; its sessions are the
    registry's, which ends them at shutdown."""

    def handles(self, route: str) -> bool: ...

    async def handle(self, scope: Scope, receive: Receive, send: Send, route: str) -> None: ...


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
            self.options.scale_out.event_store
            if self.options.scale_out.event_store is not None
            else MemoryEventStore()
        )
        options = self.options
        #: Every session of every transport: the caps, the idle expiry, the drain, and whether
        #: the app serves (its lifespan's nursery, draining, shutting down).
        self.registry = SessionRegistry(options)
        #: The Streamable HTTP sessions that are kept (their ``initialize`` succeeded), by id:
        #: the registry's table of them.
        self.sessions: dict[str, HttpSession] = self.registry.table(TransportKind.STREAMABLE_HTTP)
        #: The one task that writes every stream's events to the store, in order. Which
        #: sessions live is for the other workers of a shared store (a resume served there
        #: asks); the app's own store has no reader of it, so its heartbeat names none: telling
        #: it cost a step per session every ``heartbeat``, the one work idle sessions made.
        self.writer = EventWriter(
            self.store,
            max_queued=options.scale_out.max_store_queue_events,
            max_queued_bytes=options.scale_out.max_store_queue_bytes,
            timeout=options.scale_out.event_store_timeout,
            coalesce=options.scale_out.event_store_coalesce,
            live_sessions=self.sessions.keys
            if options.scale_out.event_store is not None
            else tuple,
        )
        #: Where the streams of sessions hand their events: the writer, or, for a store whose
        #: writes never wait (an in-process MemoryEventStore), the store itself, at once.
        self.sink: StreamSink = (
            MemorySink(self.store, self.writer)
            if type(self.store) is MemoryEventStore
            else self.writer
        )
        self.limits = StreamLimits(
            pending_events=options.limits.max_pending_events,
            pending_bytes=options.limits.max_pending_bytes,
            backlog_events=options.limits.max_backlog_events,
            backlog_bytes=options.limits.max_backlog_bytes,
        )
        #: What every backlog and every connection's pending events hold together.
        self.budget = ByteBudget(options.limits.max_buffered_bytes)
        path = self.options.path.rstrip("/") or "/"
        self._paths = {path, path + "/"} if path != "/" else {"/"}
        #: The (Accept, Content-Type) pairs a POST passed the media checks with.
        self._media_passed: set[tuple[str | None, str | None]] = set()
        #: The authorization gate, with ``Server(auth=...)``; None: every request is let in.
        self.gate = HttpAuth(server, server.auth) if server.auth is not None else None
        #: The checks every endpoint makes before anything of MCP runs.
        self.admission = Admission(self.options, self.gate, self.registry)
        #: The HTTP+SSE endpoints (``HttpOptions.legacy_sse``), which :meth:`Server.http_app`
        #: attaches; None: not served.
        self.sse: MountedEndpoints | None = None
        self.websockets = WebSocketEndpoint(self)
        #: The Server Card, at ``path`` + ``/server-card``.
        self.card = ServerCardEndpoint(self)
        #: The other workers of the fleet, with a store or a relay they share; None in a
        #: single process, which never imports the code that serves them.
        self.fleet: Fleet[HttpSession] | None = None
        if (
            options.scale_out.session_store is not None
            or options.scale_out.relay is not None
            or options.scale_out.event_store is not None
        ):
            from ..scaleout import SharedFleet

            self.fleet = SharedFleet(self)
        #: The limits of clients beyond one session (a fleet's, with a shared limit store),
        #: and the rate limits.
        self.client_limits = ClientLimits(options, self.registry)
        self.registry.on_forget = self.client_limits.session_ended
        #: What the readiness path asks of the stores, the bus and the relay; built when the
        #: app starts, from what it was given by then (``Server(bus=...)`` may come later).
        self.health = Health((), options.ready_timeout)
        #: Set as the app stops, when its fleet hands its sessions over to the other workers:
        #: their records and streams stay (see :meth:`HttpSession.forget_events`).
        self.handing_over = False

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
        fleet = self.fleet
        limits = self.client_limits
        self.health = Health(self._probed(), self.options.ready_timeout)
        try:
            async with (
                fleet.open() if fleet is not None else _nothing(),
                _started(limits.store) if limits.shared else _nothing(),
                self.server.running(),
                trio.open_nursery() as nursery,
            ):
                await nursery.start(self.writer.run)
                await nursery.start(self.server.run_notifications)
                if fleet is not None:
                    await fleet.start(nursery)
                if limits.shared:
                    await nursery.start(limits.run)
                started = True
                registry = self.registry
                registry.nursery = nursery
                registry.shutting_down = registry.draining = False
                if self.options.freeze_heap:
                    settle_heap()
                try:
                    yield self
                finally:
                    await self._stop(fleet)
                    registry.nursery = None
                    nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            error = single_error(group)
            unavailable = (
                BusError
                | RelayUnavailable
                | TaskStoreUnavailable
                | LimitStoreUnavailable
                | StateClaimsUnavailable
            )
            if not started and isinstance(error, unavailable):
                raise error from None
            raise
        finally:
            with trio.CancelScope(shield=True):
                await self.store.aclose()

    async def _stop(self, fleet: Fleet[HttpSession] | None) -> None:
        """End every session as the app stops. A fleet that keeps session records takes them
        over first (:meth:`Fleet.hand_over`): the sessions stay, for other workers to serve,
        and so do their streams, whose last events (a drain's errors, the end of a GET
        stream) reach the shared store before the writer stops."""
        registry = self.registry
        if fleet is not None and fleet.hands_over:
            self.handing_over = True
            await fleet.hand_over()
        await registry.shutdown(self.options.shutdown_grace)
        if self.handing_over:
            try:
                await self.writer.flush()
            except EventStoreUnavailable as error:
                logger.error("streams handed over may have lost their last events: %s", error)

    def _probed(self) -> list[object]:
        """What the readiness path asks: the stores, the bus and the relay the app and its
        server were given (those with a ``probe()``; in-process ones have none)."""
        scale_out = self.options.scale_out
        # A server may have no bus and no tasks (HttpServable does not promise them).
        tasks = getattr(self.server, "tasks", None)
        return [
            self.store,
            scale_out.session_store,
            scale_out.relay,
            scale_out.limit_store,
            getattr(self.server, "state_claims", None),
            getattr(self.server, "session_state_store", None),
            getattr(self.server, "bus", None),
            getattr(tasks, "store", None),
        ]

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        if not _under_trio():
            # Under asyncio (hypercorn's default worker) nothing of Trio can run: say so.
            await send({"type": "lifespan.startup.failed", "message": NOT_UNDER_TRIO})
            return
        if self.registry.nursery is not None:
            # Held already (serve_http holds it before it binds a port, or a host app does):
            # nothing to start, nothing to stop.
            await send({"type": "lifespan.startup.complete"})
            while (await receive())["type"] != "lifespan.shutdown":
                pass
            await send({"type": "lifespan.shutdown.complete"})
            return
        started = False
        try:
            async with self.running():
                started = True
                await send({"type": "lifespan.startup.complete"})
                while (await receive())["type"] != "lifespan.shutdown":
                    pass
        except Exception as error:
            if started:
                raise
            # Whatever fails before the startup completed fails the startup. An ASGI server
            # handed an exception instead goes on without the lifespan (hypercorn does, with
            # a warning), and then serves nothing but 503s, forever; a failed startup ends it.
            reason = start_refusal(error)
            if reason is None:
                logger.error("cannot start", exc_info=error)
                kind = type(single_error(error) or error).__name__
                reason = f"the app failed to start ({kind}; see its log)"
            else:
                logger.error("cannot start: %s", reason)
        else:
            await send({"type": "lifespan.shutdown.complete"})
            return
        # Outside the handler: what the ASGI server raises here chains to nothing of ours.
        await send({"type": "lifespan.startup.failed", "message": reason})

    # -- readiness and drain -------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Whether to send this app traffic: serving (its lifespan runs), and not draining."""
        registry = self.registry
        return registry.nursery is not None and not (registry.draining or registry.shutting_down)

    @property
    def draining(self) -> bool:
        return self.registry.draining

    def begin_drain(self) -> None:
        """Stop taking work, at once: readiness answers 503, and every new request is refused
        with 503, ``Retry-After`` and ``Connection: close`` before any of it runs (so a proxy
        may send it to another server), on every transport: a new HTTP+SSE session or socket
        too, and a new request on an open one. The requests in flight go on, and so do the
        client's answers and cancels they may wait for."""
        self.registry.draining = True

    async def wait_idle(self) -> None:
        """Return once no request is in flight on any transport (GET streams do not count)."""
        await self.registry.wait_idle()

    async def end_requests(self) -> None:
        """End every request still running, on every transport, with a JSON-RPC error that
        tells its client to retry (-32603, :data:`CUT_BY_SHUTDOWN`), on its own stream, as its
        JSON response, down its HTTP+SSE stream or its socket, never a silent end; then wait
        (a little) until those errors are written."""
        await self.registry.end_requests()

    async def drain(self, grace: float | None = None) -> None:
        """Shut down gracefully, as ``serve_http`` does on SIGTERM: :meth:`begin_drain`, let the
        requests in flight finish for ``grace`` seconds (default ``HttpOptions.drain_grace``),
        then :meth:`end_requests`. The ASGI server stops afterwards."""
        self.begin_drain()
        with trio.move_on_after(self.options.drain_grace if grace is None else grace):
            await self.wait_idle()
        await self.end_requests()

    async def _readiness(self, scope: Scope, send: Send) -> None:
        """``GET ready_path``: 200 while serving and every store it needs answers, 503
        otherwise; no MCP, no authorization (it tells nothing but that, never which store or
        why: that goes to the log), for a load balancer's or an orchestrator's probe."""
        if scope["method"] not in ("GET", "HEAD"):
            raise HttpError(405, "Method Not Allowed", headers=[(b"allow", b"GET, HEAD")])
        ready = self.ready
        stopping = self.registry.draining or self.registry.shutting_down
        status = "ready" if ready else "draining" if stopping else "starting"
        if ready and await self.health.trouble() is not None:
            ready, status = False, "unavailable"
        body = b'{"status":"%s"}' % status.encode()
        headers = [(b"cache-control", b"no-store")]
        if not ready:
            headers.append((b"retry-after", b"1"))
        await self.respond(
            scope, send, 200 if ready else 503, body if scope["method"] == "GET" else b"", headers
        )

    async def _liveness(self, scope: Scope, send: Send) -> None:
        """``GET live_path``: 200 for as long as the process answers (starting, draining or
        with its stores gone too), for an orchestrator deciding whether to restart it."""
        if scope["method"] not in ("GET", "HEAD"):
            raise HttpError(405, "Method Not Allowed", headers=[(b"allow", b"GET, HEAD")])
        body = b'{"status":"live"}' if scope["method"] == "GET" else b""
        await self.respond(scope, send, 200, body, [(b"cache-control", b"no-store")])

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

        def tracked(message: Message) -> Awaitable[None]:
            # A plain function handing back the server's own awaitable: no coroutine of ours
            # per message sent.
            nonlocal started
            started = started or message["type"] == "http.response.start"
            return send(message)

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
        if route == self.options.live_path:
            await self._liveness(scope, send)
            return
        if self.gate is not None and self._is_metadata(scope, route):
            self.admission.check_host_and_origin(scope)
            await self._metadata(scope, send, self.gate)
            return
        if self.sse is not None and self.sse.handles(route):
            await self.sse.handle(scope, receive, send, route)
            return
        if self.card.handles(route):
            await self.card(scope, send)
            return
        if route not in self._paths:
            mounted = scope.get("root_path", "")
            raise HttpError(404, "Not Found: the MCP endpoint is " + mounted + self.options.path)
        admission = self.admission
        method = scope["method"]
        if method == "OPTIONS" and await admission.answer_preflight(
            scope, send, b"GET, POST, DELETE, OPTIONS"
        ):
            return
        # Who it is, before anything of MCP is read; a POST's scopes are checked once its body
        # says what it asks for (and whether it is new work, which a drain refuses), anything
        # else needs the base scopes, and is new work.
        principal: Principal | None = None
        if self.gate is None:
            admission.admit_anonymous(scope)
        else:
            principal = await admission.admit(
                scope, authenticate=method != "OPTIONS", base_scopes=method != "POST"
            )
        if method != "POST":
            admission.check_serving()
        if self.fleet is not None and method in ("POST", "GET", "DELETE"):
            await self.fleet.before_request(scope, principal, method)
        if method == "POST":
            await self._post(scope, receive, send, principal)
        elif method == "GET":
            await self._get(scope, receive, send, principal)
        elif method == "DELETE":
            await self._delete(scope, send, principal)
        else:
            raise HttpError(405, "Method Not Allowed", headers=[(b"allow", b"GET, POST, DELETE")])

    # -- checks --------------------------------------------------------------------------------

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
        if method == "OPTIONS" and self.options.hosts.cors_origins is not None:
            await self.admission.preflight(scope, send, b"GET, HEAD, OPTIONS")
            return
        if method not in ("GET", "HEAD"):
            raise HttpError(405, "Method Not Allowed", headers=[(b"allow", b"GET, HEAD, OPTIONS")])
        body = gate.metadata()
        headers = [
            (b"cache-control", f"max-age={METADATA_MAX_AGE}".encode()),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *self.admission.cors_headers(scope),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body if method == "GET" else b""})

    def _session_for(self, scope: Scope, principal: Principal | None) -> HttpSession:
        session_id = header(scope, b"mcp-session-id")
        live = self._live_session(session_id, principal) if session_id else None
        return self._usable(session_id, live)

    @staticmethod
    def _usable(session_id: str | None, live: HttpSession | None) -> HttpSession:
        """The session a request names (``live``: :meth:`_live_session` of its id), or the
        400 or 404 that refuses the request."""
        if not session_id:
            raise HttpError(400, "Bad Request: Missing session ID")
        if live is None or live.closing:
            # Expiring (its deadline passed, its task has not yet ended) is expired: decided
            # here, with no checkpoint before the caller registers its request.
            raise HttpError(404, "Session not found")
        return live

    def _live_session(self, session_id: str, principal: Principal | None) -> HttpSession | None:
        """The session of that id, if the principal is the one that opened it: to anyone else
        it does not exist (the same 404, the same routing as an unknown id), so a session id
        seen elsewhere is worth nothing without its owner's token. (Only ids minted here are
        in the table, or adopted from a shared store: another node's id is found by neither.)"""
        session = self.sessions.get(session_id)
        if session is None or session.owner != identity(principal):
            return None
        return session

    def _check_version(self, scope: Scope) -> None:
        version = header(scope, b"mcp-protocol-version")
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
        await self.respond(scope, send, error.status, body, error.headers)

    # The responses the other endpoints (HTTP+SSE, a modern POST) share with this app are these
    # public methods.

    async def respond(
        self,
        scope: Scope,
        send: Send,
        status: int,
        body: bytes = b"",
        headers: Iterable[tuple[bytes, bytes]] = (),
        content_type: bytes = b"application/json",
    ) -> None:
        """A whole response, with the CORS headers of the request's origin."""
        all_headers = [*headers, *self.admission.cors_headers(scope)]
        if body:
            all_headers.append((b"content-type", content_type))
        all_headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": all_headers})
        await send({"type": "http.response.body", "body": body})

    async def read_body(self, receive: Receive) -> bytes:
        """A request's body, up to ``max_body_bytes`` (413 past it)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise HttpError(400, "Bad Request: the client disconnected")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.options.limits.max_body_bytes:
                raise HttpError(
                    413,
                    f"Payload Too Large: the limit is {self.options.limits.max_body_bytes} bytes",
                )
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    # -- POST ----------------------------------------------------------------------------------

    def _check_media_types(self, accept: str | None, content_type: str | None) -> None:
        """A POST's Accept (406 unless it admits what this app may answer with) and its
        Content-Type (415 unless JSON). A client sends the same two on every request: a pair
        that passed is remembered (a bounded number), so its next POSTs cost a lookup."""
        seen = (accept, content_type)
        if seen in self._media_passed:
            return
        needs = (
            ["application/json"]
            if self.options.json_response
            else ["application/json", "text/event-stream"]
        )
        if not all(accepts(accept, media_type) for media_type in needs):
            raise HttpError(
                406,
                "Not Acceptable: the client must accept " + " and ".join(needs),
            )
        if not is_json(content_type):
            raise HttpError(
                415, "Unsupported Media Type: the body must be application/json (one media type)"
            )
        if len(self._media_passed) >= _MEDIA_PASSED_MAX:
            self._media_passed.clear()
        self._media_passed.add(seen)

    async def _post(
        self, scope: Scope, receive: Receive, send: Send, principal: Principal | None
    ) -> None:
        headers = header_table(scope)
        self._check_media_types(headers.get(b"accept"), headers.get(b"content-type"))
        body = await self.read_body(receive)
        parsed = parse(body)
        if isinstance(parsed, Batch):
            raise HttpError(400, "Invalid Request: JSON-RPC body must be a single request object")
        if isinstance(parsed, Invalid):  # -32700 for a body that is not JSON, else -32600
            raise HttpError(400, parsed.error, request_id=parsed.id)
        if isinstance(parsed, Request):
            # A client's answer to one of our requests, or its cancel, still gets through a
            # drain: a request in flight may be waiting for it.
            self.admission.check_serving(request_id=parsed.id)
            self.admission.authorize(principal, [parsed], parsed.id)
        else:
            self.admission.authorize(
                principal, [parsed] if isinstance(parsed, Notification) else []
            )
        plain_initialize = (
            isinstance(parsed, Request)
            and parsed.method == "initialize"
            and not has_envelope(parsed.params)
        )
        session_id = headers.get(b"mcp-session-id")
        live = self._live_session(session_id, principal) if session_id else None
        if is_modern(headers.get(b"mcp-protocol-version"), live is not None, plain_initialize):
            await self._post_modern(scope, receive, send, parsed, principal)
            return
        if self.options.stateless:
            await self._post_stateless(scope, receive, send, parsed, principal)
            return
        if isinstance(parsed, Notification) and parsed.method == "initialize":
            # An initialize without an id asks for nothing: accepted, and no session is kept.
            await self.respond(scope, send, 202)
            return
        if isinstance(parsed, Request) and parsed.method == "initialize":
            if header(scope, b"mcp-session-id"):
                raise HttpError(
                    400,
                    "Invalid Request: Server already initialized",
                    request_id=parsed.id,
                )
            await self._initialize(scope, receive, send, parsed, principal)
            return
        session = self._usable(session_id, live)
        self._check_version(scope)
        if isinstance(parsed, Request):
            await self._request(scope, receive, send, session, parsed, principal)
            return
        # A notification, or the client's response to one of our requests.
        if self.fleet is not None and await self.fleet.send_elsewhere(session, parsed, body):
            await self.respond(scope, send, 202)
            return
        session.engine.feed(parsed, principal=principal)
        session.touch()
        if isinstance(parsed, Notification) and parsed.method == "notifications/cancelled":
            # The cancelled request's task is runnable now: it takes its step (its cancellation
            # reaches the handler, whose cleanup runs) before this POST writes its answer,
            # rather than after that write. The client learns nothing sooner either way.
            for _ in range(PATIENCE):
                await trio.lowlevel.checkpoint()
        await self.respond(scope, send, 202)

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
        registry = self.registry
        client = registry.client_of(scope, principal)
        registry.check(client, request_id=request.id)  # before anything is built for it
        session = HttpSession(
            self,
            mint_session_id(self.options.scale_out.node_id),
            client=client,
            owner=identity(principal),
            scope=scope,
        )
        registry.claim(session, request_id=request.id)
        try:
            await self.client_limits.open_session(session, request_id=request.id)
            assert registry.nursery is not None
            await registry.nursery.start(session.run)
            await serve_on_session(self, scope, receive, send, session, request, principal)
        finally:
            if session.id not in self.sessions:
                registry.forget(session)  # refused, or the POST failed: it holds no place

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
            if header(scope, b"mcp-protocol-version") in MODERN_VERSIONS:
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
        limits = self.client_limits
        await limits.check_rate(session.client, request.method, request.params, request.id)
        lease = await limits.start_session_request(session.id, request.id)
        try:
            await serve_on_session(self, scope, receive, send, session, request, principal)
        finally:
            if lease is not None:
                limits.drop(lease)

    async def _post_stateless(
        self, scope: Scope, receive: Receive, send: Send, message: Any, principal: Principal | None
    ) -> None:
        """No sessions: each POST gets its own engine, served inside this POST's task.

        Nothing can resume or cancel it from elsewhere, so its events are not stored, and the
        client going away cancels it.
        """
        session = HttpSession(self, "stateless", kind=SessionKind.STATELESS, scope=scope)
        if isinstance(message, Request) and message.method != "initialize":
            session.connection.state.skip_handshake()
        if not isinstance(message, Request):
            await self.respond(scope, send, 202)
            return
        await serve_alone(self, scope, receive, send, session, message, principal)

    def _post_modern(
        self, scope: Scope, receive: Receive, send: Send, message: Any, principal: Principal | None
    ) -> Awaitable[None]:
        """A modern request: checked against its headers, then served inside this POST's own
        task, so the client closing the stream is the cancel (2026-07-28).

        Checked here, synchronously; what answers it is handed back for the POST to await, so
        no coroutine of this method stands between the POST and the request on every step."""
        headers = header_table(scope)
        version = headers.get(b"mcp-protocol-version") or ""
        if version not in MODERN_VERSIONS:
            supported = {"supported": list(MODERN_VERSIONS), "requested": version}
            raise HttpError(
                400,
                ErrorObject.make(
                    UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", data=supported
                ),
                request_id=getattr(message, "id", None),
            )
        if b"mcp-session-id" in headers:
            raise HttpError(
                400,
                "Invalid Request: a modern request belongs to no session; drop Mcp-Session-Id",
                request_id=getattr(message, "id", None),
            )
        if not isinstance(message, Request):
            if isinstance(message, Notification):
                return self.respond(scope, send, 202)
            raise HttpError(400, "Invalid Request: a modern client sends no responses")
        try:
            check_request(message, mcp_headers(scope), self._param_headers)
        except ProtocolError as problem:
            raise HttpError(
                status_for(problem.code), problem.error, request_id=message.id
            ) from None
        limits = self.client_limits
        if limits.counts_here and not self.server.mounts:
            # The usual single process: counted here with no checkpoint, and served by the one
            # coroutine of serve_modern, which ends the count.
            client = self.registry.client_of(scope, principal)
            ended = limits.start_request_here(client, message.id)
            return serve_modern(self, scope, receive, send, message, principal, ended)
        return self._post_modern_counted(scope, receive, send, message, principal)

    async def _post_modern_counted(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        message: Request,
        principal: Principal | None,
    ) -> None:
        """A checked modern request, within its client's limits (its rate, its requests at
        once), served by :func:`serve_modern` (or by an engine of its own with mounts)."""
        limits = self.client_limits
        client = self.registry.client_of(scope, principal)
        await limits.check_rate(client, message.method, message.params, message.id)
        ended = await limits.start_request(client, message.id)
        try:
            if not self.server.mounts:
                await serve_modern(self, scope, receive, send, message, principal)
                return
            # Mounted servers and proxies read their connection's engine: this request gets one.
            session = HttpSession(self, "modern", kind=SessionKind.MODERN, scope=scope)
            # Registered while it runs, so that list changes reach its listen streams.
            self.server.connections.add(session.connection)
            try:
                await serve_alone(self, scope, receive, send, session, message, principal)
            finally:
                self.server.connections.discard(session.connection)
        finally:
            ended()

    def _param_headers(self, tool: str) -> ParamHeaders:
        """A tool's ``x-mcp-header`` declarations, for a modern POST's header check."""
        entry = self.server.tools.get(tool)
        return {} if entry is None else entry.param_headers()

    # -- SSE -----------------------------------------------------------------------------------

    async def sse_start(
        self,
        scope: Scope,
        send: Send,
        headers: Iterable[tuple[bytes, bytes]] = (),
        *,
        length: int | None = None,
    ) -> None:
        """The start of an SSE response (not buffered by a proxy), with the CORS headers;
        ``length``, the body's, when the response is known whole."""
        all_headers = [
            (b"content-type", b"text/event-stream"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
            *headers,
            *self.admission.cors_headers(scope),
        ]
        if length is not None:
            all_headers.append((b"content-length", str(length).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": all_headers})

    # -- GET and DELETE ------------------------------------------------------------------------

    def _has_session(self, scope: Scope, principal: Principal | None) -> bool:
        """Whether the request names a live session (of this principal): only then does a
        modern header stay on the session's (handshake-era) path."""
        session_id = header(scope, b"mcp-session-id")
        return session_id is not None and self._live_session(session_id, principal) is not None

    def _refuse_modern(self, scope: Scope, principal: Principal | None) -> None:
        """The modern era has one endpoint and POST only: GET and DELETE are 405 there."""
        version = header(scope, b"mcp-protocol-version")
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
        if not accepts(header(scope, b"accept"), "text/event-stream"):
            raise HttpError(406, "Not Acceptable: the client must accept text/event-stream")
        last_event = header(scope, b"last-event-id")
        parsed = parse_event_id(last_event) if last_event else None
        session_id = header(scope, b"mcp-session-id")
        fleet = self.fleet
        if (
            parsed is not None
            and session_id is not None
            and fleet is not None
            and fleet.resumes_elsewhere(session_id, parsed)
        ):
            # Not here: a session of another worker (or one that died), whose streams a shared
            # store may hold.
            self._check_version(scope)
            await fleet.resume_elsewhere(scope, receive, send, principal, session_id, parsed)
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
                replay = await self.replay(stream_id(session.id, key), after)
                if replay is None:
                    raise HttpError(400, "Bad Request: unknown Last-Event-ID")
                await send_sse(self, scope, send, _items(session.id, key, replay.events), ())
                session.store.forget(stream_id(session.id, key))  # delivered: nothing is left
                return
            if after > stream.seq:
                raise HttpError(400, "Bad Request: unknown Last-Event-ID")  # never issued
        assert stream is not None
        await self._attach(scope, receive, send, session, stream, after)

    async def serve_get(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        session: HttpSession,
        first: Sequence[tuple[str, bytes]] = (),
    ) -> None:
        """Serve a GET stream of ``session`` (held here), with ``first`` (events as id and
        data) written before its own: a fleet's worker adopting the GET stream that a stopped
        worker's copy of the session held, after what its client missed of that one."""
        self._check_version(scope)
        await self._attach(scope, receive, send, session, session.standalone, None, first)

    async def _attach(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        session: HttpSession,
        stream: EventStream,
        after: int | None,
        first: Sequence[tuple[str, bytes]] = (),
    ) -> None:
        session.used = True
        # Attached first, so that nothing pushed while the store is read is missed: what the
        # store gives up to this point is written first, then what came since.
        upto = stream.seq
        events = stream.attach(resumed=after is not None)
        session.busy()
        try:
            if stream is session.standalone and self.fleet is not None:
                await self.fleet.hold_get(session)
            missed: list[tuple[str, bytes]] = list(first)
            if after is not None and after < upto:
                replay = None
                if not session.store.is_lost(stream.stream_id):
                    replay = await self.replay(stream.stream_id, after)
                if replay is None:
                    # Live, but what the client missed is no longer kept: a silent gap would
                    # lose messages, so say so and let the client start over.
                    raise HttpError(
                        400, "Bad Request: the events after Last-Event-ID are no longer kept"
                    )
                kept = [(seq, data) for seq, data in replay.events if seq <= upto]
                missed += _items(session.id, stream.key, kept)
            await stream_sse(self, scope, receive, send, stream, events, None, first=missed)
        finally:
            stream.detach(events)
            session.idle()

    async def replay(self, stream: str, after: int) -> Replay | None:
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

    async def _delete(self, scope: Scope, send: Send, principal: Principal | None) -> None:
        self._refuse_modern(scope, principal)
        if self.options.stateless:
            raise HttpError(
                405, "Method Not Allowed: this server is stateless", headers=[(b"allow", b"POST")]
            )
        session = self._session_for(scope, principal)
        self.registry.forget(session)
        session.close()
        if self.fleet is not None:
            await self.fleet.ended(session)
        ended = getattr(self.server, "session_ended", None)  # its session state
        if ended is not None:
            await ended(session.id)
        await self.respond(scope, send, 200)


@asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    """What a single process opens at its start where a fleet opens its shared stores."""
    yield


@asynccontextmanager
async def _started(store: LimitStore) -> AsyncIterator[None]:
    """A shared limit store, open while the app serves (one that cannot be reached fails the
    start)."""
    await store.start()
    try:
        yield
    finally:
        with trio.CancelScope(shield=True):
            await store.aclose()


#: How many passing (Accept, Content-Type) pairs an app remembers: no client grows it past this.
_MEDIA_PASSED_MAX = 256


def _items(session_id: str, key: str, events: list[tuple[int, bytes]]) -> list[tuple[str, bytes]]:
    """Stored events as a stream writes them: with their event ids."""
    return [(event_id(session_id, key, seq), data) for seq, data in events]


#: The failures a start is expected to meet: a store, the bus, the relay, a verifier or the
#: server's lifespan that cannot start. Their messages name what and where (a URL without its
#: password), never a credential or a traceback.
_REFUSALS = (
    EventStoreUnavailable,
    SessionStoreUnavailable,
    BusError,
    RelayUnavailable,
    TaskStoreUnavailable,
    VerifierUnavailable,
    LifespanFailed,
)


def start_refusal(error: BaseException) -> str | None:
    """The one line a start that failed with ``error`` says, when it is one the start is
    expected to meet (see ``_REFUSALS``); None for anything else, a fault of ours, whose
    traceback belongs in the log."""
    only = single_error(error)
    if not isinstance(only, _REFUSALS):
        return None
    return " ".join(str(only).split()) or type(only).__name__


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
