"""``RedisRelay``: the relay on Redis pub/sub, a channel per node (``{prefix}node:{id}``) and
one for every node (``{prefix}nodes``).

Faults, as for the notification bus: Redis unreachable when the subscriber starts raises
:class:`RelayUnavailable` naming the URL (without its password); lost later, the subscriber
logs it and subscribes again with a backoff, and a send fails at once with
:class:`RelayUnavailable` until it is back.

coredis is imported only when a relay is used: a server without Redis never loads it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from ..http._relay import Deliver, RelayUnavailable
from ._link import reason as _reason
from ._link import redact

if TYPE_CHECKING:
    import coredis

logger = logging.getLogger("trio_mcp.relay")


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
        self.url = url
        self.prefix = prefix
        self.timeout = timeout
        self.reconnect_initial = reconnect_initial
        self.reconnect_max = reconnect_max
        self._clients: list[coredis.Redis[bytes]] = []

    def channel(self, node: str | None) -> str:
        return f"{self.prefix}nodes" if node is None else f"{self.prefix}node:{node}"

    def _client(self) -> coredis.Redis[bytes]:
        import coredis
        from coredis.retry import NoRetryPolicy

        return coredis.Redis.from_url(
            self.url,
            retry_policy=NoRetryPolicy(),
            connect_timeout=self.timeout,
            stream_timeout=None,
        )

    async def send(self, node: str | None, message: bytes) -> None:
        import coredis.exceptions

        if not self._clients:
            raise RelayUnavailable(f"the relay is not connected to Redis at {redact(self.url)}")
        try:
            with trio.fail_after(self.timeout):
                await self._clients[0].publish(self.channel(node), message)
        except trio.TooSlowError:
            raise RelayUnavailable(
                f"the relay's Redis at {redact(self.url)} did not answer in time"
            ) from None
        except (coredis.exceptions.RedisError, OSError) as exc:
            raise RelayUnavailable(
                f"the relay's Redis at {redact(self.url)} failed: {_reason(exc)}"
            ) from None

    async def subscribe(
        self,
        node: str,
        deliver: Deliver,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        from coredis.retry import NoRetryPolicy

        started = False
        delay = self.reconnect_initial
        while True:
            try:
                async with (
                    self._client() as client,
                    client.pubsub(
                        channels=[self.channel(node), self.channel(None)],
                        ignore_subscribe_messages=True,
                        retry_policy=NoRetryPolicy(),
                    ) as pubsub,
                ):
                    self._clients.append(client)
                    try:
                        if not started:
                            started = True
                            task_status.started()
                        else:
                            logger.warning("relay: subscribed again at %s", redact(self.url))
                        delay = self.reconnect_initial
                        async for message in pubsub:
                            _deliver(message, deliver)
                    finally:
                        self._clients.remove(client)
                problem = "the subscription ended"
            except BaseException as exc:
                if isinstance(exc, BaseExceptionGroup):
                    cancelled, _ = exc.split(trio.Cancelled)
                    if cancelled is not None:
                        raise cancelled from None
                if not isinstance(exc, Exception):
                    raise
                if not started:
                    raise RelayUnavailable(
                        f"the relay cannot reach Redis at {redact(self.url)}: {_reason(exc)}"
                    ) from None
                problem = _reason(exc)
            logger.error(
                "relay: lost Redis at %s (%s); subscribing again in %.1f s",
                redact(self.url),
                problem,
                delay,
            )
            await trio.sleep(delay)
            delay = min(delay * 2, self.reconnect_max)


def _deliver(message: Any, deliver: Deliver) -> None:
    if message.get("type") == "message" and isinstance(message.get("data"), bytes):
        deliver(message["data"])
