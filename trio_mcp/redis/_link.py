"""One user's link to the process's Redis hub: its lease, its faults as the user's own error.

Every store, the bus and the relay hold one :class:`RedisLink`; what they share (the pool, the
subscriber) is the process's :class:`~trio_mcp.redis._hub.RedisHub` for their URL.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, ClassVar

import trio

from ._circuit import Circuit
from ._client import redact
from ._hub import (
    Deliver,
    RedisHub,
    RedisUnavailable,
    RedisUnsuitable,
    hub_for,
    reason,
    talking,
)

if TYPE_CHECKING:
    from ._client import Client

__all__ = ["LinkedStore", "RedisLink", "milliseconds", "reason", "redact"]


class RedisLink:
    """One user's lease of the process's Redis pool (and subscriber) at ``url``: started, used
    and closed by that user.

    ``what`` names the user in messages ("the event store"); ``unavailable`` is its error for a
    Redis it cannot talk to, raised naming the URL without its password; ``timeout`` bounds the
    start and each use of :meth:`errors`.
    """

    def __init__(
        self, url: str, *, what: str, unavailable: type[Exception], timeout: float
    ) -> None:
        self.url = url
        self.what = what
        self.unavailable = unavailable
        self.timeout = timeout
        self._hub: RedisHub | None = None
        self._owner = False

    @property
    def where(self) -> str:
        return redact(self.url)

    @property
    def started(self) -> bool:
        return self._hub is not None

    @property
    def subscribed(self) -> bool:
        """Whether the process's subscriber to this Redis is connected."""
        return self._hub is not None and self._hub.subscribed

    def hearing(self, channel: str) -> int | None:
        """See :meth:`RedisHub.hearing` (None before the start)."""
        return None if self._hub is None else self._hub.hearing(channel)

    @property
    def client(self) -> Client:
        if self._hub is None:
            raise self.unavailable(f"{self.what}'s Redis at {self.where} is not started")
        try:
            return self._hub.client
        except RedisUnavailable as error:
            raise self._error("failed", error) from None

    async def start(self, ready: Callable[[Client], Awaitable[object]] | None = None) -> None:
        """Take a lease of the pool (opening it if this is the first) and await
        ``ready(client)`` if given, within ``timeout``; the user's unavailable error if any of
        it fails."""
        hub = hub_for(self.url)
        try:
            owner = await hub.acquire(self.timeout)
        except RedisUnavailable as error:
            raise self._error("cannot be reached", error) from None
        if ready is not None:
            try:
                async with talking(self.url, self.timeout):
                    await ready(hub.client)
            except BaseException as error:
                with trio.CancelScope(shield=True):
                    await hub.release(owner)
                if isinstance(error, RedisUnavailable):
                    raise self._error("cannot be reached", error) from None
                raise
        self._hub, self._owner = hub, owner

    async def probe(self) -> None:
        """Whether Redis answers (and is still a primary), within ``timeout``; the user's
        unavailable error if not. What a readiness check asks."""
        if self._hub is None:
            raise self.unavailable(f"{self.what}'s Redis at {self.where} is not started")
        try:
            await self._hub.probe(self.timeout)
        except RedisUnavailable as error:
            raise self._error("failed", error) from None

    async def aclose(self) -> None:
        """Give the lease back (in the task that started the link): the pool closes with the
        last lease of the task that opened it."""
        if self._hub is None:
            return
        hub, self._hub = self._hub, None
        await hub.release(self._owner)

    def errors(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Any failure to talk to Redis, as the user's unavailable error, bounded in time;
        through the hub's circuit once started (refused at once while Redis is down)."""
        if self._hub is None:
            return self._unstarted()
        return self._hub.command(self.timeout, self._failed)

    @contextlib.asynccontextmanager
    async def _unstarted(self) -> AsyncIterator[None]:
        """:meth:`errors` before the start: no circuit yet."""
        try:
            async with talking(self.url, self.timeout):
                yield
        except RedisUnavailable as error:
            raise self._failed(error) from None

    def _failed(self, error: RedisUnavailable) -> Exception:
        return self._error("failed", error)

    @property
    def circuit(self) -> Circuit | None:
        """The circuit of the process's Redis (None until started)."""
        return None if self._hub is None else self._hub.circuit

    async def watch(self) -> None:
        """Ping Redis periodically until cancelled, so that the circuit opens on a hung Redis
        before a command waits on it (see :meth:`RedisHub.watch`)."""
        if self._hub is None:
            raise self.unavailable(f"{self.what}'s Redis at {self.where} is not started")
        await self._hub.watch()

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[None]:
        """The block runs while :meth:`watch` does (a long-lived user's service); an error of
        the block comes out as itself, not in a group."""
        hub = self._hub
        if hub is None:
            raise self.unavailable(f"{self.what}'s Redis at {self.where} is not started")
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(hub.watch)
                try:
                    yield
                finally:
                    nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            errors, _ = group.split(Exception)
            if errors is not None and len(errors.exceptions) == 1:
                raise errors.exceptions[0] from None
            raise

    def blocking_client(self, role: str) -> contextlib.AbstractAsyncContextManager[Client]:
        """A client of its own for a user that blocks on Redis (see
        :meth:`RedisHub.blocking_client`)."""
        if self._hub is None:
            raise self.unavailable(f"{self.what}'s Redis at {self.where} is not started")
        return self._hub.blocking_client(role)

    async def listen(
        self,
        channels: Sequence[str],
        deliver: Deliver,
        *,
        reconnect: tuple[float, float],
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Hand every message on ``channels`` to ``deliver`` until cancelled, on the process's
        one subscriber (see :meth:`RedisHub.listen`); started once subscribed. Watches Redis
        meanwhile (:meth:`watch`)."""
        hub = self._hub
        if hub is None:
            raise self.unavailable(f"{self.what}'s Redis at {self.where} is not started")
        try:
            async with self.watching():
                await hub.listen(
                    channels,
                    deliver,
                    timeout=self.timeout,
                    reconnect=reconnect,
                    task_status=task_status,
                )
        except RedisUnavailable as error:
            raise self._error("cannot be reached", error) from None

    def _error(self, how: str, error: RedisUnavailable) -> Exception:
        if isinstance(error, RedisUnsuitable):
            how = "cannot be used"
        return self.unavailable(f"{self.what}'s Redis at {self.where} {how}: {error.reason}")


class LinkedStore:
    """What every Redis store shares: its URL checked at once (so a wrong one fails before
    anything starts), a prefix that holds no brace (it would become every key's hash tag), one
    :class:`RedisLink` started and closed once by whoever serves it, and a readiness probe.
    A store names itself in errors (``what``) and says which error its callers catch
    (``unavailable``)."""

    what: ClassVar[str]
    unavailable: ClassVar[type[Exception]]

    def __init__(self, url: str, *, prefix: str = "trio_mcp:", timeout: float = 5.0) -> None:
        from ._client import check_url
        from ._keys import check_prefix

        check_url(url)
        self.url = url
        self.prefix = check_prefix(prefix)
        self.timeout = timeout
        self._link = RedisLink(url, what=self.what, unavailable=self.unavailable, timeout=timeout)

    @property
    def where(self) -> str:
        return self._link.where

    async def probe(self) -> None:
        """Whether its Redis answers now (for a readiness check), within its timeout."""
        await self._link.probe()

    async def start(self) -> None:
        """Connect; the store's own error if its Redis cannot be reached."""
        if self._link.started:
            raise RuntimeError(f"a {type(self).__name__} is started once: give each its own")
        await self._link.start()

    async def aclose(self) -> None:
        """Close the connections (in the task that started the store)."""
        await self._link.aclose()

    def _redis(self) -> Client:
        return self._link.client

    def _errors(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Any failure to talk to Redis, as the store's own error, bounded in time."""
        return self._link.errors()


def milliseconds(seconds: float) -> int:
    """A duration as Redis's expiries take it: whole milliseconds, at least one."""
    return max(1, int(seconds * 1000))
