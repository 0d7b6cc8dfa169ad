"""One registry for the sessions of every transport of the app: Streamable HTTP sessions, HTTP+SSE
sessions and WebSocket connections.

Each is counted once against the same two caps (``max_sessions`` in all,
``max_sessions_per_client`` for one client, whatever transport it uses), expires the same way
(``session_idle_timeout`` after its last use, ``unused_session_timeout`` after its opening while
it carried no request), and is drained the same way: the registry waits for the requests in
flight on every transport, then ends those still running with one retryable error. It also
holds whether the app serves at all (its lifespan's nursery, draining, shutting down), which
admission reads.
"""

from __future__ import annotations

import abc
import enum
import functools
import heapq
import inspect
import itertools
import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

import trio

from .._lazy_event import LazyEvent
from ..otel import count_limit_hit
from ..protocol._jsonrpc import INTERNAL_ERROR, ErrorObject, RequestId
from ..server._principal import Principal
from . import _asgi
from ._asgi import HttpError, Scope

if TYPE_CHECKING:
    from .._engine import Engine
    from ._options import HttpOptions

#: What a request still running at the end of the drain's grace is answered with.
CUT_BY_SHUTDOWN = (
    "Server shutting down: the request was ended before it finished; it may have partly run, "
    "retry it if that is safe (another server takes it)"
)
#: After the grace, how long the requests that were ended get to write their error.
CUT_WRITE_GUARD = 2.0


class TransportKind(enum.Enum):
    """Which transport a registered session came on; each has its own table of ids."""

    STREAMABLE_HTTP = "Streamable HTTP"
    HTTP_SSE = "HTTP+SSE"
    WEBSOCKET = "WebSocket"

    #: Hashed by identity (each member is one object), not by ``Enum``'s Python-level hash of
    #: its name: a message's session is looked up in its table with it.
    __hash__ = object.__hash__


#: Who a request comes from: ``(scope, principal)`` (the principal None when unauthenticated);
#: a hook of one argument, the scope alone, is still taken as it always was.
ClientKey = Callable[[Scope, Principal | None], str]


def client_address(scope: Scope, *, header: str | None = None) -> str:
    """The address a request came from: the peer of its connection (the ASGI ``client``), or,
    with ``header``, the last value of that header, as a trusted proxy in front appends it
    (``x-forwarded-for``) or sets it (``x-real-ip``); the peer when the header is absent.

    Behind a proxy the peer is the proxy itself, so every client would share one key: name the
    proxy's header (``HostRules.client_address_header``), or let the ASGI server rewrite the
    scope (hypercorn's ``ProxyFixMiddleware``). Never trust the header without a proxy that
    writes it: a client can send any value.
    """
    if header is not None:
        value = _asgi.header(scope, header.lower().encode("latin-1"))
        if value:
            last = value.rsplit(",", 1)[-1].strip()
            if last:
                return last
    peer = scope.get("client")
    return str(peer[0]) if peer else ""


def default_client_key(
    scope: Scope, principal: Principal | None, *, header: str | None = None
) -> str:
    """The principal, for an authenticated request (two users behind one address each have
    their own limit, and one user cannot dodge it by changing address); the address
    (:func:`client_address`) otherwise. The two kinds of key never collide."""
    if principal is not None:
        return "principal:" + principal.identity
    return client_address(scope, header=header)


def client_key_of(hook: Callable[..., str] | None, header: str | None) -> ClientKey:
    """``Limits.client_key`` as the registry calls it: ``(scope, principal)``. None is
    :func:`default_client_key`; a hook that takes one argument gets the scope alone."""
    if hook is None:
        return functools.partial(default_client_key, header=header)
    if _positional_arity(hook) >= 2:
        return hook
    one: Callable[[Scope], str] = hook
    return lambda scope, _principal: one(scope)


def _positional_arity(hook: Callable[..., str]) -> int:
    try:
        parameters = inspect.signature(hook).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: the old form
        return 1
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return 2
    return sum(1 for p in parameters if p.kind in kinds)


def identity(principal: Principal | None) -> str | None:
    return principal.identity if principal is not None else None


class RegisteredSession(abc.ABC):
    """What every transport's session is to the registry: its id, whose it is, and its idle
    deadline, which the registry watches (:meth:`SessionRegistry.watch`).

    It is due to expire ``session_idle_timeout`` after it last went idle (no request in flight,
    no stream open); until it carried a request (``used``), never later than
    ``unused_session_timeout`` from its opening. A message costs an attribute or two (no move of
    a cancel scope's deadline, each a registration in trio's deadline heap): the registry looks
    at the session when its entry comes due, and again at its due time if it moved, so the
    session expires exactly when it is due, ending as its transport allows (a Streamable HTTP
    session is gone, an HTTP+SSE stream ends, a socket is closed with 1001).
    """

    # Slots, not a dict: an HTTP session carries some thirty attributes, past the number an
    # instance dict shares its keys for, and a dict of its own cost each session 1.3 KB more.
    __slots__ = (
        "_expired",
        "_look",
        "active",
        "client",
        "due",
        "ended",
        "engine",
        "id",
        "lease",
        "owner",
        "registry",
        "scope",
        "unused_until",
        "used",
        "watch_ended",
    )

    #: The transport it came on, whose table it is kept in.
    over: TransportKind
    #: Its engine (None while a socket's has not started).
    engine: Engine | None

    def __init__(
        self, registry: SessionRegistry, session_id: str, client: str, owner: str | None
    ) -> None:
        self.registry = registry
        self.id = session_id
        #: Whose it is, for the per-client limit (see ``Limits.client_key``).
        self.client = client
        #: The ``Principal.identity`` of the request that opened it (None without
        #: authorization): only that identity can use it.
        self.owner = owner
        self.active = 0
        #: Whether it carried a request since it was opened: until then it lives at most
        #: ``unused_session_timeout`` from its opening.
        self.used = False
        self.unused_until = trio.current_time() + registry.options.limits.unused_session_timeout
        self.scope = trio.CancelScope()
        self.ended = LazyEvent()
        self.engine = None
        #: Its lease in a shared limit store (the counter and the lease), while it holds one.
        self.lease: tuple[str, str] | None = None
        #: When it expires if it stays idle until then; never earlier than its last
        #: :meth:`touch` allows (it only moves later). Infinite until its opening's touch.
        self.due = math.inf
        self._expired = False
        #: Its entry in the registry's schedule (when it is next looked at), while it has one.
        self._look: _Look | None = None
        #: Whether its watch ended it (cancelled its scope): read as its scope's
        #: ``cancel_called`` would be, without that property's look at the clock.
        self.watch_ended = False

    @abc.abstractmethod
    def close(self) -> None:
        """End it: its requests are cancelled, its stream or socket ends."""

    @property
    def engine_idle(self) -> bool:
        engine = self.engine
        return engine is None or engine.idle

    def busy(self) -> None:
        self.active += 1

    def idle(self) -> None:
        self.active -= 1
        self.touch()

    def touch(self) -> None:
        """It may have gone idle: its due time moves to an idle timeout from now if it has
        nothing open or running."""
        if self.active == 0 and self.engine_idle:
            due = trio.current_time() + self.registry.options.limits.session_idle_timeout
            self.due = due if self.used else min(due, self.unused_until)
        if self.registry._waiter is not None:  # a drain waits for this: it looks again
            self.registry.changed()

    def arrived(self, *, request: bool) -> None:
        """A message came in, which its engine takes next; a request (``initialize`` aside)
        makes the session a used one. Nothing to hold off: the watch looks at what is in
        flight before it expires anything."""
        if request:
            self.used = True

    @property
    def expired(self) -> bool:
        """Whether it ended because its idle deadline passed (not closed, not shut down)."""
        return self._expired

    @property
    def expiring(self) -> bool:
        """Whether it is idle past its due time, which its watch has not looked at yet: as
        good as expired (a request that finds it so is refused, not let in to revive it)."""
        return self.active == 0 and self.due <= trio.current_time() and self.engine_idle

    @property
    def idle_deadline(self) -> float:
        """When it is due to expire (infinite while it is busy)."""
        return self.due if self.active == 0 and self.engine_idle else math.inf

    def tick(self, now: float) -> float:
        """Whatever the session does on a timer of its own (an HTTP+SSE stream's keep-alive),
        called by :meth:`look`: when to call it next (never, here)."""
        return math.inf

    def look(self, now: float) -> float | None:
        """The registry's look at it (see :meth:`SessionRegistry.watch`): idle past its due
        time, it ends (its scope is cancelled; None); else when to look again. A session busy
        at its due time carried a request (``initialize`` is never in flight), so once idle
        its :meth:`touch` sets a due time an idle timeout on at least: it is looked at again
        by then."""
        due = self.due
        if now >= due:
            if self.active == 0 and self.engine_idle:
                self._expired = not self.registry.shutting_down
                self.watch_ended = True
                self.scope.cancel()
                return None
            due = now + self.registry.options.limits.session_idle_timeout
        return min(due, self.tick(now))


#: An entry of the registry's schedule: when, a tie-breaker, and the session to look at (None
#: once it was forgotten: the entry stays, stale, and holds nothing).
_Look = list[Any]


class AloneRequest(Protocol):
    """A request its POST serves with no session at all (a light modern POST): counted while it
    runs (``request_started``/``request_ended``) and ended by the drain like any other."""

    def end_request(self, reason: str, error: ErrorObject) -> None: ...


class SessionRegistry:
    """Every session of the app, by transport and by client, with the caps, the drain and the
    app's serving state (see the module's docstring)."""

    def __init__(self, options: HttpOptions) -> None:
        self.options = options
        self.client_key: ClientKey = client_key_of(
            options.limits.client_key, options.hosts.client_address_header
        )
        #: Every session counted against the caps: opening or kept, on every transport.
        self._counted: set[RegisteredSession] = set()
        self._by_client: dict[str, set[RegisteredSession]] = {}
        #: The sessions that can be looked up by id, one table per transport.
        self._tables: dict[TransportKind, dict[str, Any]] = {kind: {} for kind in TransportKind}
        #: The engines of stateless POSTs (and of modern ones on a server with mounts), each
        #: alive for its one request.
        self.posts: set[RegisteredSession] = set()
        #: The modern POSTs being served with no session, each the connection of its request.
        self.alone: set[AloneRequest] = set()
        #: The nursery every session runs in: the app's lifespan's (None: not serving).
        self.nursery: trio.Nursery | None = None
        self.draining = False
        self.shutting_down = False
        #: Told of every session forgotten (the app gives back its lease in a shared store).
        self.on_forget: Callable[[RegisteredSession], None] | None = None
        #: Streamable HTTP requests being served (by their POSTs), and the event set when the
        #: registry's state next changes: made only while a drain waits.
        self._serving = 0
        self._waiter: trio.Event | None = None
        #: When each watched session is next looked at, soonest first: one task for every
        #: session (:meth:`_watch_all`), where each used to sleep in a timer of its own
        #: (about 1.1 KB of cancel scope and deadline an idle session held).
        self._schedule: list[_Look] = []
        self._entries = itertools.count()
        #: Entries of sessions forgotten before they came due, still in the schedule.
        self._stale = 0
        #: The deadline the watching task sleeps to (None: no task watches).
        self._alarm: trio.CancelScope | None = None
        self._watching = False

    # -- the caps --------------------------------------------------------------------------------

    def client_of(self, scope: Scope, principal: Principal | None) -> str:
        """Who a request comes from, for ``max_sessions_per_client``."""
        return self.client_key(scope, principal)

    def check(
        self, client: str, *, request_id: RequestId | None = None, per_client: bool = True
    ) -> None:
        """Whether a new session of ``client`` may open: 429 past the client's limit (with
        ``per_client``), 503 past the server's, both with ``Retry-After`` (the time until the
        first session concerned is due to expire)."""
        if per_client:
            owned = self._by_client.get(client, set())
            limit = self.options.limits.max_sessions_per_client
            if len(owned) >= limit:
                count_limit_hit("sessions_per_client")
                raise HttpError(
                    429,
                    f"Too Many Requests: this client already has {limit} sessions, the limit "
                    "(Streamable HTTP, HTTP+SSE and WebSocket together); end one, or retry later",
                    request_id=request_id,
                    headers=[self.retry_after(owned)],
                )
        if len(self._counted) >= self.options.limits.max_sessions:
            count_limit_hit("sessions")
            raise HttpError(
                503,
                "Service Unavailable: the server has reached its session limit",
                request_id=request_id,
                headers=[self.retry_after(self._counted)],
            )

    def claim(
        self,
        session: RegisteredSession,
        *,
        request_id: RequestId | None = None,
        per_client: bool = True,
    ) -> None:
        """Count a new session, opening, once :meth:`check` let it in. Synchronous, with no
        checkpoint between the check and the count: a burst cannot overshoot."""
        self.check(session.client, request_id=request_id, per_client=per_client)
        self._counted.add(session)
        self._by_client.setdefault(session.client, set()).add(session)

    def keep(self, session: RegisteredSession) -> None:
        """Make a claimed session findable by its id."""
        self._tables[session.over][session.id] = session

    def table(self, transport: TransportKind) -> dict[str, Any]:
        """The sessions of one transport that can be found by id (read it; change it through
        :meth:`keep` and :meth:`forget`)."""
        return self._tables[transport]

    def watch(self, session: RegisteredSession) -> None:
        """Expire ``session`` when it is due (see :class:`RegisteredSession`) and call its
        ``tick``: from now until it is forgotten. Call it once its deadline runs (its opening's
        :meth:`RegisteredSession.touch`), from a task of the app's nursery."""
        if session._look is None:
            self._schedule_look(session, min(session.due, session.tick(trio.current_time())))

    def _schedule_look(self, session: RegisteredSession, when: float) -> None:
        entry: _Look = [when, next(self._entries), session]
        session._look = entry
        heapq.heappush(self._schedule, entry)
        alarm = self._alarm
        if alarm is not None:
            if when < alarm.deadline:
                alarm.deadline = when
        elif not self._watching and self.nursery is not None:
            self._watching = True
            self.nursery.start_soon(self._watch_all)

    async def _watch_all(self) -> None:
        """Look at each session when its entry comes due; sleep until the next one."""
        schedule = self._schedule
        try:
            while True:
                now = trio.current_time()
                while schedule and schedule[0][0] <= now:
                    session = heapq.heappop(schedule)[2]
                    if session is None:  # forgotten since
                        self._stale -= 1
                        continue
                    session._look = None
                    when = session.look(now)
                    if when is not None:
                        self._schedule_look(session, when)
                self._alarm = alarm = trio.CancelScope(
                    deadline=schedule[0][0] if schedule else math.inf
                )
                with alarm:
                    await trio.sleep_forever()
                self._alarm = None
        finally:
            self._alarm = None
            self._watching = False

    def _unwatch(self, session: RegisteredSession) -> None:
        """Its entry is left in the schedule, stale, holding nothing; once the stale outnumber
        the live, the schedule is rebuilt without them (sessions that come and go do not pile
        up in it)."""
        entry = session._look
        if entry is None:
            return
        entry[2] = session._look = None
        self._stale += 1
        schedule = self._schedule
        if self._stale > 64 and self._stale * 2 > len(schedule):
            schedule[:] = [entry for entry in schedule if entry[2] is not None]
            heapq.heapify(schedule)
            self._stale = 0

    def forget(self, session: RegisteredSession) -> None:
        """Removal by identity: a session kept later under the same id stays."""
        self._unwatch(session)
        table = self._tables[session.over]
        if table.get(session.id) is session:
            del table[session.id]
        self._counted.discard(session)
        owned = self._by_client.get(session.client)
        if owned is not None:
            owned.discard(session)
            if not owned:
                del self._by_client[session.client]
        if self.on_forget is not None:
            self.on_forget(session)
        self.changed()

    def __len__(self) -> int:
        return len(self._counted)

    def sessions(self, transport: TransportKind | None = None) -> list[RegisteredSession]:
        """The counted sessions (of one transport)."""
        return [s for s in self._counted if transport is None or s.over is transport]

    def retry_after(self, sessions: Iterable[RegisteredSession]) -> tuple[bytes, bytes]:
        """``Retry-After``: the seconds until the first of ``sessions`` is due to expire; when
        none is (each has a request or a stream open), the time a session may stay unused."""
        now = trio.current_time()
        deadline = min((session.idle_deadline for session in sessions), default=math.inf)
        wait = (
            deadline - now if deadline != math.inf else self.options.limits.unused_session_timeout
        )
        return (b"retry-after", str(max(1, math.ceil(wait))).encode())

    # -- requests and the drain ----------------------------------------------------------------

    def request_started(self) -> None:
        self._serving += 1

    def request_ended(self) -> None:
        self._serving -= 1
        self.changed()

    def changed(self) -> None:
        """Something that a drain waits for may have happened: it looks again."""
        if self._waiter is not None:
            self._waiter.set()
            self._waiter = None

    @property
    def busy(self) -> bool:
        """Whether a request is in flight on any transport (GET streams do not count)."""
        return self._serving > 0 or not all(
            session.engine_idle for session in (*self._counted, *self.posts)
        )

    async def wait_idle(self) -> None:
        """Return once no request is in flight on any transport."""
        while self.busy:
            if self._waiter is None:
                self._waiter = trio.Event()
            await self._waiter.wait()

    async def end_requests(self) -> None:
        """End every request still running, on every transport, with a JSON-RPC error that
        tells its client to retry (-32603, :data:`CUT_BY_SHUTDOWN`), never a silent end; then
        wait (a little) until those errors are written."""
        error = ErrorObject.make(INTERNAL_ERROR, CUT_BY_SHUTDOWN, data={"retry": True})
        for session in [*self._counted, *self.posts]:
            engine = session.engine
            if engine is None:
                continue
            for request_id in engine.incoming():
                engine.cancel_incoming(request_id, "the server is shutting down", error=error)
        for request in list(self.alone):
            request.end_request("the server is shutting down", error)
        with trio.move_on_after(CUT_WRITE_GUARD):
            await self.wait_idle()

    async def shutdown(self, grace: float) -> None:
        """End every session (the lifespan is ending), and give them ``grace`` to wind down."""
        self.shutting_down = True
        sessions = list(self._counted)
        for session in sessions:
            session.close()
        with trio.move_on_after(grace):
            for session in sessions:
                await session.ended.wait()
