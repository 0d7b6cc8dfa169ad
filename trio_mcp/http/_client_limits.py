"""The limits of the app that a fleet shares: what one client (its principal, else its address)
may hold and do across every worker, and what one session may run across its copies.

In one process the registry counts sessions (``max_sessions_per_client``) and a session's
requests (``max_requests_per_session``) by itself, with no checkpoint between the check and the
count. With a shared limit store (``ScaleOut(limit_store=...)``) they are counted across the
fleet too, as leases in the store (:class:`~trio_mcp.http._limit_store.LimitStore`):

- each session a client opens here takes a lease under ``sessions:<client>``;
- with ``ScaleOut(share_request_limits=True)``, each request of a session takes one under
  ``inflight:<session id>`` (so the copies of a session on several workers share
  ``max_requests_per_session``), and each modern request one under ``requests:<client>``
  (``max_requests_per_client``); that costs two round trips to the store per request, so it is
  a choice;

This worker renews its leases every :data:`HEARTBEAT` seconds; a lease lapses after three, so
the sessions of a worker that died stop counting by themselves. A lease is given back (in the
background, by :meth:`ClientLimits.run`) when what holds it ends.

Whatever the store, two more limits apply to every request: ``max_requests_per_client`` modern
requests of one client running at once (counted in this process unless shared), and the rate
limits (``Limits.rate_limit``, ``Limits.tool_rate_limit``): token buckets in the store, per
client, and per client and tool for ``tools/call``. A refusal is 429 with ``Retry-After`` and a
JSON-RPC error: -32000 with ``data: {"retryAfterMs": ...}`` for a rate limit (as
``RateLimitMiddleware``'s), -32600 for a count.

A shared store that cannot be reached does not stop the app: the counts of this process still
hold, and the failure is logged once until the store answers again.
"""

from __future__ import annotations

import functools
import logging
import math
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from ..protocol._jsonrpc import RATE_LIMITED, ErrorObject, RequestId
from ._asgi import HttpError, too_many_in_flight
from ._limit_store import LimitStore, MemoryLimitStore, retry_after_seconds

if TYPE_CHECKING:
    from ._options import HttpOptions, RateLimit
    from ._sessions import RegisteredSession, SessionRegistry

logger = logging.getLogger("trio_mcp.http")

#: How often a worker renews the leases it holds in a shared store (seconds); they lapse after
#: three times as long.
HEARTBEAT = 10.0
#: Methods no rate limit counts: opening a session, a liveness check, discovery.
RATE_EXEMPT = frozenset({"initialize", "ping", "server/discover"})

#: A lease held: the counter's name and the lease's id.
Lease = tuple[str, str]


class ClientLimits:
    """The per-client and fleet-wide limits of one app (see the module's docstring)."""

    def __init__(self, options: HttpOptions, registry: SessionRegistry) -> None:
        self.options = options
        self.registry = registry
        given = options.scale_out.limit_store
        #: Whether counts are shared with other workers (a store was given).
        self.shared = given is not None
        self.store: LimitStore = given if given is not None else MemoryLimitStore()
        self.share_requests = self.shared and options.scale_out.share_request_limits
        self.heartbeat = HEARTBEAT
        #: The leases this worker holds, by counter, renewed at every heartbeat.
        self._held: dict[str, set[str]] = {}
        #: The leases to give back, and what wakes the task that does.
        self._released: list[Lease] = []
        self._wake = trio.Event()
        #: Modern requests running here, by client.
        self._requests: dict[str, int] = {}
        self._failing = False

    @property
    def lapse(self) -> float:
        return 3 * self.heartbeat

    # -- lifetime --------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Give leases back as they end and renew those held, until cancelled (with a shared
        store only; the app's nursery runs it)."""
        task_status.started()
        next_beat = trio.current_time() + self.heartbeat
        while True:
            with trio.move_on_at(next_beat):
                await self._wake.wait()
            self._wake = trio.Event()
            released, self._released = self._released, []
            for name, lease in released:
                await self._call(self.store.release(name, lease))
            if trio.current_time() >= next_beat:
                next_beat = trio.current_time() + self.heartbeat
                for name, leases in list(self._held.items()):
                    await self._call(self.store.renew(name, list(leases), self.lapse))

    # -- sessions --------------------------------------------------------------------------------

    async def open_session(
        self, session: RegisteredSession, *, request_id: RequestId | None = None
    ) -> None:
        """A session the registry let in here, counted for its client across the fleet: 429
        past ``max_sessions_per_client`` there (the caller forgets the session)."""
        if not self.shared:
            return
        name = "sessions:" + session.client
        lease = secrets.token_hex(8)
        limit = self.options.limits.max_sessions_per_client
        taken = await self._call(self.store.acquire(name, lease, limit, self.lapse))
        if taken is False:
            owned = [s for s in self.registry.sessions() if s.client == session.client]
            raise HttpError(
                429,
                f"Too Many Requests: this client already has {limit} sessions across the "
                "servers, the limit; end one, or retry later",
                request_id=request_id,
                headers=[self.registry.retry_after(owned)],
            )
        if taken is not None:  # None: the store did not answer, nothing was taken
            session.lease = (name, lease)
            self._hold(name, lease)

    def session_ended(self, session: RegisteredSession) -> None:
        """The registry forgot a session: its lease, if it took one, is given back."""
        if session.lease is not None:
            self.drop(session.lease)
            session.lease = None

    # -- requests --------------------------------------------------------------------------------

    async def check_rate(
        self,
        client: str,
        method: str,
        params: dict[str, Any] | None,
        request_id: RequestId | None,
    ) -> None:
        """Take a token of the client's rate limit, and of its tool's for ``tools/call``: 429
        with ``Retry-After`` (and -32000 with ``retryAfterMs``) when a bucket is empty."""
        limits = self.options.limits
        if method in RATE_EXEMPT:
            return
        if limits.rate_limit is not None:
            await self._take("rate:" + client, limits.rate_limit, "requests", request_id)
        if limits.tool_rate_limit is not None and method == "tools/call":
            tool = params.get("name") if params else None
            if isinstance(tool, str):
                name = f"tool-rate:{client}\x00{tool}"
                await self._take(name, limits.tool_rate_limit, f"calls of {tool!r}", request_id)

    async def _take(
        self, name: str, limit: RateLimit, what: str, request_id: RequestId | None
    ) -> None:
        wait = await self._call(self.store.take(name, limit.rate, limit.burst))
        if not wait:
            return
        wait_ms = math.ceil(wait * 1000)
        error = ErrorObject.make(
            RATE_LIMITED,
            f"Rate limit exceeded: at most {limit.burst} {what} at once and {limit.rate:g} a "
            f"second; retry in {wait_ms} ms",
            data={"retryAfterMs": wait_ms},
        )
        raise HttpError(
            429,
            error,
            request_id=request_id,
            headers=[(b"retry-after", str(retry_after_seconds(wait)).encode())],
        )

    @property
    def counts_here(self) -> bool:
        """Whether a modern request's limits are all counted in this process, with no call to
        a store: no rate limit and no shared request count (the usual single process). Then
        :meth:`start_request_here` takes the count without a checkpoint."""
        limits = self.options.limits
        return (
            not self.share_requests and limits.rate_limit is None and limits.tool_rate_limit is None
        )

    def start_request_here(self, client: str, request_id: RequestId) -> Callable[[], None]:
        """:meth:`start_request` when :attr:`counts_here`: counted with no checkpoint (429 past
        ``max_requests_per_client``); returns what ends it."""
        limit = self.options.limits.max_requests_per_client
        running = self._requests.get(client, 0)
        if running >= limit:
            raise too_many_in_flight(limit, request_id, whose="client")
        self._requests[client] = running + 1
        return functools.partial(self._end_request, client)

    async def start_request(self, client: str, request_id: RequestId) -> Callable[[], None]:
        """A modern request of ``client`` begins: 429 past ``max_requests_per_client`` (in this
        process, and across the fleet with shared request limits); returns what ends it."""
        limit = self.options.limits.max_requests_per_client
        running = self._requests.get(client, 0)
        if running >= limit:
            raise too_many_in_flight(limit, request_id, whose="client")
        self._requests[client] = running + 1  # no checkpoint since the check
        lease: Lease | None = None
        try:
            if self.share_requests:
                lease = await self._lease("requests:" + client, limit)
                if lease is None:
                    raise too_many_in_flight(limit, request_id, across=True, whose="client")
        except BaseException:
            self._end_request(client)
            raise

        def ended() -> None:
            self._end_request(client)
            if lease is not None and lease[1]:
                self.drop(lease)

        return ended

    async def start_session_request(self, session_id: str, request_id: RequestId) -> Lease | None:
        """A request of a session begins: with shared request limits, it takes a lease of the
        session's ``max_requests_per_session`` across its copies (429 past it); the lease to
        :meth:`drop` when it ends, or None."""
        if not self.share_requests:
            return None
        limit = self.options.limits.max_requests_per_session
        lease = await self._lease("inflight:" + session_id, limit)
        if lease is None:
            raise too_many_in_flight(limit, request_id, across=True)
        return lease if lease[1] else None

    def _end_request(self, client: str) -> None:
        running = self._requests[client] - 1
        if running:
            self._requests[client] = running
        else:
            del self._requests[client]

    # -- leases ----------------------------------------------------------------------------------

    async def _lease(self, name: str, cap: int) -> Lease | None:
        """A lease under ``name``, None past ``cap``; a lease with an empty id when the store
        did not answer (nothing taken, nothing to give back)."""
        lease = secrets.token_hex(8)
        taken = await self._call(self.store.acquire(name, lease, cap, self.lapse))
        if taken is None:
            return (name, "")
        if not taken:
            return None
        self._hold(name, lease)
        return (name, lease)

    def _hold(self, name: str, lease: str) -> None:
        self._held.setdefault(name, set()).add(lease)

    def drop(self, lease: Lease) -> None:
        """Give a lease back (synchronously forgotten here, released in the background)."""
        name, lease_id = lease
        held = self._held.get(name)
        if held is None or lease_id not in held:
            return
        held.discard(lease_id)
        if not held:
            del self._held[name]
        self._released.append(lease)
        self._wake.set()

    async def _call(self, call: Any) -> Any:
        """Await a call of the store; when it cannot answer, log it (once until it answers
        again) and return None, so this process's own counts are all that hold meanwhile."""
        try:
            result = await call
        except Exception as error:
            if not self._failing:
                logger.error("the limit store failed (only this process's limits hold): %s", error)
                self._failing = True
            return None
        if self._failing:
            logger.warning("the limit store answers again")
            self._failing = False
        return result
