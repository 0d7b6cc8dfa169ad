"""``RedisBus``: the notification bus on Redis pub/sub.

Every worker listens to one channel, ``{prefix}notifications``, and publishes its events
there; Redis hands each message to every subscriber, the publisher's own included (the
:class:`~trio_mcp.server._bus.Notifier` skips its own). Pub/sub keeps nothing: a worker that
is not subscribed when an event is published misses it. For change notifications that is what
a listener can live with (a list change says "list again", and the next one supersedes it).
Task status changes travel here too (``task_changed`` events).

The bus publishes through the process's pool and listens on the process's one subscriber
(:mod:`trio_mcp.redis._hub`), which it shares with the stores and the relay.

Faults: Redis unreachable when the subscriber starts raises :class:`BusError` naming the URL
(without its password), so the app does not start half-working. Lost later: the subscriber
logs it and reconnects with an exponential backoff (capped), publishing fails with
:class:`BusError` until Redis answers again, and nothing else stops.
"""

from __future__ import annotations

import logging

import trio

from ..server._bus import BusError, BusEvent, Deliver
from ._client import check_url
from ._link import RedisLink, redact

logger = logging.getLogger("trio_mcp.bus")

#: How long connecting or one command may take before Redis counts as unreachable.
DEFAULT_TIMEOUT = 2.0
#: The subscriber's reconnection backoff: the first wait and the longest.
RECONNECT_INITIAL = 0.1
RECONNECT_MAX = 5.0


class RedisBus:
    """The notification bus on Redis pub/sub: ``Server(bus=RedisBus("redis://host:6379/0"))``.

    ``prefix`` namespaces the channel (``{prefix}notifications``), so several servers (or
    several deployments) can share one Redis: only workers with the same prefix hear each
    other. ``timeout`` bounds connecting and each publish.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "trio_mcp:",
        timeout: float = DEFAULT_TIMEOUT,
        reconnect_initial: float = RECONNECT_INITIAL,
        reconnect_max: float = RECONNECT_MAX,
    ) -> None:
        check_url(url)
        self.url = url
        self.channel = f"{prefix}notifications"
        self.timeout = timeout
        self.reconnect_initial = reconnect_initial
        self.reconnect_max = reconnect_max
        #: The links of the running subscribers; publish uses one.
        self._links: list[RedisLink] = []

    def __repr__(self) -> str:
        return f"RedisBus({redact(self.url)!r}, channel={self.channel!r})"

    @property
    def connected(self) -> bool:
        """Whether this process's subscriber to the bus's Redis is connected."""
        return any(link.subscribed for link in self._links)

    async def probe(self) -> None:
        """Whether its Redis answers now and this process's subscriber is connected (for a
        readiness check: while it is not, notifications of other workers are missed)."""
        if not self._links:
            raise BusError(f"the notification bus's Redis at {redact(self.url)} is not started")
        link = self._links[0]
        await link.probe()
        if not link.subscribed:
            raise BusError(
                f"the notification bus's subscriber to {redact(self.url)} is not connected"
            )

    async def publish(self, event: BusEvent) -> None:
        if not self._links:
            raise BusError(f"the notification bus's Redis at {redact(self.url)} is not started")
        link = self._links[0]
        async with link.errors():
            await link.client.publish(self.channel, event.encode())

    async def subscribe(
        self, deliver: Deliver, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        link = RedisLink(
            self.url, what="the notification bus", unavailable=BusError, timeout=self.timeout
        )
        await link.start()
        self._links.append(link)
        try:
            await link.listen(
                [self.channel],
                lambda data: self._on_message(data, deliver),
                reconnect=(self.reconnect_initial, self.reconnect_max),
                task_status=task_status,
            )
        finally:
            self._links.remove(link)
            with trio.CancelScope(shield=True):
                await link.aclose()

    def _on_message(self, data: bytes, deliver: Deliver) -> None:
        try:
            event = BusEvent.decode(data)
        except ValueError as exc:
            logger.warning("notification bus: ignored a message on %s: %s", self.channel, exc)
            return
        deliver(event)
