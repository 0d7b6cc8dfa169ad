"""``RedisBus``: the notification bus on a Redis stream, so that no worker misses an event.

Theory of operation:

- Every event is an entry of one Redis stream, ``notifications_key(prefix)``, added by a
  small script (one round trip, on the process's pool) with ``XADD ... MAXLEN ~ retention``:
  the stream keeps about the last ``retention`` events, and no more. Each entry carries its
  number ``n`` (one more than the entry before it) and its generation ``g`` (the id of the
  first entry of the stream as it exists now), so a reader can tell a gap from a stream that
  was trimmed past it, and a stream that is gone (a Redis restarted without persistence, or
  flushed) from one that goes on.
- Every worker reads the stream from its own position (the id of the last entry it read) with
  ``XREAD BLOCK`` on a connection of its own (:meth:`RedisHub.blocking_client`), so a worker
  whose connection is lost (killed, a Redis restart, a network cut) reads, once it is back,
  everything it missed, in order, as long as the stream still holds it.
- A reader that still missed something (its position fell out of the retention, the stream
  is gone or was rolled back) is told: it delivers a ``resync`` event (:meth:`BusEvent.resync`),
  and the server sends its clients every list-changed notification (list-changed semantics
  allow it: "list again"), rather than leaving them stale.
- Publishing runs on the pool, not on the reader's connection: a lost reader never fails a
  publish. A publish that fails (Redis down) is kept by the :class:`Notifier` and retried.

Why a stream, not pub/sub plus a stream: pub/sub keeps nothing, so it could only be a wake-up,
and the stream would still have to be read after every wake-up and after every resubscription
(two round trips per event and a window to reason about). ``XREAD BLOCK`` from a position is
the wake-up and the catch-up in one command, at the cost of one more connection per process.

Faults: Redis unreachable when the reader starts raises :class:`BusError` naming the URL
(without its password), so the app does not start half-working. Lost later: the reader logs it
and reconnects with an exponential backoff (capped), catching up from its position.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ..server._bus import BusError, BusEvent, Deliver
from ._client import check_url
from ._hub import RedisUnavailable, is_lost, reason
from ._link import RedisLink, redact

if TYPE_CHECKING:
    from ._client import Client

logger = logging.getLogger("trio_mcp.bus")

#: How long connecting or one command may take before Redis counts as unreachable.
DEFAULT_TIMEOUT = 2.0
#: The reader's reconnection backoff: the first wait and the longest.
RECONNECT_INITIAL = 0.1
RECONNECT_MAX = 5.0
#: About how many events the stream keeps (a reader away for longer misses, and resyncs).
DEFAULT_RETENTION = 10_000
#: How long one ``XREAD BLOCK`` waits for an event, in seconds (then it asks again).
BLOCK = 1.0
#: At most this many events per read.
BATCH = 500

# One round trip per event: number it after the last one, and add it, trimming the oldest.
_PUBLISH = """
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
local n, g = 1, ''
if last then
  local fields = last[2]
  for i = 1, #fields, 2 do
    if fields[i] == 'n' then
      n = tonumber(fields[i + 1]) + 1
    elseif fields[i] == 'g' then
      g = fields[i + 1]
    end
  end
  if g == '' then
    g = last[1]
  end
end
return redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 'n', n, 'g', g, 'e', ARGV[1])
"""


def notifications_key(prefix: str) -> str:
    """The stream of a bus's events (the one key the bus uses)."""
    return f"{prefix}notifications"


@attrs.frozen
class Position:
    """Where a reader is: the id of the last entry it read, that entry's number, and the
    stream's generation (None: the stream did not exist when it started; what comes first
    must be entry 1)."""

    id: str = "0-0"
    n: int = 0
    generation: str | None = None


def _field(fields: Mapping[Any, Any], name: bytes) -> bytes:
    value = fields.get(name, b"")
    return value if isinstance(value, bytes) else str(value).encode()


def _entry(entry: Any) -> tuple[Position, bytes]:
    """An entry of the stream, as the position just after it and its event."""
    identifier = entry.identifier
    if isinstance(identifier, bytes):
        identifier = identifier.decode()
    fields = entry.field_values
    try:
        n = int(_field(fields, b"n"))
    except ValueError:
        n = 0
    generation = _field(fields, b"g").decode() or identifier
    return Position(identifier, n, generation), _field(fields, b"e")


class RedisBus:
    """The notification bus on a Redis stream: ``Server(bus=RedisBus("redis://host:6379/0"))``.

    ``prefix`` namespaces its key (:func:`notifications_key`), so several servers (or several
    deployments) can share one Redis: only workers with the same prefix hear each other.
    ``retention`` is about how many events the stream keeps for a reader that was away;
    ``timeout`` bounds connecting and each publish.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "trio_mcp:",
        timeout: float = DEFAULT_TIMEOUT,
        reconnect_initial: float = RECONNECT_INITIAL,
        reconnect_max: float = RECONNECT_MAX,
        retention: int = DEFAULT_RETENTION,
        block: float = BLOCK,
    ) -> None:
        check_url(url)
        if retention < 1:
            raise ValueError("retention must be a positive integer")
        self.url = url
        self.key = notifications_key(prefix)
        self.timeout = timeout
        self.reconnect_initial = reconnect_initial
        self.reconnect_max = reconnect_max
        self.retention = retention
        self.block = block
        #: The links of the running readers; publish uses one.
        self._links: list[RedisLink] = []
        #: Whether the reader is connected (and caught up at least once since).
        self._reading = False
        #: How many times a reader found it had missed events (and delivered a resync).
        self.resyncs = 0

    def __repr__(self) -> str:
        return f"RedisBus({redact(self.url)!r}, key={self.key!r})"

    @property
    def connected(self) -> bool:
        """Whether this process's reader of the bus's stream is connected."""
        return self._reading

    async def probe(self) -> None:
        """Whether its Redis answers now and this process's reader is connected (for a
        readiness check: while it is not, other workers' events wait for it)."""
        if not self._links:
            raise BusError(f"the notification bus's Redis at {redact(self.url)} is not started")
        await self._links[0].probe()
        if not self._reading:
            raise BusError(f"the notification bus's reader of {redact(self.url)} is not connected")

    async def publish(self, event: BusEvent) -> None:
        if not self._links:
            raise BusError(f"the notification bus's Redis at {redact(self.url)} is not started")
        link = self._links[0]
        async with link.errors():
            await link.client.eval(_PUBLISH, keys=[self.key], args=[event.encode(), self.retention])

    async def subscribe(
        self, deliver: Deliver, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        link = RedisLink(
            self.url, what="the notification bus", unavailable=BusError, timeout=self.timeout
        )
        await link.start()
        self._links.append(link)
        try:
            async with link.watching():
                await self._read(link, deliver, task_status)
        finally:
            self._links.remove(link)
            with trio.CancelScope(shield=True):
                await link.aclose()

    # -- the reader --------------------------------------------------------------------------

    async def _read(
        self, link: RedisLink, deliver: Deliver, task_status: trio.TaskStatus[None]
    ) -> None:
        """Read the stream from this worker's position until cancelled, reconnecting when
        lost; started once connected."""
        position: Position | None = None
        delay = self.reconnect_initial
        started = again = False
        while True:
            try:
                async with link.blocking_client("bus") as client:
                    with trio.fail_after(self.timeout):
                        position = await self._resume(client, position, deliver)
                    if not started:
                        started = True
                        task_status.started()
                    elif again:
                        logger.warning("notification bus: back at %s", link.where)
                    self._reading = True
                    delay = self.reconnect_initial
                    while True:
                        position = await self._next(client, position, deliver)
            except Exception as exc:
                self._reading = False
                if not isinstance(exc, RedisUnavailable) and not is_lost(exc):
                    raise
                if not started:
                    raise BusError(
                        f"the notification bus's Redis at {link.where} cannot be reached: "
                        f"{exc.reason if isinstance(exc, RedisUnavailable) else reason(exc)}"
                    ) from None
                problem = reason(exc)
            finally:
                self._reading = False
            logger.error(
                "notification bus: lost Redis at %s (%s); reading again in %.1f s, from "
                "where this worker stopped",
                link.where,
                problem,
                delay,
            )
            await trio.sleep(delay)
            delay = min(delay * 2, self.reconnect_max)
            again = True

    async def _resume(
        self, client: Client, position: Position | None, deliver: Deliver
    ) -> Position:
        """Where to read from on (re)connecting: at the first connection, after the stream's
        last entry; later, where this worker stopped, unless the stream is gone or rolled
        back (then resync, and read what the stream holds now)."""
        [last] = await client.xrevrange(self.key, "+", "-", count=1) or [None]
        tail = None if last is None else _entry(last)[0]
        if position is None:
            return Position() if tail is None else tail
        if position.generation is None:
            return position  # started on no stream: whatever comes is checked as it comes
        if tail is None or tail.generation != position.generation:
            self._resync(deliver, "the stream is gone (Redis restarted without it, or flushed)")
            return Position()
        if tail.n < position.n:
            self._resync(deliver, "the stream was rolled back (Redis restored an older copy)")
            return tail
        return position

    async def _next(self, client: Client, position: Position, deliver: Deliver) -> Position:
        """One ``XREAD BLOCK`` from ``position``; what it brings, delivered in order."""
        with trio.fail_after(self.block + self.timeout):
            answer = await client.xread(
                {self.key: position.id}, count=BATCH, block=int(self.block * 1000)
            )
        for entries in (answer or {}).values():
            for entry in entries:
                after, data = _entry(entry)
                expected = position.n + 1
                if after.generation != position.generation and position.generation is not None:
                    self._resync(deliver, "the stream is a new one")
                elif after.n != expected:
                    self._resync(
                        deliver,
                        f"events {expected} to {after.n - 1} are no longer kept (a reader "
                        f"away past the retention of about {self.retention} events)",
                    )
                position = after
                self._on_message(data, deliver)
        return position

    def _resync(self, deliver: Deliver, why: str) -> None:
        self.resyncs += 1
        logger.warning("notification bus: this worker missed events: %s; resyncing", why)
        deliver(BusEvent.resync())

    def _on_message(self, data: bytes, deliver: Deliver) -> None:
        try:
            event = BusEvent.decode(data)
        except ValueError as exc:
            logger.warning("notification bus: ignored an entry of %s: %s", self.key, exc)
            return
        deliver(event)
