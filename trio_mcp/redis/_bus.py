"""``RedisBus``: the notification bus on Redis pub/sub (coredis, which runs under Trio).

Every worker subscribes to one channel, ``{prefix}notifications``, and publishes its events
there; Redis hands each message to every subscriber, the publisher's own included (the
:class:`~trio_mcp.server._bus.Notifier` skips its own). Pub/sub keeps nothing: a worker that
is not subscribed when an event is published misses it. For change notifications that is what
a listener can live with (a list change says "list again", and the next one supersedes it).

Faults: Redis unreachable when the subscriber starts raises :class:`BusError` naming the URL
(without its password), so the app does not start half-working. Lost later: the subscriber
logs it and reconnects with an exponential backoff (capped), publishing fails at once with
:class:`BusError` until it is back, and nothing else stops.

This module is the only one that imports coredis (the ``redis`` extra); ``import trio_mcp``
never loads it.
"""

from __future__ import annotations

import logging
from typing import Any

import coredis
import trio
from coredis.retry import NoRetryPolicy

from ..server._bus import BusError, BusEvent, Deliver
from ._link import redact

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
        if not url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(
                f"a Redis URL starts with redis://, rediss:// or unix://, not {redact(url)!r}"
            )
        self.url = url
        self.channel = f"{prefix}notifications"
        self.timeout = timeout
        self.reconnect_initial = reconnect_initial
        self.reconnect_max = reconnect_max
        #: The clients of the running subscribers (connected ones only); publish uses one.
        self._clients: list[coredis.Redis[bytes]] = []

    def __repr__(self) -> str:
        return f"RedisBus({redact(self.url)!r}, channel={self.channel!r})"

    @property
    def connected(self) -> bool:
        """Whether a subscriber is connected (and a publish can be tried)."""
        return bool(self._clients)

    def _client(self) -> coredis.Redis[bytes]:
        return coredis.Redis.from_url(
            self.url,
            retry_policy=NoRetryPolicy(),
            connect_timeout=self.timeout,
            stream_timeout=None,
        )

    async def publish(self, event: BusEvent) -> None:
        if not self._clients:
            raise BusError(f"not connected to Redis at {redact(self.url)}")
        client = self._clients[0]
        try:
            with trio.fail_after(self.timeout):
                await client.publish(self.channel, event.encode())
        except (trio.TooSlowError, TimeoutError) as exc:
            raise BusError(f"Redis at {redact(self.url)} did not answer in time") from exc
        except (coredis.exceptions.RedisError, OSError) as exc:
            raise BusError(f"publishing to Redis at {redact(self.url)} failed: {exc}") from exc

    async def subscribe(
        self, deliver: Deliver, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        started = False
        delay = self.reconnect_initial
        while True:
            try:
                async with (
                    self._client() as client,
                    client.pubsub(
                        channels=[self.channel],
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
                            logger.warning(
                                "notification bus: subscribed again at %s", redact(self.url)
                            )
                        delay = self.reconnect_initial
                        async for message in pubsub:
                            self._on_message(message, deliver)
                    finally:
                        self._clients.remove(client)
                problem: str = "the subscription ended"
            except BaseException as exc:
                if isinstance(exc, BaseExceptionGroup):
                    # Cancelled from outside: coredis's cleanup may add an error of a
                    # connection already closed to the group; the cancellation is what counts.
                    cancelled, _ = exc.split(trio.Cancelled)
                    if cancelled is not None:
                        raise cancelled from None
                if not isinstance(exc, Exception):
                    raise
                # Whatever the client raised (a connection error, a group of them from its
                # task group): the connection is gone, and so is the subscription.
                if not started:
                    raise BusError(
                        f"cannot reach Redis at {redact(self.url)}: {_reason(exc)}"
                    ) from None
                problem = _reason(exc)
            logger.error(
                "notification bus: lost Redis at %s (%s); reconnecting in %.1f s",
                redact(self.url),
                problem,
                delay,
            )
            await trio.sleep(delay)
            delay = min(delay * 2, self.reconnect_max)

    def _on_message(self, message: Any, deliver: Deliver) -> None:
        if message.get("type") != "message":
            return
        try:
            event = BusEvent.decode(message["data"])
        except ValueError as exc:
            logger.warning("notification bus: ignored a message on %s: %s", self.channel, exc)
            return
        deliver(event)


def _reason(exc: BaseException) -> str:
    """The first leaf of ``exc`` (an exception group's), in words."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__
