"""The circuit of one process's Redis: once Redis is known to be down, its users are refused at
once instead of each waiting out its own timeout.

Theory of operation (one :class:`Circuit` per :class:`~trio_mcp.redis._hub.RedisHub`, so per
process and URL):

- Closed (Redis answers): every command runs, bounded by its user's timeout, inside a cancel
  scope the circuit holds (:meth:`Circuit.hold`).
- A command that fails to reach Redis (a lost connection, no answer in time) is *noticed*: the
  task that met it pings Redis once, bounded by :attr:`probe_timeout` (unless a probe is running
  already). A ping that fails *opens* the circuit; one that answers leaves it closed (one slow
  script, one killed connection is not an outage).
- The watcher (:meth:`Circuit.watch`, run by the long-lived users of a hub: the bus's reader,
  the subscriber's listeners) pings every :attr:`interval`, so a Redis that hangs (stopped,
  partitioned) opens the circuit within ``interval + probe_timeout`` even when no command failed
  yet.
- Open: every command is refused at once (:class:`CircuitOpen`, raised to its user as a
  ``RedisUnavailable``, which each store turns into its own error: the HTTP app answers 503
  with ``Retry-After``), and the commands in flight when it opened are cancelled and refused
  the same way, so nobody waits out a timeout on a Redis known to be down.
- Half-open: the watcher's next ping that answers closes it; a command may ping first itself
  once :attr:`retry_after` seconds have passed. Without a watcher (a worker with stores but
  neither a bus nor a relay), any command pings first, one at a time (bounded by
  :attr:`probe_timeout`; the others are refused meanwhile). Either way every worker recovers
  by itself, within about :attr:`interval` of Redis answering again.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable

import trio

logger = logging.getLogger("trio_mcp.redis")

#: How long a ping may take before Redis counts as down, in seconds.
PROBE_TIMEOUT = 0.5
#: How often the watcher pings, in seconds.
PROBE_INTERVAL = 0.5
#: How long an open circuit refuses before a command may try again (and ``Retry-After``).
RETRY_AFTER = 1.0

Ping = Callable[[], Awaitable[object]]


class CircuitOpen(Exception):
    """A command refused because the circuit is open (the hub raises it as its
    ``RedisUnavailable``); its message says why and when to try again."""


class Circuit:
    """Whether one process counts its Redis at ``where`` as down (see the module docstring)."""

    def __init__(
        self,
        where: str,
        *,
        describe: Callable[[BaseException], str] = str,
        probe_timeout: float = PROBE_TIMEOUT,
        interval: float = PROBE_INTERVAL,
        retry_after: float = RETRY_AFTER,
    ) -> None:
        self.where = where
        self.describe = describe
        self.probe_timeout = probe_timeout
        self.interval = interval
        self.retry_after = retry_after
        #: Why it opened (None while closed).
        self.why: str | None = None
        #: When an open circuit lets a command try again (trio time).
        self._next_try = math.inf
        self._probing = False
        self._watched = False
        self._watcher_left = trio.Event()
        self._guards: set[trio.CancelScope] = set()
        #: How many times it opened (for tests and metrics).
        self.opened = 0

    def __repr__(self) -> str:
        state = "closed" if self.why is None else f"open ({self.why})"
        return f"<Circuit {self.where} {state}>"

    @property
    def open(self) -> bool:
        return self.why is not None

    def refusal(self) -> CircuitOpen:
        """The error of a command refused while the circuit is open."""
        return CircuitOpen(
            f"down ({self.why}); refused at once until it answers again "
            f"(retry in {self.retry_after:g} s)"
        )

    # -- commands --------------------------------------------------------------------------

    async def admit(self, ping: Ping) -> None:
        """Before a command: nothing while closed; refused while open, unless it is time to
        try again and no other command is trying (then this one pings first)."""
        if self.why is None:
            return
        if self._probing or (self._watched and trio.current_time() < self._next_try):
            raise self.refusal()
        if not await self.probe(ping):
            raise self.refusal()

    def hold(self, scope: trio.CancelScope) -> None:
        """A command's scope, entered: cancelled if the circuit opens while it runs (its
        holder tells that from its own deadline by :attr:`open`, and raises :meth:`refusal`)."""
        self._guards.add(scope)

    def let_go(self, scope: trio.CancelScope) -> None:
        """The command of a :meth:`hold` has ended."""
        self._guards.discard(scope)

    async def noticed(self, ping: Ping) -> None:
        """A command could not reach Redis: ping it once (unless someone is) to tell a Redis
        that is down from one failed command."""
        if self.why is None and not self._probing:
            await self.probe(ping)

    # -- probing ---------------------------------------------------------------------------

    async def probe(self, ping: Ping) -> bool:
        """Ping Redis once, within :attr:`probe_timeout`: close the circuit if it answers, open
        it if not; whether it answered."""
        self._probing = True
        try:
            with trio.fail_after(self.probe_timeout):
                await ping()
        except Exception as error:
            self.trip(self.describe(error))
            return False
        finally:
            self._probing = False
        self.reset()
        return True

    def trip(self, why: str) -> None:
        """Open (or keep open): refuse from now on, and cancel the commands in flight."""
        self._next_try = trio.current_time() + self.retry_after
        if self.why is not None:
            return
        self.why = why
        self.opened += 1
        logger.error(
            "Redis at %s is down (%s): its users are refused at once until it answers",
            self.where,
            why,
        )
        for scope in list(self._guards):
            scope.cancel()

    def reset(self) -> None:
        """Close: Redis answers again."""
        if self.why is None:
            return
        self.why = None
        self._next_try = math.inf
        logger.warning("Redis at %s answers again", self.where)

    async def watch(self, ping: Ping) -> None:
        """Ping every :attr:`interval` until cancelled, one watcher per circuit: a second one
        waits, and takes over when the first leaves."""
        while self._watched:
            await self._watcher_left.wait()
        self._watched = True
        try:
            while True:
                await trio.sleep(self.interval)
                if not self._probing:
                    await self.probe(ping)
        finally:
            self._watched = False
            self._watcher_left.set()
            self._watcher_left = trio.Event()
