"""``RedisRelay``: the relay on Redis pub/sub, a channel per node (``{prefix}node:{id}``) and
one for every node (``{prefix}nodes``). On a Redis Cluster it is sharded pub/sub (``SPUBLISH``,
Redis 7): a plain ``PUBLISH`` there counts only the subscribers of the node that took it, a
sharded one every subscriber of its channel, which all read it from the primary of its shard.

It sends through the process's pool and listens on the process's one subscriber
(:mod:`trio_mcp.redis._hub`), which it shares with the stores and the bus.

Faults, as for the notification bus: Redis unreachable when the subscriber starts raises
:class:`RelayUnavailable` naming the URL (without its password); lost later, the subscriber
logs it and subscribes again with a backoff, and a send fails with :class:`RelayUnavailable`
until Redis answers again.
"""

from __future__ import annotations

import trio

from ..http._relay import Deliver, RelayUnavailable
from ._client import parse
from ._link import RedisLink, redact


class RedisRelay:
    """A :class:`Relay` on Redis pub/sub, shared by the workers with the same ``prefix``."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "trio_mcp:",
        timeout: float = 2.0,
        reconnect_initial: float = 0.1,
        reconnect_max: float = 5.0,
    ) -> None:
        #: A cluster's channels are sharded (the hub's subscriber says SSUBSCRIBE there).
        self._sharded = parse(url).kind == "cluster"
        self.url = url
        self.prefix = prefix
        self.timeout = timeout
        self.reconnect_initial = reconnect_initial
        self.reconnect_max = reconnect_max
        #: The links of the running subscribers; a send uses one.
        self._links: list[RedisLink] = []

    def channel(self, node: str | None) -> str:
        return f"{self.prefix}nodes" if node is None else f"{self.prefix}node:{node}"

    async def probe(self) -> None:
        """Whether its Redis answers now and this process's subscriber is connected (for a
        readiness check)."""
        if not self._links:
            raise RelayUnavailable(f"the relay's Redis at {redact(self.url)} is not started")
        link = self._links[0]
        await link.probe()
        if not link.subscribed:
            raise RelayUnavailable(f"the relay's subscriber to {redact(self.url)} is not connected")

    async def send(self, node: str | None, message: bytes) -> int | None:
        if not self._links:
            raise RelayUnavailable(f"the relay's Redis at {redact(self.url)} is not started")
        link = self._links[0]
        reached: int | None = None
        channel = self.channel(node)
        async with link.errors():
            # Either answers how many subscribers got it: one per worker's subscriber.
            if self._sharded:
                reached = await link.client.spublish(channel, message)
            else:
                reached = await link.client.publish(channel, message)
        return reached

    def hearing(self) -> int | None:
        """Which connection of this process's subscriber carries the channel for every node
        now; None while it is down (or not started)."""
        if not self._links:
            return None
        return self._links[0].hearing(self.channel(None))

    async def subscribe(
        self,
        node: str,
        deliver: Deliver,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        link = self._link()
        await link.start()
        self._links.append(link)
        try:
            await link.listen(
                [self.channel(node), self.channel(None)],
                deliver,
                reconnect=(self.reconnect_initial, self.reconnect_max),
                task_status=task_status,
            )
        finally:
            self._links.remove(link)
            with trio.CancelScope(shield=True):
                await link.aclose()

    def _link(self) -> RedisLink:
        return RedisLink(
            self.url, what="the relay", unavailable=RelayUnavailable, timeout=self.timeout
        )
