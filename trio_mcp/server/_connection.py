"""``ServerConnection``: one client's view of a server, and the handlers of the standard methods.

It is the engine's :class:`Dispatcher` for the server role: it routes each request to a handler
synchronously (unknown methods and missing capabilities are refused before the request is
registered), holds the connection's lifecycle (:class:`ConnectionState`: era, negotiated version,
client capabilities, log level) and its subscriptions, refuses (under ``Server(auth=...)``) what
a request's principal may not do before its handler runs, and reports every request to the
instrumentation hook.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping
from typing import Any, TypeVar

import attrs
import trio

from .._engine import Engine, InFlight, Route
from .._exception_groups import single_error
from .._lazy_event import LazyEvent
from ..protocol._bearer import INSUFFICIENT_SCOPE, INVALID_TOKEN
from ..protocol._envelope import (
    PROTOCOL_VERSION_KEY,
    SERVER_INFO_KEY,
    SUBSCRIPTION_ID_KEY,
    CacheHints,
    discover_result,
    has_envelope,
    read_envelope,
    stamp_result,
)
from ..protocol._errors import ConnectionClosed, InvalidAnswer, ProtocolError, RequestCancelled
from ..protocol._jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NO_DATA,
    RESOURCE_NOT_FOUND,
    JSONObject,
    Notification,
    Request,
    RequestId,
)
from ..protocol._methods import CACHEABLE, MODERN_REMOVED, SERVER_REQUEST_CAPABILITY
from ..protocol._types import (
    ClientCapabilities,
    Completion,
    CompletionArgument,
    CompletionContext,
    Implementation,
    PromptReference,
    ResourceTemplateReference,
    from_wire,
    to_wire,
)
from ..protocol._versions import filter_initialize_result
from ._context import CapabilityMissing, Context, NestedRequestError
from ._input import (
    INPUT_METHODS,
    InputRequired,
    MalformedInput,
    ModernRequest,
    StartTask,
    gather,
    input_required_result,
)
from ._middleware import apply_middleware, new_connection_id
from ._principal import InvalidToken, Principal, needed_scopes
from ._registry import (
    CustomMethod,
    Listing,
    PromptEntry,
    Registrations,
    RequestRecord,
    ResourceEntry,
    TemplateEntry,
    ToolEntry,
    call_user,
    resource_contents,
)
from ._schema import ArgumentsError, ResultError
from ._session_state import SessionStateError
from ._state import ConnectionState
from ._visibility import Visibility, shown

logger = logging.getLogger("trio_mcp.server")

#: What a retry whose requestState will not open is refused with (-32602): tampered, expired,
#: issued for another request, or (single use) used already.
STATE_REFUSED = (
    "Invalid params: requestState is not valid here (altered, expired, already used, or issued "
    "for another request)"
)

#: The default of ``Server(max_listens=...)``: ``subscriptions/listen`` requests in flight on one
#: connection (a client needs one, or one per filter; the official Python SDK caps a whole
#: server at 1,024).
DEFAULT_MAX_LISTENS = 16

MethodHandler = Callable[["ServerConnection", InFlight], Awaitable[JSONObject]]

#: The lists a client may be told changed (all of them, on a resync).
LIST_KINDS = ("tools", "prompts", "resources")


class ToolError(Exception):
    """Raise in a tool to fail it with this message as an ``isError`` result the model sees.

    Not an :class:`MCPError`: users raise it and the library never does, nor does it ever
    reach a caller (it becomes the result), so ``except MCPError`` keeps meaning "trio_mcp
    failed" and never catches a tool's own verdict.
    """


class ResourceNotFound(ProtocolError):
    """Raise in a resource handler when what the URI names does not exist.

    The client gets the protocol's "Resource not found" error with the URI as its data: -32002
    in the handshake era, -32602 in the modern era (SEP-2164), as for a URI nothing matches.
    """

    def __init__(self, uri: str) -> None:
        super().__init__(RESOURCE_NOT_FOUND, "Resource not found", {"uri": uri})
        self.uri = uri


def _not_found(uri: str, modern: bool) -> ProtocolError:
    # 2026-07-28 (SEP-2164) retired -32002 for Invalid params; the handshake era keeps it.
    if modern:
        return ProtocolError(INVALID_PARAMS, "Resource not found", {"uri": uri})
    return ResourceNotFound(uri)


async def _call_handler(
    fn: Callable[..., Any], is_async: bool, kwargs: dict[str, Any], in_thread: bool
) -> Any:
    """Call a prompt or resource handler: a ``ToolError`` it raises is its own verdict on the
    request, so its message reaches the client as a -32602 error (an unexpected exception
    stays a generic -32603 that hides the details)."""
    try:
        return await call_user(fn, is_async, kwargs, in_thread=in_thread)
    except Exception as exc:
        only = single_error(exc)
        if isinstance(only, ToolError):
            raise _invalid(str(only) or "Invalid params") from None
        raise


E = TypeVar("E", ToolEntry, PromptEntry)


def _invalid(message: str, data: Any = NO_DATA) -> ProtocolError:
    return ProtocolError(INVALID_PARAMS, message, data)


def _require_str(params: JSONObject, key: str, what: str) -> str:
    value = params.get(key)
    if not isinstance(value, str):
        raise _invalid(f"Invalid params: {what} needs a string {key!r}")
    return value


def _named(
    conn: ServerConnection, entries: Mapping[str, E], params: JSONObject, method: str, kind: str
) -> tuple[str, E]:
    """The entry a ``tools/call`` or ``prompts/get`` names: -32602 for a missing or unknown name
    (a hidden one is unknown: see ``_visibility``)."""
    name = _require_str(params, "name", method)
    entry = entries.get(name)
    if entry is None or not conn.shows(entry):
        raise _invalid(f"Unknown {kind}: {name}")
    return name, entry


class ServerConnection:
    """The server side of one connection."""

    session: Engine

    def __init__(self, server: Registrations) -> None:
        self.server = server
        #: The lifecycle; it changes only through its own transitions.
        self.state = ConnectionState(server.protocol_version)
        self.subscriptions: set[str] = set()
        self._routes: dict[str, Route] = {}
        #: The route of ``tools/call`` when nothing wraps it (no middleware, mount or
        #: extension): a call of an async tool then has a route of its own (``_tool_routes``,
        #: built once per tool), whose task awaits the tool's coroutine itself.
        self._calls: Route | None = None
        self._tool_routes: dict[ToolEntry, Route] = {}
        #: Modern ``subscriptions/listen`` requests in flight, by request id.
        self.listeners: dict[RequestId, Listener] = {}
        #: Set once the first ``initialize`` is answered; None until one arrives.
        self._initialized: LazyEvent | None = None
        #: Who this whole connection acts for when its requests carry no principal of their
        #: own (stdio: the token of the environment). HTTP gives each request its own.
        self.principal: Principal | None = None
        #: Awaited after ``logging/setLevel``, ``resources/subscribe`` or ``unsubscribe`` changed
        #: the connection, before it is answered (the HTTP app writes the session's record).
        self.on_change: Callable[[], Awaitable[None]] | None = None
        self._id: str | None = None
        #: The wire it came over, for the instrumentation: ``memory``, ``stdio``,
        #: ``streamable-http``, ``sse`` or ``websocket``.
        self.transport_name = "memory"
        #: This connection's own enable/disable rules (``ctx.enable_components``), applied
        #: after the server's.
        self.visibility = Visibility()

    def share(self, other: ServerConnection) -> None:
        """Answer on ``other``'s engine: composition (``Server.mount``) serves a mounted server
        on views of the parent's connections.

        This connection (of another server) then shares ``other``'s engine, lifecycle state,
        principal, subscriptions, listeners and change hook: its handlers run as they would on
        a connection of their own (their server's registrations, authorization,
        instrumentation and ``Context``), and what they send reaches ``other``'s client. Its
        routes and its id stay its own.
        """
        self.session = other.session
        self.state = other.state
        self.principal = other.principal
        self.subscriptions = other.subscriptions
        self.listeners = other.listeners
        self.on_change = other.on_change
        self.transport_name = other.transport_name

    @property
    def id(self) -> str:
        """The connection's id for middleware: the HTTP session's, else one drawn on first use."""
        if self._id is None:
            self._id = new_connection_id()
        return self._id

    @id.setter
    def id(self, value: str) -> None:
        self._id = value

    # -- Dispatcher ----------------------------------------------------------------------------

    def route(self, request: Request, session: Engine | None = None) -> Route:
        method = request.method
        if has_envelope(request.params):
            return self._route_modern(request)
        self.state.check_handshake_request(method)
        route = self._routes.get(method)
        if route is None:
            extensions = self.server.extensions
            # An extension served in this era too routes its methods here, as in the modern.
            found: MethodHandler | None = (
                extensions.route(method, to_wire(self.state.client_capabilities), handshake=True)
                if extensions
                else None
            )
            handler = found if found is not None else self._handler(method)
            if method in CACHEABLE and self.server.cache_hints.explicit:
                handler = _with_cache_hints(handler)
            route = Route(self._instrument(handler), register=method != "initialize")
            # Built once per method and connection: the per-message path stays lean. What is
            # registered decides routes, so a registration change clears them.
            self._routes[method] = route
            if handler is _tools_call and not self.server.middleware_chain:
                self._calls = route
        if route is self._calls:
            route = self._tool_route(request, session, route)
        if self._initialized is None or self._initialized.is_set():
            if method == "initialize" and self.state.era is None and self._initialized is None:
                self._initialized = LazyEvent()
                return Route(_setting(route.handler, self._initialized), register=False)
            return route
        if method in _BEFORE_INITIALIZED:
            return route
        # Sent before initialize was answered (piped after it): served once it is.
        return attrs.evolve(route, handler=_after(route.handler, self._initialized))

    def _tool_route(self, request: Request, session: Engine | None, calls: Route) -> Route:
        """The route of a ``tools/call`` that nothing wraps: an async tool's own (its task
        awaits the tool's coroutine), else ``calls``, the method's (a sync tool, an unknown or
        hidden one, or a call something observes).

        The tool is looked up as ``_tools_call`` would, when the call is routed."""
        server = self.server
        params = request.params
        name = params.get("name") if params is not None else None
        if (
            type(name) is not str
            or server.on_request is not None
            or server.log_requests
            or session is None
            or session.observer is not None
        ):
            return calls
        entry = server.tools.get(name)
        if entry is None or not entry.is_async or not self.shows(entry):
            return calls
        route = self._tool_routes.get(entry)
        if route is None:
            call = _ToolCall(self, entry)
            route = Route(call.start, returned=call.returned, failed=call.failed)
            self._tool_routes[entry] = route
        return route

    @property
    def server_info_wire(self) -> JSONObject:
        return self.server.info_wire

    @property
    def cache_hints(self) -> CacheHints:
        """The server's cache hints, made ``private`` under authorization (the ttl stays).

        A result then depends on who asks (lists are filtered per principal, a resource may
        read differently per caller), and caches must never be shared across authorization
        contexts: a shared cache would hand one principal's result to another. So even a
        server configured ``cache_scope="public"`` says ``private`` once ``Server(auth=...)``
        is set.
        """
        hints = self.server.cache_hints
        # Lists shaped by this connection's own rules are its alone, as a principal's are.
        private = self.server.auth is not None or bool(self.visibility)
        if private and hints.cache_scope != "private":
            return attrs.evolve(hints, cache_scope="private")
        return hints

    def shows(self, entry: ToolEntry | PromptEntry | ResourceEntry | TemplateEntry) -> bool:
        """Whether ``entry`` is visible here: the server's rules, then this connection's."""
        return shown(entry, self.server.visibility, self.visibility)

    def _listen_ended(self, record: InFlight) -> JSONObject:
        """A listen ends, when the client cancels it, with a final result naming it."""
        return {
            "resultType": "complete",
            "_meta": {SUBSCRIPTION_ID_KEY: record.id, SERVER_INFO_KEY: self.server_info_wire},
        }

    def _handler(self, method: str) -> MethodHandler:
        handler = _HANDLERS.get(method)
        if handler is None:
            custom = self.server.custom_methods.get(method)
            if custom is None:
                raise ProtocolError(METHOD_NOT_FOUND, "Method not found", method)
            return _custom_handler(custom)
        capability = SERVER_REQUEST_CAPABILITY.get(method)
        if capability is not None and not self._offers(capability):
            raise ProtocolError(METHOD_NOT_FOUND, "Method not found", method)
        if self.server.mounts:  # composition: mounted servers and proxies answer here too
            handler = self.server.mounts.handler(method, handler, self.server)
        return handler

    def _route_modern(self, request: Request) -> Route:
        """A request carrying its own version and capabilities (2026-07-28)."""
        self.state.check_modern_request()
        envelope = read_envelope(request.params)
        if request.method in MODERN_REMOVED:
            raise ProtocolError(METHOD_NOT_FOUND, "Method not found", request.method)
        if request.method == "subscriptions/listen":
            listen = self.server.mounts.handler(request.method, _listen, self.server)
            return Route(self._instrument(listen), on_cancel=self._listen_ended)
        extensions, caps = self.server.extensions, envelope.client_capabilities
        # An extension's methods are routed here, as the core's are (and refused here too).
        handler: MethodHandler | None = (
            extensions.route(request.method, caps) if extensions else None
        )
        if handler is None:
            handler = self._handler(request.method)
        elif self.server.mounts and extensions.forwards(request.method):
            # A handle this server does not know (a task id) may be a mount's.
            handler = self.server.mounts.by_handle(handler)
        params = request.params or {}
        incoming = ModernRequest(envelope)
        sealer, audience = self.server.state_sealer, self.server.state_audience
        takes_input = request.method in INPUT_METHODS
        tool = params.get("name") if request.method == "tools/call" else None
        entry = self.server.tools.get(tool) if isinstance(tool, str) else None
        if entry is not None and not self.shows(entry):
            entry = None  # hidden: the call is answered as for an unknown tool
        # An extension may answer the call its own way (a task, say): chosen here, run past
        # authorization like the call itself.
        hook = extensions.tool_call(entry, caps) if entry is not None and extensions else None
        # Single-use states (``@server.tool(single_use_state=...)``, else the server's).
        single_use = (
            entry.single_use_state
            if entry is not None and entry.single_use_state is not None
            else self.server.single_use_state
        )
        claims = self.server.state_claims
        # A failed nested request is never relayed as this request's answer (what
        # _internal_on_nested_error does for the other routes), checked below where the
        # handler's error is caught; _tools_call already makes it the tool's isError.
        guard_nested = hook is not None or handler is not _tools_call

        async def modern(conn: ServerConnection, record: InFlight) -> JSONObject:
            record.envelope = incoming
            # A state is sealed for the principal it served (invariant 10): opened here, where
            # the request's principal is known (the route is chosen before it is).
            subject = subject_of(conn, record)
            if takes_input:
                try:
                    gathered = gather(
                        incoming, request.method, params, sealer, subject=subject, audience=audience
                    )
                except MalformedInput as exc:
                    raise _invalid(f"Invalid params: {exc}") from None
                if not gathered or (
                    incoming.state_digest is not None
                    and single_use
                    and not await claims.claim(incoming.state_digest, incoming.state_life)
                ):
                    # A state used already is refused as a tampered one is: the client learns
                    # nothing of which it was.
                    raise ProtocolError(INVALID_PARAMS, STATE_REFUSED)
            try:
                if hook is not None:
                    result = await hook(conn, record, subject, _tools_call)
                else:
                    result = await handler(conn, record)
            except Exception as exc:
                # Only an InputRequired is kept: any other error, held in a local of this
                # frame (which its traceback holds), would be left in a reference cycle.
                asked = _input_asked(exc)
                if asked is None:
                    if guard_nested:
                        if isinstance(single_error(exc), NestedRequestError):
                            raise _nested_failed(record) from exc
                        verdict = _tool_error_verdict(exc)
                        if verdict is not None:
                            raise verdict from None
                    raise
                result = input_required_result(
                    incoming,
                    asked,
                    record.method,
                    params,
                    sealer,
                    subject=subject,
                    audience=audience,
                )
            # The first era-distinctive request that succeeds decides the connection's era.
            conn.state.lock_modern()
            return stamp_result(
                result,
                record.method,
                modern=True,
                hints=conn.cache_hints,
                server_info=conn.server_info_wire,
            )

        server = self.server
        if server.on_request is None and server.auth is None and not server.middleware_chain:
            # Nothing observes, authorizes or wraps it (and the route is this request's
            # alone): the request's task awaits the handler's own coroutine.
            return Route(functools.partial(modern, self))
        return Route(self._instrument(modern, incoming, guarded=True))

    def on_notification(
        self, notification: Notification, session: Engine, principal: Any = None
    ) -> None:
        custom = self.server.custom_methods.get(notification.method)
        if custom is None:
            return
        params = notification.params or {}
        if self.server.auth is not None:
            # Checked as a request would be, by its own principal (HTTP) or the connection's;
            # a notification has no answer to refuse it with, so it is dropped.
            who = principal if principal is not None else self.principal
            refusal = self._refusal(notification.method, params, who)
            if refusal is not None:
                logger.warning("dropped %s: %s", notification.method, refusal.message)
                return

        async def job() -> None:
            await call_user(custom.fn, custom.is_async, {}, args=(params,))

        session.run_ordered(job)

    def _instrument(
        self,
        handler: MethodHandler,
        envelope: ModernRequest | None = None,
        *,
        guarded: bool = False,
    ) -> Callable[[InFlight], Awaitable[JSONObject]]:
        # _tools_call makes a failed nested request the tool's isError; a ``guarded`` handler
        # refuses it itself.
        if not guarded and handler is not _tools_call:
            handler = _internal_on_nested_error(handler)
        if self.server.middleware_chain:
            # Authorized before the chain (as without it), and again on params it changed.
            recheck = _authorize_again if self.server.auth is not None else None
            handler = apply_middleware(
                self.server.middleware_chain, handler, ToolError, envelope, recheck
            )

        def run(record: InFlight) -> Awaitable[JSONObject]:
            """The one place a request's method handler is called, after its authorization.

            With nothing to observe it hands back the handler's own coroutine, so the request's
            task awaits that directly: no frame of its own, held for as long as the request
            runs. A refusal is raised right here, in the request's task and scope all the same.
            """
            if self.server.on_request is None and not self.server.log_requests:
                if self.server.auth is not None:
                    self.authorize(record)
                return handler(self, record)
            return self._observed(handler, record)

        return run

    async def handle(self, record: InFlight) -> JSONObject:
        """Answer ``record``, a request another connection received and hands on (a parent
        server's, through ``Server.mount``), in the caller's task and cancel scope.

        It is answered as this connection answers a request of its own: its method's handler
        (an unknown method or an absent capability is refused, -32601), run through the
        server's authorization, middleware and ``on_request`` hook. Nothing is registered with
        the engine: the request already is, as the caller's.
        """
        return await self._instrument(self._routed(record))(record)

    def _routed(self, record: InFlight) -> MethodHandler:
        """The handler of a request handed on by a parent: for a modern one, an extension's
        method, or the extension's way with a ``tools/call`` (a task), as a request of this
        server's own would be routed; else the method's own handler."""
        method = record.method
        extensions = self.server.extensions
        envelope = record.envelope
        if not extensions or not isinstance(envelope, ModernRequest):
            return self._handler(method)
        caps = envelope.envelope.client_capabilities
        handler: MethodHandler | None = extensions.route(method, caps)
        if handler is not None:
            if self.server.mounts and extensions.forwards(method):
                forwarding: MethodHandler = self.server.mounts.by_handle(handler)
                return forwarding
            return handler
        name = record.params.get("name") if method == "tools/call" else None
        entry = self.server.tools.get(name) if isinstance(name, str) else None
        hook = extensions.tool_call(entry, caps) if entry is not None else None
        if hook is None:
            return self._handler(method)
        chosen: Callable[[ServerConnection, InFlight, str, MethodHandler], Awaitable[JSONObject]]
        chosen = hook

        async def as_extension(conn: ServerConnection, record: InFlight) -> JSONObject:
            return await chosen(conn, record, subject_of(conn, record), _tools_call)

        return as_extension

    async def _observed(self, handler: MethodHandler, record: InFlight) -> JSONObject:
        """A request's handler run with the instrumentation hook told of it."""
        start = time.perf_counter()
        error_code: int | None = None
        tool_error = False
        cancelled_by_handler: RequestCancelled | None = None
        try:
            if self.server.auth is not None:
                self.authorize(record)
            result = await handler(self, record)
            tool_error = record.method == "tools/call" and bool(result.get("isError"))
            return result
        except ProtocolError as exc:
            error_code = exc.code
            raise
        except RequestCancelled as exc:
            cancelled_by_handler = exc
            raise
        except Exception as exc:
            only = single_error(exc)
            if isinstance(only, ProtocolError):
                error_code = only.code
            elif isinstance(only, RequestCancelled):
                cancelled_by_handler = only
            else:
                error_code = INTERNAL_ERROR
            raise
        finally:
            params = record.params
            name = params.get("name", params.get("uri"))
            principal = record.principal
            meta = params.get("_meta")
            version = meta.get(PROTOCOL_VERSION_KEY) if isinstance(meta, dict) else None
            cancelled = record.cancel_requested or cancelled_by_handler is not None
            self.server.record(
                RequestRecord(
                    method=record.method,
                    request_id=record.id,
                    name=name if isinstance(name, str) else None,
                    duration=time.perf_counter() - start,
                    cancelled=cancelled,
                    cancel_reason=record.cancel_reason
                    if record.cancel_requested
                    else (cancelled_by_handler.reason if cancelled_by_handler else None),
                    error_code=None if record.cancel_requested else error_code,
                    tool_error=tool_error,
                    cancelled_by=(record.cancelled_by or "local") if cancelled else None,
                    protocol_version=version
                    if isinstance(version, str)
                    else self.state.protocol_version,
                    session_id=self.id,
                    transport=self.transport_name,
                    subject=(principal.subject or principal.client_id)
                    if isinstance(principal, Principal)
                    else None,
                )
            )

    def authorize(self, record: InFlight) -> None:
        """Refuse a request its principal may not make, before its handler runs.

        The one check of every route, for transports that cannot answer 403 (stdio, memory)
        and as a second line behind the HTTP app's gate. A request needs the server's
        ``Auth.required_scopes`` plus the scopes of the entry it reaches (:func:`needed_scopes`:
        the tool called, the prompt got, the resource read or subscribed to, what a completion
        is for), counting implied scopes. A refusal is a JSON-RPC error -32600 (Invalid
        Request), since the request is well formed but not one this caller may make; its
        ``data`` mirrors an HTTP challenge (RFC 6750 section 3):

        - no principal at all (a connection with no token): "Unauthorized: ..."; only
          ``initialize``, ``ping`` and ``server/discover`` are answered without one;
        - an expired token: "Unauthorized: the access token expired", ``error``
          ``invalid_token``;
        - scopes lacking: "Forbidden: ..." naming the missing scopes, ``error``
          ``insufficient_scope`` and ``scope`` every scope the request needs (one complete
          set, so a client steps up once).
        """
        refusal = self._refusal(record.method, record.params, _principal(self, record))
        if refusal is not None:
            raise refusal

    def _refusal(
        self, method: str, params: Mapping[str, Any] | None, principal: Principal | None
    ) -> ProtocolError | None:
        """Why ``principal`` may not send ``method`` (see :meth:`authorize`), or None."""
        if method in _OPEN_METHODS:
            return None
        auth = self.server.auth
        assert auth is not None
        needed = auth.required_scopes | needed_scopes(self.server, method, params)
        data: JSONObject = {"scope": " ".join(sorted(needed))} if needed else {}
        if principal is None:
            return ProtocolError(
                INVALID_REQUEST,
                "Unauthorized: this server requires an access token, and the request has none",
                data or NO_DATA,
            )
        try:
            auth.accept(principal)
        except InvalidToken as exc:
            return ProtocolError(
                INVALID_REQUEST,
                f"Unauthorized: {exc.description}",
                {"error": INVALID_TOKEN, **data},
            )
        missing = auth.missing(principal, needed)
        if missing:
            return ProtocolError(
                INVALID_REQUEST,
                f"Forbidden: {method} needs the scope{'s' if len(missing) > 1 else ''} "
                f"{' '.join(sorted(missing))}, which the access token does not grant",
                {"error": INSUFFICIENT_SCOPE, **data},
            )
        return None

    # -- state ---------------------------------------------------------------------------------

    def _offers(self, capability: str) -> bool:
        """Whether :meth:`capabilities` holds ``capability``; decided without building them
        when the server's own registrations offer it (mounts only ever add to those): a
        modern request, whose connection is new, asks on every request."""
        own = _OWN_CAPABILITY.get(capability)
        return (own is not None and own(self.server)) or capability in self.capabilities()

    def capabilities(self) -> JSONObject:
        """Server capabilities, derived from what is registered."""
        server = self.server
        caps: JSONObject = {"logging": {}}
        if server.completion_handler is not None:
            caps["completions"] = {}
        if server.prompts:
            caps["prompts"] = {"listChanged": True}
        if server.resources or server.templates:
            caps["resources"] = {"subscribe": True, "listChanged": True}
        if server.tools:
            caps["tools"] = {"listChanged": True}
        if server.mounts:
            server.mounts.capabilities(self, caps)
        return caps

    def release(self) -> None:
        """Forget the routes built for this connection (each holds it), once nothing of it
        runs: see ``HttpSession.release``."""
        self._forget_routes()

    def _forget_routes(self) -> None:
        self._routes.clear()
        self._calls = None
        self._tool_routes.clear()

    async def notify(
        self,
        method: str,
        params: JSONObject | None = None,
        *,
        related_request_id: RequestId | None = None,
    ) -> None:
        """Send a notification to the client (queued in order: it never waits for the client);
        ``ConnectionClosed`` once the connection is gone. Everything a handler sends goes
        through here or :meth:`notify_nowait`: a connection with no engine (one modern HTTP
        POST) routes it itself."""
        await self.session.notify(method, params, related_request_id=related_request_id)

    def notify_nowait(
        self,
        method: str,
        params: JSONObject | None = None,
        *,
        related_request_id: RequestId | None = None,
    ) -> None:
        """:meth:`notify` from code that cannot wait (the server's notifications): nothing is
        sent once the connection is gone."""
        if self.session.is_closed:
            return
        try:
            self.session.notify_nowait(method, params, related_request_id=related_request_id)
        except ConnectionClosed:
            pass

    def send_list_changed(self, kind: str) -> None:
        """To a handshake-era client told of the capability, and to the modern listeners that
        asked for this kind (tagged with their subscription, on their listen stream)."""
        self._forget_routes()
        if self.state.initialized and kind in self.state.announced:
            self.notify_nowait(f"notifications/{kind}/list_changed")
        for listener in list(self.listeners.values()):
            if kind in listener.kinds:
                self.notify_nowait(
                    f"notifications/{kind}/list_changed",
                    {"_meta": {SUBSCRIPTION_ID_KEY: listener.id}},
                    related_request_id=listener.id,
                )

    def send_resource_updated(self, uri: str) -> None:
        if self.state.initialized and uri in self.subscriptions:
            self.notify_nowait("notifications/resources/updated", {"uri": uri})
        for listener in list(self.listeners.values()):
            if uri in listener.uris:
                self.notify_nowait(
                    "notifications/resources/updated",
                    {"uri": uri, "_meta": {SUBSCRIPTION_ID_KEY: listener.id}},
                    related_request_id=listener.id,
                )

    def send_resync(self) -> None:
        """Notifications were missed (the bus says so): every list changed, and every
        subscribed resource was updated, so the client lists and reads them again."""
        for kind in LIST_KINDS:
            self.send_list_changed(kind)
        uris = set(self.subscriptions) if self.state.initialized else set()
        for listener in self.listeners.values():
            uris.update(listener.uris)
        for uri in sorted(uris):
            self.send_resource_updated(uri)

    def send_watched(self, extension: str, item: str, method: str, params: JSONObject) -> None:
        """A notification about ``item`` to the listeners watching it through ``extension``
        (what its ``watch`` honoured), each stamped with its subscription id."""
        for listener in list(self.listeners.values()):
            if item in listener.watching.get(extension, ()):
                stamped = {**params, "_meta": {SUBSCRIPTION_ID_KEY: listener.id}}
                self.notify_nowait(method, stamped, related_request_id=listener.id)

    def context(self, record: InFlight) -> Context:
        return Context(record, self)

    @property
    def lifespan_state(self) -> Any:
        return self.server.lifespan_state


#: For each capability :meth:`ServerConnection.capabilities` derives from the server's own
#: registrations, whether they offer it (the same rule, without building the whole).
_OWN_CAPABILITY: dict[str, Callable[[Registrations], bool]] = {
    "logging": lambda server: True,
    "completions": lambda server: server.completion_handler is not None,
    "prompts": lambda server: bool(server.prompts),
    "resources": lambda server: bool(server.resources or server.templates),
    "tools": lambda server: bool(server.tools),
}


def admit_alone(
    conn: ServerConnection, request: Request, principal: Principal | None = None
) -> tuple[Route, InFlight]:
    """Route one request of a connection that carries it alone and has no engine: its route
    and its record, for the engine's ``run_alone`` to run in the caller's task (a modern
    Streamable HTTP POST, whose one object is its connection, ``conn``); or the
    ``ProtocolError`` it is answered with (an unknown method, a missing capability, a bad
    envelope) before anything of it runs.

    The engine's admission of a request, less what only a connection of many requests needs:
    an id cannot be in flight twice where there is one request. ``principal`` is who the
    transport vouches sent it (``ctx.auth``)."""
    if request.method.startswith("notifications/"):
        # A notification method sent with an id: answered -32601, its handler never runs.
        raise ProtocolError(METHOD_NOT_FOUND, "Method not found", request.method)
    return conn.route(request), InFlight(request, None, principal=principal)


# -- handlers of the standard methods ---------------------------------------------------------

#: Answered at once even while ``initialize`` is being answered.
_BEFORE_INITIALIZED = frozenset({"ping", "initialize", "server/discover"})
#: Answered without authorization: the handshake, liveness, and what a client learns about a
#: server before it has a token (nothing a registered entry does).
_OPEN_METHODS = frozenset({"initialize", "ping", "server/discover"})


def _setting(
    handler: Callable[[InFlight], Awaitable[JSONObject]], done: LazyEvent
) -> Callable[[InFlight], Awaitable[JSONObject]]:
    """``initialize``: set ``done`` as it ends. The engine queues the answer before any other
    task runs (no checkpoint between the handler's return and the queueing), so the requests
    held until ``done`` are answered after it."""

    async def run(record: InFlight) -> JSONObject:
        try:
            return await handler(record)
        finally:
            done.set()

    return run


def _after(
    handler: Callable[[InFlight], Awaitable[JSONObject]], done: LazyEvent
) -> Callable[[InFlight], Awaitable[JSONObject]]:
    async def run(record: InFlight) -> JSONObject:
        await done.wait()
        return await handler(record)

    return run


def _principal(conn: ServerConnection, record: InFlight) -> Principal | None:
    """Who a request acts for: its own principal (HTTP), else the connection's (stdio)."""
    principal: Principal | None = record.principal
    return principal if principal is not None else conn.principal


def subject_of(conn: ServerConnection, record: InFlight) -> str:
    """What a requestState is bound to: the principal's identity (empty without one)."""
    principal = _principal(conn, record)
    return principal.identity if principal is not None else ""


def _authorize_again(conn: ServerConnection, record: InFlight) -> None:
    conn.authorize(record)


def _input_asked(exc: BaseException) -> InputRequired | None:
    """The request for input that ``exc`` ends a modern request with, if it is one."""
    only = single_error(exc)
    return only if isinstance(only, InputRequired) else None


def _internal_on_nested_error(handler: MethodHandler) -> MethodHandler:
    """The verdicts of a handler other than a tool's, as its request's answer.

    A ``ToolError`` is the handler's own verdict on the request, whatever it handles (a prompt,
    a resource, a completion, a custom method): its message reaches the client as -32602. A
    ``ProtocolError`` keeps its code, message and data (the engine answers with it). The
    client's error to a nested request is never relayed as the answer to this one: -32603,
    as anything else unexpected is.
    """

    async def guarded(conn: ServerConnection, record: InFlight) -> JSONObject:
        try:
            return await handler(conn, record)
        except Exception as exc:
            # No local of this frame holds the error: its traceback holds this frame, and the
            # cycle would outlive the request (an error is an ordinary answer, say -32602).
            if isinstance(single_error(exc), NestedRequestError):
                raise _nested_failed(record) from exc
            verdict = _tool_error_verdict(exc)
            if verdict is not None:
                raise verdict from None
            raise

    return guarded


def _tool_error_verdict(exc: BaseException) -> ProtocolError | None:
    """The -32602 a ``ToolError`` raised outside a tool answers with (None: not one)."""
    only = single_error(exc)
    if isinstance(only, ToolError):
        return _invalid(str(only) or "Invalid params")
    return None


def _nested_failed(record: InFlight) -> RuntimeError:
    return RuntimeError(f"a nested request made by {record.method} failed")


async def _initialize(conn: ServerConnection, record: InFlight) -> JSONObject:
    params = record.params
    conn.state.check_initialize()
    requested = params.get("protocolVersion")
    capabilities = params.get("capabilities")
    client_info = params.get("clientInfo")
    if not isinstance(requested, str):
        raise _invalid("Invalid params: initialize needs a string 'protocolVersion'")
    if not isinstance(capabilities, dict):
        raise _invalid("Invalid params: initialize needs a 'capabilities' object")
    if (
        not isinstance(client_info, dict)
        or not isinstance(client_info.get("name"), str)
        or not isinstance(client_info.get("version"), str)
    ):
        raise _invalid("Invalid params: initialize needs 'clientInfo' with a name and a version")
    try:
        info = from_wire(client_info, Implementation)
        caps = from_wire(capabilities, ClientCapabilities)
    except ValueError as exc:
        raise _invalid(f"Invalid params: {exc}") from None
    # Decided with no checkpoint since the check above: a second initialize cannot slip in.
    announced = conn.capabilities()
    extensions = conn.server.extensions
    if extensions and (entries := extensions.capabilities(conn.server, handshake=True)):
        announced["extensions"] = entries
    version = conn.state.initialize(requested, info, caps, announced)
    result: JSONObject = {
        "protocolVersion": version,
        "capabilities": announced,
        "serverInfo": to_wire(conn.server.info),
    }
    if conn.server.instructions is not None:
        result["instructions"] = conn.server.instructions
    await trio.lowlevel.checkpoint()
    return filter_initialize_result(result, version)


async def _discover(conn: ServerConnection, record: InFlight) -> JSONObject:
    """Answered in both eras, with no handshake; it never initializes the connection."""
    await trio.lowlevel.checkpoint()
    capabilities = conn.capabilities()
    if conn.server.extensions and (extensions := conn.server.extensions.capabilities(conn.server)):
        capabilities["extensions"] = extensions
    return discover_result(
        capabilities=capabilities,
        server_info=conn.server_info_wire,
        instructions=conn.server.instructions,
        hints=conn.cache_hints,
        listen=True,
    )


@attrs.frozen(eq=False)
class Listener:
    """One ``subscriptions/listen``: what it asked for, as the server honours it."""

    id: RequestId
    kinds: frozenset[str]
    uris: frozenset[str]
    #: What it watches of each extension's, by the extension's name (its ids: task ids, say).
    watching: Mapping[str, frozenset[str]] = attrs.field(factory=dict)


async def _listen(conn: ServerConnection, record: InFlight) -> JSONObject:
    """Acknowledge first, with the filter as honoured; then deliver until cancelled."""
    wanted = record.params.get("notifications")
    if not isinstance(wanted, dict):
        raise _invalid("Invalid params: subscriptions/listen needs a 'notifications' object")
    caps = conn.capabilities()
    honoured: JSONObject = {}
    kinds = set()
    for flag, kind in (
        ("toolsListChanged", "tools"),
        ("promptsListChanged", "prompts"),
        ("resourcesListChanged", "resources"),
    ):
        if wanted.get(flag) is True and kind in caps:
            honoured[flag] = True
            kinds.add(kind)
    uris = wanted.get("resourceSubscriptions")
    subscribed: frozenset[str] = frozenset()
    if isinstance(uris, list) and "resources" in caps:
        subscribed = frozenset(u for u in uris if isinstance(u, str))
        auth = conn.server.auth
        if auth is not None:
            # As resources/subscribe needs the resource's scopes, so does hearing of its
            # updates: a URI the principal may not read is left out of what is honoured.
            principal = _principal(conn, record)
            subscribed = frozenset(
                uri
                for uri in subscribed
                if not auth.missing(
                    principal, needed_scopes(conn.server, "resources/subscribe", {"uri": uri})
                )
            )
        honoured["resourceSubscriptions"] = sorted(subscribed)
    watching: dict[str, frozenset[str]] = {}
    if conn.server.extensions:
        more, watching = await conn.server.extensions.watch(conn, record, wanted)
        honoured.update(more)
    # Checked and claimed with no checkpoint between: listens racing in cannot overshoot.
    limit = conn.server.max_listens
    if len(conn.listeners) >= limit:
        raise ProtocolError(
            INTERNAL_ERROR,
            f"Subscription limit reached: at most {limit} subscriptions/listen in flight per "
            "connection",
            {"maxListens": limit},
        )
    listener = Listener(record.id, frozenset(kinds), subscribed, watching)
    conn.listeners[record.id] = listener
    try:
        await conn.notify(
            "notifications/subscriptions/acknowledged",
            {"notifications": honoured, "_meta": {SUBSCRIPTION_ID_KEY: record.id}},
            related_request_id=record.id,
        )
        await trio.sleep_forever()
    finally:
        if conn.listeners.get(record.id) is listener:
            del conn.listeners[record.id]
    raise AssertionError("unreachable")  # pragma: no cover


async def _ping(conn: ServerConnection, record: InFlight) -> JSONObject:
    await trio.lowlevel.checkpoint()
    return {}


_Entry = TypeVar("_Entry", ToolEntry, PromptEntry, ResourceEntry, TemplateEntry)


def _paged(
    conn: ServerConnection,
    record: InFlight,
    key: str,
    entries: Listing[_Entry],
    wire: Callable[[_Entry], Any],
    keep: Callable[[_Entry], bool] | None,
) -> JSONObject:
    """One page of a list: only the page's entries are filtered (``keep``) and encoded, each
    entry's wire form made once and kept (``Listed.wire_of``) and shared by every list that
    shows it: a list of 10,000 tools then allocates no object per tool, whose allocations
    set off the cycle collector's full passes (three times the call's own cost, measured). A
    server's middleware may change what it is handed: it gets forms of its own, made for
    this list (a parent's mount copies what it takes, ``Mount.renamed``)."""
    try:
        chunk, next_cursor = entries.page(record.params.get("cursor"), conn.server.page_size, keep)
    except ValueError:
        raise _invalid("Invalid params: invalid cursor") from None
    if conn.server.middleware_chain:
        items = [to_wire(wire(entry)) for entry in chunk]
    else:
        items = [entry.wire_of(wire(entry)) for entry in chunk]
    result: JSONObject = {key: items}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result


def _shown(
    conn: ServerConnection, record: InFlight, *more: Callable[[Any], bool]
) -> Callable[[Any], bool] | None:
    """Which entries a list shows the request's principal (lists may vary by authorization):
    with ``Server(auth=...)``, those whose scopes its token grants, implied ones included; and
    what visibility and ``more`` allow. None: every entry. Applied before paging, so the pages
    of one principal's list hold exactly its entries."""
    tests: list[Callable[[Any], bool]] = []
    if conn.server.visibility or conn.visibility:
        tests.append(conn.shows)
    auth = conn.server.auth
    if auth is not None:
        principal = _principal(conn, record)
        granted = auth.granted(principal) if principal is not None else frozenset()
        tests.append(lambda entry: entry.scopes <= granted)
    tests.extend(more)
    if not tests:
        return None
    if len(tests) == 1:
        return tests[0]
    return lambda entry: all(test(entry) for test in tests)


async def _tools_list(conn: ServerConnection, record: InFlight) -> JSONObject:
    await trio.lowlevel.checkpoint()

    def client_capabilities() -> Mapping[str, Any]:
        modern = record.envelope
        if modern is not None:
            return modern.client_capabilities  # type: ignore[no-any-return]
        return to_wire(conn.state.client_capabilities)  # type: ignore[no-any-return]

    # An extension may keep a tool from some clients (by what they declared).
    kept_by_extensions = conn.server.extensions.tool_filter(client_capabilities)
    keep = _shown(conn, record, *([kept_by_extensions] if kept_by_extensions else []))
    tools = conn.server.listings.tools()
    return _paged(conn, record, "tools", tools, lambda e: e.tool, keep)


def _tools_call(conn: ServerConnection, record: InFlight) -> Awaitable[JSONObject]:
    # The method's handler, for a call that something wraps (middleware, a mount, an
    # extension, the instrumentation), a sync tool, or an unknown one: an async tool called
    # with nothing around it has a route of its own (_ToolCall). Called in the request's
    # task, inside its scope, as a handler's coroutine is: what comes
    # before the tool's run is done here, synchronously. An async tool's own coroutine is then
    # awaited through a small _ToolRun, not through a frame of ours: whatever awaits the
    # handler holds that awaitable for as long as the tool runs, so it is kept small.
    prepared = _tool_arguments(conn, record)
    if isinstance(prepared, dict):
        return _answered(prepared)
    name, entry, kwargs = prepared
    if not entry.is_async:
        return _sync_tool_call(name, entry, kwargs)
    # The tool's first step is taken here (whoever calls this awaits what it returns at once,
    # in the same task): a tool that ends without blocking, as most do, is answered by a
    # finished coroutine, with no StopIteration raised by an awaitable of ours; one that
    # blocks is awaited through a _ToolRun that hands trio what that step yielded.
    coro = entry.fn(**kwargs)
    try:
        first = coro.send(None)
    except StopIteration as stop:
        return _answered(_tool_result(name, entry, stop.value))
    except Exception as exc:
        return _answered(_tool_failure(name, exc))
    return _ToolRun(entry, coro, first)


async def _answered(result: JSONObject) -> JSONObject:
    return result


async def _sync_tool_call(name: str, entry: ToolEntry, kwargs: dict[str, Any]) -> JSONObject:
    try:
        value = await call_user(entry.fn, False, kwargs, in_thread=entry.in_thread)
    except Exception as exc:
        return _tool_failure(name, exc)
    return _tool_result(name, entry, value)


def _tool_result(name: str, entry: ToolEntry, value: Any) -> JSONObject:
    """The wire form of a tool's returned ``value`` (or of its failure to convert)."""
    if type(value) is str and entry.signature.output_schema is None:
        # The commonest result, built directly: the same wire form to_wire gives.
        return {"content": [{"type": "text", "text": value}]}
    try:
        result = entry.to_result(value)
    except Exception as exc:
        return _tool_failure(name, exc)
    return to_wire(result)  # type: ignore[no-any-return]


class _ToolRun(Generator[Any, Any, JSONObject]):
    """An async tool's coroutine, its first step already taken (``first``: what it yielded to
    trio), awaited on behalf of ``tools/call``: every step is passed to the tool's coroutine
    as is, and what it returns (or raises, other than a BaseException that is not an
    Exception) is turned into the call's result once it ends. Three slots in place of a
    suspended coroutine frame, held by every call in flight while its tool runs."""

    __slots__ = ("_coro", "_entry", "_first")

    def __init__(self, entry: ToolEntry, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self._entry = entry
        self._coro = coro
        self._first = first

    @property
    def _name(self) -> str:
        return self._entry.tool.name

    def __await__(self) -> Generator[Any, Any, JSONObject]:
        return self

    def __next__(self) -> Any:
        return self.send(None)

    def send(self, value: Any) -> Any:
        first = self._first
        if first is not _TAKEN:
            # The await begins: trio is handed what the tool yielded in its first step.
            self._first = _TAKEN
            return first
        try:
            return self._coro.send(value)
        except StopIteration as stop:
            raise StopIteration(_tool_result(self._name, self._entry, stop.value)) from None
        except Exception as exc:
            raise StopIteration(_tool_failure(self._name, exc)) from None

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        error = typ if val is None and isinstance(typ, BaseException) else None
        try:
            if error is not None:
                return self._coro.throw(error)
            return self._coro.throw(typ, val, tb)
        except StopIteration as stop:
            raise StopIteration(_tool_result(self._name, self._entry, stop.value)) from None
        except Exception as exc:
            raise StopIteration(_tool_failure(self._name, exc)) from None

    def close(self) -> None:
        self._coro.close()


#: A _ToolRun's first step, once trio has been handed it.
_TAKEN: Any = object()


def _tool_arguments(
    conn: ServerConnection, record: InFlight
) -> tuple[str, ToolEntry, dict[str, Any]] | JSONObject:
    """The tool a ``tools/call`` names and the keyword arguments to call it with, or the
    ``isError`` result saying why its arguments do not fit (-32602 for a missing or unknown
    tool)."""
    params = record.params
    name, entry = _named(conn, conn.server.tools, params, "tools/call", "tool")
    # Held by every call in flight (in its params): the registry's string, not one per call.
    params["name"] = name = entry.tool.name
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        raise _invalid("Invalid params: 'arguments' must be an object")
    try:
        kwargs = entry.signature.convert_arguments(arguments)
    except ArgumentsError as exc:
        return _arguments_refused(name, exc)
    if entry.signature.context_param is not None:
        kwargs[entry.signature.context_param] = Context(record, conn)
    return name, entry, kwargs


def _tool_failure(name: str, exc: Exception) -> JSONObject:
    """The ``isError`` result of a tool that raised ``exc``, on the wire; what is not the
    tool's to answer (a protocol error, a cancel, a modern request's question or task) is
    raised again."""
    only = single_error(exc)
    # A question or a task ends a modern request with an InputRequiredResult (or a task).
    if isinstance(only, InputRequired | StartTask) or (
        isinstance(only, ProtocolError | RequestCancelled)
        and not isinstance(only, NestedRequestError)
    ):
        try:
            raise only from None
        finally:
            # This frame is in the error's traceback: holding the error, it would make a
            # reference cycle, left for the cycle collector (asking is a modern request's
            # ordinary way to end).
            del exc, only
    if isinstance(only, ToolError):
        message = str(only) or f"Tool {name} failed"
    elif isinstance(only, CapabilityMissing | InvalidAnswer | SessionStateError):
        # About the client (or the session's bounded state), not the tool's code: the model
        # (and its user) can act on it.
        message = f"Tool {name} failed: {only}"
    elif isinstance(only, ResultError):
        # Structured content MUST conform to the output schema: the mismatch is the tool's
        # error, named so the model (and the author, in the log) can see what is wrong.
        logger.warning("tool %r returned a value outside its output schema: %s", name, only)
        message = f"Tool {name} returned an invalid result: {only}"
    else:
        logger.error("tool %r failed", name, exc_info=exc)
        message = f"Tool {name} failed with an internal error"
    return {"content": [{"type": "text", "text": message}], "isError": True}


class _ToolCall:
    """``tools/call`` of one async tool on one connection, when nothing wraps the call: the
    handler of its route calls the tool and hands the engine the tool's own coroutine, and the
    route turns what it returns or raises into the call's result (the engine applies them in
    the request's scope). Nothing of ours is awaited while the tool runs."""

    __slots__ = ("_conn", "_entry", "_name")

    def __init__(self, conn: ServerConnection, entry: ToolEntry) -> None:
        self._conn = conn
        self._entry = entry
        self._name = entry.tool.name

    def start(self, record: InFlight) -> Awaitable[Any]:
        """Authorize the call, convert its arguments and call the tool (as ``_tools_call``)."""
        conn, entry = self._conn, self._entry
        if conn.server.auth is not None:
            conn.authorize(record)
        params: JSONObject = record.params
        # Held by every call in flight (in its params): the registry's string, not one per call.
        params["name"] = self._name
        arguments = params.get("arguments")
        # Told apart with no call for what a decoder gives (a dict, or None).
        if (
            arguments is not None
            and type(arguments) is not dict
            and not isinstance(arguments, dict)
        ):
            raise _invalid("Invalid params: 'arguments' must be an object")
        try:
            kwargs = entry.signature.convert_arguments(arguments)
        except ArgumentsError as exc:
            raise _RefusedArguments(_arguments_refused(self._name, exc)) from None
        if entry.signature.context_param is not None:
            kwargs[entry.signature.context_param] = Context(record, conn)
        return entry.fn(**kwargs)  # type: ignore[no-any-return]

    def returned(self, record: InFlight, value: Any) -> JSONObject:
        return _tool_result(self._name, self._entry, value)

    def failed(self, record: InFlight, exc: Exception) -> JSONObject:
        if type(exc) is _RefusedArguments:
            return exc.result
        return _tool_failure(self._name, exc)


class _RefusedArguments(Exception):
    """A call's arguments do not fit its tool's input schema: ``result`` says why."""

    def __init__(self, result: JSONObject) -> None:
        self.result = result


def _arguments_refused(name: str, exc: ArgumentsError) -> JSONObject:
    # A tool error, not a protocol error (SEP-1303): the model must read what is wrong to
    # correct its call. The message names paths and reasons only, never internals.
    text = f"Invalid arguments for tool {name}: {exc}"
    return {"content": [{"type": "text", "text": text}], "isError": True}


async def _prompts_list(conn: ServerConnection, record: InFlight) -> JSONObject:
    await trio.lowlevel.checkpoint()
    prompts = conn.server.listings.prompts()
    return _paged(conn, record, "prompts", prompts, lambda e: e.prompt, _shown(conn, record))


async def _prompts_get(conn: ServerConnection, record: InFlight) -> JSONObject:
    params = record.params
    name, entry = _named(conn, conn.server.prompts, params, "prompts/get", "prompt")
    arguments = params.get("arguments") or {}
    if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
        raise _invalid("Invalid params: prompt arguments must be an object of strings")
    missing = sorted(entry.required - arguments.keys())
    if missing:
        raise _invalid(f"Missing required arguments for prompt {name}: {', '.join(missing)}")
    unknown = sorted(arguments.keys() - set(entry.arg_names))
    if unknown:
        raise _invalid(f"Unknown arguments for prompt {name}: {', '.join(unknown)}")
    try:
        kwargs = entry.arguments(arguments)
    except ArgumentsError as exc:
        raise _invalid(f"Invalid params: prompt {name}: {exc}") from None
    if entry.context_param is not None:
        kwargs[entry.context_param] = Context(record, conn)
    value = await _call_handler(entry.fn, entry.is_async, kwargs, entry.in_thread)
    return to_wire(entry.to_result(value))  # type: ignore[no-any-return]


async def _resources_list(conn: ServerConnection, record: InFlight) -> JSONObject:
    await trio.lowlevel.checkpoint()
    resources = conn.server.listings.resources()
    keep = _shown(conn, record)
    return _paged(conn, record, "resources", resources, lambda e: e.resource, keep)


async def _templates_list(conn: ServerConnection, record: InFlight) -> JSONObject:
    await trio.lowlevel.checkpoint()
    templates = conn.server.listings.templates()
    keep = _shown(conn, record)
    return _paged(conn, record, "resourceTemplates", templates, lambda e: e.template, keep)


async def _resources_read(conn: ServerConnection, record: InFlight) -> JSONObject:
    uri = _require_str(record.params, "uri", "resources/read")
    server = conn.server
    kwargs: dict[str, Any]
    entry = server.resources.get(uri)
    if entry is not None and not conn.shows(entry):
        raise _not_found(uri, record.envelope is not None)
    if entry is not None:
        fn, is_async, in_thread = entry.fn, entry.is_async, entry.in_thread
        context_param, mime_type, kwargs = entry.context_param, entry.resource.mime_type, {}
    else:
        for template in server.templates.values():
            variables = template.match(uri)
            if variables is not None and conn.shows(template):
                fn, is_async, in_thread = template.fn, template.is_async, template.in_thread
                context_param, mime_type = template.context_param, template.template.mime_type
                try:
                    kwargs = template.arguments(variables)
                except ArgumentsError as exc:
                    raise _invalid(f"Invalid params: {uri}: {exc}", {"uri": uri}) from None
                break
        else:
            raise _not_found(uri, record.envelope is not None)
    if context_param is not None:
        kwargs[context_param] = Context(record, conn)
    try:
        value = await _call_handler(fn, is_async, kwargs, in_thread)
    except Exception as exc:
        missing = single_error(exc)
        if isinstance(missing, ResourceNotFound):
            raise _not_found(missing.uri, record.envelope is not None) from None
        raise
    return {"contents": [to_wire(c) for c in resource_contents(uri, mime_type, value)]}


async def _changed(conn: ServerConnection) -> None:
    if conn.on_change is None:
        await trio.lowlevel.checkpoint()
    else:
        await conn.on_change()


async def _subscribe(conn: ServerConnection, record: InFlight) -> JSONObject:
    conn.subscriptions.add(_require_str(record.params, "uri", "resources/subscribe"))
    await _changed(conn)
    return {}


async def _unsubscribe(conn: ServerConnection, record: InFlight) -> JSONObject:
    conn.subscriptions.discard(_require_str(record.params, "uri", "resources/unsubscribe"))
    await _changed(conn)
    return {}


async def _set_level(conn: ServerConnection, record: InFlight) -> JSONObject:
    conn.state.set_log_level(record.params.get("level"))
    await _changed(conn)
    return {}


async def _complete(conn: ServerConnection, record: InFlight) -> JSONObject:
    params = record.params
    handler = conn.server.completion_handler
    assert handler is not None  # the capability gate refuses the method otherwise
    ref_raw, arg_raw = params.get("ref"), params.get("argument")
    if not isinstance(ref_raw, dict) or not isinstance(arg_raw, dict):
        raise _invalid("Invalid params: completion/complete needs 'ref' and 'argument' objects")
    ref: PromptReference | ResourceTemplateReference
    try:
        if ref_raw.get("type") == "ref/prompt":
            ref = from_wire(ref_raw, PromptReference)
            prompt = conn.server.prompts.get(ref.name)
            if prompt is None or not conn.shows(prompt):
                raise _invalid(f"Unknown prompt: {ref.name}")
        elif ref_raw.get("type") == "ref/resource":
            ref = from_wire(ref_raw, ResourceTemplateReference)
        else:
            raise _invalid("Invalid params: ref.type must be 'ref/prompt' or 'ref/resource'")
        argument = from_wire(arg_raw, CompletionArgument)
        context_raw = params.get("context")
        context = from_wire(context_raw, CompletionContext) if context_raw is not None else None
    except ValueError as exc:
        raise _invalid(f"Invalid params: {exc}") from None
    kwargs: dict[str, Any] = {"ref": ref, "argument": argument, "context": context}
    if handler.context_param is not None:
        kwargs[handler.context_param] = Context(record, conn)
    value = await call_user(handler.fn, handler.is_async, kwargs)
    if isinstance(value, Completion):
        completion = value
        if len(value.values) > 100:  # the spec caps a response at 100 values
            completion = attrs.evolve(
                value,
                values=value.values[:100],
                total=value.total if value.total is not None else len(value.values),
                has_more=True,
            )
    else:
        values = [str(v) for v in value or ()]
        completion = Completion(values=values[:100], total=len(values), has_more=len(values) > 100)
    return {"completion": to_wire(completion)}


def _with_cache_hints(handler: MethodHandler) -> MethodHandler:
    """Handshake-era results carry cache hints only where the server configured them."""

    async def hinted(conn: ServerConnection, record: InFlight) -> JSONObject:
        result = await handler(conn, record)
        return stamp_result(result, record.method, modern=False, hints=conn.cache_hints)

    return hinted


def _custom_handler(custom: CustomMethod) -> MethodHandler:
    async def handler(conn: ServerConnection, record: InFlight) -> JSONObject:
        kwargs: dict[str, Any] = {}
        if custom.context_param is not None:
            kwargs[custom.context_param] = Context(record, conn)
        value = await call_user(custom.fn, custom.is_async, kwargs, args=(record.params,))
        if value is None:
            return {}
        wire = to_wire(value)
        if not isinstance(wire, dict):
            raise TypeError(f"a method handler must return a dict, not {type(value).__name__}")
        return wire

    return handler


_HANDLERS: dict[str, MethodHandler] = {
    "initialize": _initialize,
    "server/discover": _discover,
    "ping": _ping,
    "tools/list": _tools_list,
    "tools/call": _tools_call,
    "prompts/list": _prompts_list,
    "prompts/get": _prompts_get,
    "resources/list": _resources_list,
    "resources/templates/list": _templates_list,
    "resources/read": _resources_read,
    "resources/subscribe": _subscribe,
    "resources/unsubscribe": _unsubscribe,
    "logging/setLevel": _set_level,
    "completion/complete": _complete,
}
