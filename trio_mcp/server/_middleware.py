"""Middleware: async functions around every request a server answers.

A middleware is ``async def mw(ctx: MiddlewareContext, call_next) -> dict``: it sees the request
(``ctx``), may change its params (``await call_next(attrs.evolve(ctx, params=...))``), the
result (what ``call_next`` returned), refuse it (raise ``ProtocolError`` or ``ToolError``), or
answer it without calling ``call_next`` at all. The first registered is the outermost.

The chain runs inside the request's own task and cancel scope, so cancellation and exceptions
cross it exactly as they cross a handler: a cancelled request unwinds through every middleware
(``trio.Cancelled`` is not an ``Exception``) and its response is suppressed; an unexpected
exception, in a handler or in a middleware, becomes -32603 "Internal error" with no internal
text. Authorization runs before the chain, as without it (no middleware, a cache say, ever
answers a request its principal may not make), and again on params a middleware changed.

Only requests pass through middleware. Notifications do not: ``notifications/cancelled`` must
reach the request it cancels at once (a middleware that could delay or drop it would break
cancellation), and the others carry no result to wrap. With no middleware registered the
handlers are called exactly as before (the chain is built, or not, once per route).
"""

from __future__ import annotations

import collections
import logging
import math
import secrets
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeVar

import attrs
import orjson
import trio

from .._engine import InFlight
from .._exception_groups import single_error
from ..protocol._envelope import has_envelope, read_envelope
from ..protocol._errors import ProtocolError, RequestCancelled
from ..protocol._jsonrpc import INVALID_PARAMS, RATE_LIMITED, JSONObject, RequestId
from ._bus import LIST_CHANGED, RESOURCE_UPDATED, BusEvent
from ._context import ConnectionView, Context
from ._principal import Principal

__all__ = [
    "CACHED_METHODS",
    "RATE_LIMITED",
    "CallNext",
    "ErrorHandlingMiddleware",
    "ErrorHook",
    "LoggingMiddleware",
    "Middleware",
    "MiddlewareContext",
    "MiddlewareServer",
    "RateLimitMiddleware",
    "ResponseCacheMiddleware",
    "TimingMiddleware",
    "TimingStats",
]


class MiddlewareServer(Protocol):
    """What a middleware may read of the server (``Server`` is one)."""

    @property
    def event_listeners(self) -> list[Callable[[BusEvent], None]]:
        """Called with every notification event the server delivers (a cache listens)."""
        ...


class _Connection(ConnectionView, Protocol):
    @property
    def id(self) -> str: ...
    @property
    def server(self) -> Any: ...


@attrs.frozen
class MiddlewareContext:
    """One request, as a middleware sees it (frozen: change params with ``attrs.evolve``)."""

    #: The JSON-RPC method (``tools/call``, ``resources/read``, ...).
    method: str
    #: The raw params object (``{}`` when the request had none). Treat it as read-only: pass a
    #: new dict to ``call_next(attrs.evolve(ctx, params=...))`` to change what the handler sees.
    params: JSONObject
    request_id: RequestId
    #: The connection's id: the ``Mcp-Session-Id`` of an HTTP session, else an id of its own
    #: (one per stdio or in-memory connection, one per stateless or modern HTTP request).
    session_id: str
    #: The protocol version the request is served under.
    protocol_version: str
    #: True for a request of the modern era (2026-07-28: it carried its own version).
    modern: bool
    #: Who the request acts for (``Server(auth=...)``), else None. The request is already
    #: authorized as it came in; params a middleware changes are checked again.
    auth: Principal | None
    #: The request's :class:`Context` (progress, logging to the client, ``ctx.lifespan``).
    context: Context
    #: The server answering it.
    server: MiddlewareServer = attrs.field(repr=False)

    @property
    def era(self) -> str:
        """``"modern"`` or ``"handshake"``."""
        return "modern" if self.modern else "handshake"

    @property
    def tool_name(self) -> str | None:
        """For ``tools/call``: the name of the tool called."""
        name = self.params.get("name") if self.method == "tools/call" else None
        return name if isinstance(name, str) else None

    @property
    def arguments(self) -> dict[str, Any] | None:
        """For ``tools/call`` (and ``prompts/get``): the arguments object, if it is one."""
        if self.method not in ("tools/call", "prompts/get"):
            return None
        arguments = self.params.get("arguments")
        return arguments if isinstance(arguments, dict) else None

    @property
    def name(self) -> str | None:
        """What the request names: the tool or prompt name, or the resource URI."""
        name = self.params.get("name", self.params.get("uri"))
        return name if isinstance(name, str) else None


CallNext = Callable[[MiddlewareContext], Awaitable[JSONObject]]
Middleware = Callable[[MiddlewareContext, CallNext], Awaitable[JSONObject]]
C = TypeVar("C", bound=_Connection)


def new_connection_id() -> str:
    return secrets.token_hex(8)


def apply_middleware(
    middleware: Sequence[Middleware],
    handler: Callable[[C, InFlight], Awaitable[JSONObject]],
    tool_error: type[Exception],
    envelope: Any = None,
    authorize: Callable[[C, InFlight], None] | None = None,
) -> Callable[[C, InFlight], Awaitable[JSONObject]]:
    """``handler`` wrapped in the chain (``middleware[0]`` outermost); built once per route.

    ``tool_error``: the exception (``ToolError``) by which a middleware refuses a request:
    an ``isError`` result for ``tools/call``, -32602 with its message for anything else. One
    raised by the handler itself keeps the meaning it has without middleware.
    ``envelope``: the modern request's (the route knows it before the handler sets it), so a
    middleware's ``ctx.context`` already reads the request's own version and capabilities.
    ``authorize``: the server's check, run again when a middleware changed the params (the
    request was authorized as it came in, before the chain), so no rewrite reaches what its
    principal may not.
    """
    chain = tuple(middleware)

    async def run(conn: C, record: InFlight) -> JSONObject:
        if envelope is not None:
            record.envelope = envelope
        original = record.params
        from_handler: list[BaseException] = []

        async def innermost(ctx: MiddlewareContext) -> JSONObject:
            if ctx.params is not original:
                record.request = attrs.evolve(record.request, params=ctx.params)
                if authorize is not None:
                    authorize(conn, record)
            try:
                return await handler(conn, record)
            except Exception as exc:
                from_handler.append(exc)
                raise

        call: CallNext = innermost
        for mw in reversed(chain):
            call = _link(mw, call)
        context = Context(record, conn)
        principal = record.principal if record.principal is not None else conn.principal
        if record.envelope is not None:
            version = str(record.envelope.protocol_version)
        elif has_envelope(original):
            version = read_envelope(original).protocol_version
        else:
            version = conn.state.protocol_version
        ctx = MiddlewareContext(
            method=record.method,
            params=original,
            request_id=record.id,
            session_id=conn.id,
            protocol_version=version,
            modern=record.envelope is not None or has_envelope(original),
            auth=principal,
            context=context,
            server=conn.server,
        )
        try:
            return await call(ctx)
        except Exception as exc:
            refused = single_error(exc)
            if not isinstance(refused, tool_error) or any(
                refused is e or refused is single_error(e) for e in from_handler
            ):
                raise
            message = str(refused) or "Refused"
            if ctx.method == "tools/call":
                # The tool's verdict, as a tool raising ToolError gives it: the model reads it.
                return {"content": [{"type": "text", "text": message}], "isError": True}
            raise ProtocolError(INVALID_PARAMS, message) from None

    return run


def _link(mw: Middleware, call_next: CallNext) -> CallNext:
    async def step(ctx: MiddlewareContext) -> JSONObject:
        return await mw(ctx, call_next)

    return step


# -- built-ins -------------------------------------------------------------------------------

#: What :class:`ResponseCacheMiddleware` caches by default: the list methods and reads.
CACHED_METHODS = frozenset(
    {"tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"}
)

_logger = logging.getLogger("trio_mcp.middleware")


def _outcome(result: JSONObject | None, method: str, error: BaseException | None) -> str:
    if error is None:
        assert result is not None
        return "tool error" if method == "tools/call" and result.get("isError") else "ok"
    only = single_error(error)
    if only is None or isinstance(only, trio.Cancelled | RequestCancelled):
        return "cancelled"
    if isinstance(only, ProtocolError):
        return f"error {only.code}"
    return "internal error"


class LoggingMiddleware:
    """One log line per request: method, name, duration, outcome.

    ``tools/call add 1.2ms ok``; the outcome is ``ok``, ``tool error`` (an ``isError``
    result), ``error <code>``, ``internal error`` or ``cancelled``. Params (which may hold
    anything a user typed) are logged only with ``include_params=True``, and never their
    ``_meta``; nothing of the caller's token ever is.
    """

    def __init__(
        self,
        logger: logging.Logger | None = None,
        *,
        level: int = logging.INFO,
        include_params: bool = False,
    ) -> None:
        self.logger = logger if logger is not None else _logger
        self.level = level
        self.include_params = include_params

    async def __call__(self, ctx: MiddlewareContext, call_next: CallNext) -> JSONObject:
        start = trio.current_time()
        result: JSONObject | None = None
        error: BaseException | None = None
        try:
            result = await call_next(ctx)
            return result
        except BaseException as exc:
            error = exc
            raise
        finally:
            if self.logger.isEnabledFor(self.level):
                duration = (trio.current_time() - start) * 1000
                name = f" {ctx.name}" if ctx.name is not None else ""
                line = f"{ctx.method}{name} {duration:.1f}ms {_outcome(result, ctx.method, error)}"
                if self.include_params:
                    shown = {k: v for k, v in ctx.params.items() if k != "_meta"}
                    line += " " + orjson.dumps(shown, default=str).decode()
                self.logger.log(self.level, "%s", line)


@attrs.define
class TimingStats:
    """Durations (seconds, Trio's clock) of the requests of one key."""

    count: int = 0
    total: float = 0.0
    min: float = float("inf")
    max: float = 0.0

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def add(self, duration: float) -> None:
        self.count += 1
        self.total += duration
        self.min = min(self.min, duration)
        self.max = max(self.max, duration)


class TimingMiddleware:
    """Records how long each request took, by ``"method"`` or ``"method name"``.

    Every request that ends counts (answered, refused or cancelled). ``stats`` is bounded: at
    most ``max_keys`` keys, after which requests are counted under their method alone.
    """

    def __init__(self, *, max_keys: int = 1000) -> None:
        self.max_keys = max_keys
        self.stats: dict[str, TimingStats] = {}

    async def __call__(self, ctx: MiddlewareContext, call_next: CallNext) -> JSONObject:
        start = trio.current_time()
        try:
            return await call_next(ctx)
        finally:
            key = ctx.method if ctx.name is None else f"{ctx.method} {ctx.name}"
            if key not in self.stats and len(self.stats) >= self.max_keys:
                key = ctx.method
            self.stats.setdefault(key, TimingStats()).add(trio.current_time() - start)

    def snapshot(self) -> dict[str, TimingStats]:
        """A copy of the stats so far."""
        return {key: attrs.evolve(stats) for key, stats in self.stats.items()}


#: ``ErrorHandlingMiddleware(on_error=...)``: given the exception and the request, returns an
#: exception to raise instead (``ToolError``, ``ProtocolError``), a result to answer with, or
#: None to keep the default (-32603 "Internal error", details in the log only).
ErrorHook = Callable[[Exception, MiddlewareContext], "Exception | JSONObject | None"]


class ErrorHandlingMiddleware:
    """Turns unexpected exceptions into errors a client can act on.

    It sees what would otherwise become -32603 "Internal error": an exception from a prompt,
    resource or custom method handler, or from a middleware inside it (a tool's exceptions are
    already its ``isError`` results). It counts it by type in ``counts``, then asks, in order:
    ``error_codes`` (an exception type, or a base of it, to a JSON-RPC code: the error is raised
    as that code with the exception's message, which then reaches the client, so list only
    exceptions whose text is meant for it), then ``on_error``. An error it maps is an expected
    one: logged in one line at INFO; one it leaves to the generic -32603 is logged at ERROR
    with its traceback. Protocol errors, cancellation and ``ToolError`` pass through untouched.
    """

    def __init__(
        self,
        on_error: ErrorHook | None = None,
        *,
        error_codes: Mapping[type[Exception], int] | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self.on_error = on_error
        self.error_codes = dict(error_codes or {})
        self.logger = logger if logger is not None else _logger
        self.counts: collections.Counter[str] = collections.Counter()

    async def __call__(self, ctx: MiddlewareContext, call_next: CallNext) -> JSONObject:
        try:
            return await call_next(ctx)
        except Exception as exc:
            error = single_error(exc)
            if not isinstance(error, Exception) or isinstance(
                error, ProtocolError | RequestCancelled
            ):
                raise
            if _is_tool_error(error):
                raise
            self.counts[type(error).__qualname__] += 1
            mapped: Exception | JSONObject | None = None
            for kind, code in self.error_codes.items():
                if isinstance(error, kind):
                    mapped = ProtocolError(code, str(error) or type(error).__name__)
                    break
            else:
                if self.on_error is not None:
                    mapped = self.on_error(error, ctx)
            if mapped is None:
                self.logger.error("%s failed", ctx.method, exc_info=error)
                raise
            what = f"{type(error).__qualname__}: {error}"
            if isinstance(mapped, BaseException):
                self.logger.info("%s failed (%s), answered as %r", ctx.method, what, mapped)
                raise mapped from None
            self.logger.info("%s failed (%s), answered with a result", ctx.method, what)
            return mapped


def _is_tool_error(error: BaseException) -> bool:
    # By name: the class lives in the connection's module, which imports this one.
    return any(
        cls.__name__ == "ToolError" and cls.__module__ == "trio_mcp.server._connection"
        for cls in type(error).__mro__
    )


class RateLimitMiddleware:
    """A token bucket per caller: ``rate`` requests a second on average, bursts of ``burst``.

    The caller is the principal's identity (``per="principal"``, the default; a request
    without one counts against its session) or the session (``per="session"``). Time is
    ``trio.current_time()``, so a ``MockClock`` drives it. A refused request gets the JSON-RPC
    error -32000 "Rate limit exceeded" with ``data: {"retryAfterMs": ...}``, for every method
    ``tools/call`` included: the limit is about the caller, not the tool, and the client (not
    the model) should wait and retry; a tool error would read as the tool's own answer and
    invite the model to call again at once. ``exempt`` methods are never limited. At most
    ``max_callers`` buckets are kept (the least recently used is forgotten).
    """

    def __init__(
        self,
        rate: float,
        burst: int,
        *,
        per: Literal["principal", "session"] = "principal",
        exempt: Collection[str] = ("initialize", "ping", "server/discover"),
        max_callers: int = 10_000,
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("RateLimitMiddleware needs a positive rate and a burst of at least 1")
        if per not in ("principal", "session"):
            raise ValueError("per must be 'principal' or 'session'")
        self.rate = rate
        self.burst = burst
        self.per = per
        self.exempt = frozenset(exempt)
        self.max_callers = max_callers
        #: caller -> (tokens, at): the tokens left at that time.
        self._buckets: collections.OrderedDict[str, tuple[float, float]] = collections.OrderedDict()

    @property
    def callers(self) -> int:
        """How many callers' buckets are kept (at most ``max_callers``)."""
        return len(self._buckets)

    def _caller(self, ctx: MiddlewareContext) -> str:
        if self.per == "principal" and ctx.auth is not None:
            return "principal:" + ctx.auth.identity
        return "session:" + ctx.session_id

    async def __call__(self, ctx: MiddlewareContext, call_next: CallNext) -> JSONObject:
        if ctx.method in self.exempt:
            return await call_next(ctx)
        key = self._caller(ctx)
        now = trio.current_time()
        tokens, at = self._buckets.pop(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) * self.rate)
        if tokens < 1:
            self._buckets[key] = (tokens, now)
            wait_ms = math.ceil((1 - tokens) / self.rate * 1000)
            raise ProtocolError(
                RATE_LIMITED,
                f"Rate limit exceeded: at most {self.burst} requests at once and {self.rate:g} "
                f"a second; retry in {wait_ms} ms",
                {"retryAfterMs": wait_ms},
            )
        self._buckets[key] = (tokens - 1, now)
        while len(self._buckets) > self.max_callers:
            self._buckets.popitem(last=False)
        return await call_next(ctx)


@attrs.define
class _Cached:
    method: str
    uri: str | None
    expires: float
    body: bytes


class ResponseCacheMiddleware:
    """Caches results of list and read methods for ``ttl`` seconds.

    Keyed by method, protocol version, params (``_meta`` aside) and the principal's identity, so
    one caller's result never reaches another. An entry goes as soon as this server says it is
    stale: ``notifications/{kind}/list_changed`` drops the lists of that kind (and, for
    resources, the reads), ``notifications/resources/updated`` the reads of that URI, whether
    the change happened here or, through the bus, on another worker. Only complete results are
    kept (a modern request answered with an input request is not). At most ``max_entries``
    (the oldest go first). Each hit is a fresh copy, so an outer middleware may change it.
    """

    def __init__(
        self,
        ttl: float = 60.0,
        *,
        methods: Collection[str] = CACHED_METHODS,
        max_entries: int = 1000,
    ) -> None:
        self.ttl = ttl
        self.methods = frozenset(methods)
        self.max_entries = max_entries
        self._entries: dict[tuple[Any, ...], _Cached] = {}
        self._servers: set[int] = set()
        self.hits = 0
        self.misses = 0

    def _listen(self, server: MiddlewareServer) -> None:
        if id(server) not in self._servers:
            self._servers.add(id(server))
            server.event_listeners.append(self._heard)

    def _heard(self, event: BusEvent) -> None:
        if event.kind == LIST_CHANGED:
            kind = event.params.get("kind")
            stale = {
                "tools": {"tools/list"},
                "prompts": {"prompts/list"},
                "resources": {"resources/list", "resources/templates/list", "resources/read"},
            }.get(kind if isinstance(kind, str) else "", set())
            self._drop(lambda entry: entry.method in stale)
        elif event.kind == RESOURCE_UPDATED:
            uri = event.params.get("uri")
            self._drop(lambda entry: entry.method == "resources/read" and entry.uri == uri)

    def _drop(self, stale: Callable[[_Cached], bool]) -> None:
        for key in [key for key, entry in self._entries.items() if stale(entry)]:
            del self._entries[key]

    @property
    def size(self) -> int:
        """How many results are kept (at most ``max_entries``)."""
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    async def __call__(self, ctx: MiddlewareContext, call_next: CallNext) -> JSONObject:
        if ctx.method not in self.methods:
            return await call_next(ctx)
        self._listen(ctx.server)
        shown = {k: v for k, v in ctx.params.items() if k != "_meta"}
        key = (
            id(ctx.server),
            ctx.method,
            ctx.protocol_version,
            ctx.auth.identity if ctx.auth is not None else "",
            orjson.dumps(shown, option=orjson.OPT_SORT_KEYS, default=str),
        )
        now = trio.current_time()
        entry = self._entries.get(key)
        if entry is not None and entry.expires > now:
            self.hits += 1
            await trio.lowlevel.checkpoint()
            cached: JSONObject = orjson.loads(entry.body)
            return cached
        self.misses += 1
        result = await call_next(ctx)
        if result.get("resultType", "complete") == "complete":
            uri = ctx.params.get("uri")
            self._entries.pop(key, None)
            self._entries[key] = _Cached(
                ctx.method,
                uri if isinstance(uri, str) else None,
                trio.current_time() + self.ttl,
                orjson.dumps(result),
            )
            while len(self._entries) > self.max_entries:
                del self._entries[next(iter(self._entries))]
        return result
