"""What one process holds of one Redis: a connection pool for commands, shared by every store,
the bus and the relay, and one subscriber connection carrying every channel they listen to.

Theory of operation:

- :func:`hub_for` gives the process's :class:`RedisHub` for a URL (one per URL in each
  ``trio.run``: a :class:`trio.lowlevel.RunVar` holds them, so no state outlives a run).
- A user holds a lease (:meth:`RedisHub.acquire`, given back by :meth:`RedisHub.release`).
  The first lease opens the pool in its task, which owns it: coredis keeps its connections'
  tasks in a nursery, and a Trio nursery is closed by the task that opened it. More leases of
  that task are the owner's too; leases of other tasks share the pool. The owner closes it when
  its last lease goes, after waiting for the other tasks' leases, as a nursery waits for its
  children (logged, so a wait that never ends says why). In the HTTP app the first lease is
  the lifespan's (the event store or the session store) and the last to go, so nobody waits.
  The pool's connections live in the owner's cancel scopes: when the owner's task is
  cancelled they go with it, and the others get :class:`RedisUnavailable` until they let go.
  A hub whose owner is leaving is out of the registry: a user that comes meanwhile opens a new
  one.
- :meth:`RedisHub.listen` is a service: it hands what arrives on its channels to ``deliver``
  until cancelled. Listeners of one hub share one subscriber connection. The first of them
  hosts it (connects, reads, reconnects after a loss with a bounded exponential backoff,
  subscribing every channel again); the others add their channels to it. When the host leaves,
  another listener takes over and subscribes what remains (messages published in between are
  missed, as pub/sub always allows). Every message is decoded in one place
  (:meth:`RedisHub._dispatch`). On a Redis Cluster the subscriber is sharded (``SSUBSCRIBE``,
  a connection to the primary of each channel's shard), and its publishers say ``SPUBLISH``.
- Every failure to talk to Redis is a :class:`RedisUnavailable`, which each store turns into
  its own protocol's error (:class:`~trio_mcp.redis._link.RedisLink`).
- The hub's :class:`~trio_mcp.redis._circuit.Circuit` counts Redis as down once a ping fails
  (after a failed command, or the watcher's periodic one): its users are refused at once until
  Redis answers again (:meth:`RedisHub.command`).
- A user that blocks on Redis (the notification bus's ``XREAD BLOCK``) gets a connection of its
  own (:meth:`RedisHub.blocking_client`), so it never holds one of the pool's.

Connections are named (``CLIENT SETNAME``) ``trio_mcp:<pid>:pool``, ``trio_mcp:<pid>:sub`` and
(the bus's reader) ``trio_mcp:<pid>:bus``, so ``CLIENT LIST`` tells whose they are.

coredis is imported only when a hub opens (or meets an error): a server without Redis never
loads it.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

import trio

from ..otel import count_redis_error
from ._circuit import Circuit, CircuitOpen
from ._client import CLUSTER_FORM, connect, parse, redact

if TYPE_CHECKING:
    from ._client import Client

logger = logging.getLogger("trio_mcp.redis")

#: What a listener hands each message of its channels to (synchronous, never blocking).
Deliver = Callable[[bytes], None]


class RedisUnavailable(Exception):
    """Redis cannot be reached, or failed, or did not answer in time.

    ``where`` is the URL without its password, ``reason`` what went wrong, in words.
    """

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"Redis at {where}: {reason}")
        self.where = where
        self.reason = reason
        count_redis_error("unavailable")  # made only where a Redis call failed


class RedisUnsuitable(RedisUnavailable):
    """Redis answers, but cannot be the one the workers share: a replica (its writes are
    refused, and what it publishes reaches only its own subscribers) or a node of a Redis
    Cluster named by a plain URL (it answers CLUSTERDOWN, MOVED or CROSSSLOT to the commands
    of a plain client; a ``redis+cluster://`` URL is the way to it)."""


async def unsuitable(client: Client) -> str | None:
    """Why the Redis behind ``client`` cannot be shared (see :class:`RedisUnsuitable`), in
    words; None when it can, or when it will not say (an ACL or a managed Redis that refuses
    ``INFO``: then its first refused command says it). A cluster client checked its nodes
    when it learnt the cluster's layout."""
    import coredis
    import coredis.exceptions

    if isinstance(client, coredis.RedisCluster):
        return None
    try:
        info = await client.info("replication", "cluster")
    except coredis.exceptions.ResponseError:
        return None
    if str(info.get("cluster_enabled", 0)) == "1":
        return (
            "it is a node of a Redis Cluster (cluster_enabled:1), which a plain redis:// URL "
            f"cannot use: give the cluster's nodes as {CLUSTER_FORM}"
        )
    role = info.get("role")
    if role is not None and role != "master":
        return f"it is a replica (role:{role!s}), whose writes are refused: give the primary's URL"
    return None


def reason(error: BaseException) -> str:
    """The innermost message of an error (coredis raises some inside exception groups)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, trio.TooSlowError):
        return "no answer in time"
    return str(error) or type(error).__name__


def is_lost(error: BaseException) -> bool:
    """Whether ``error`` says Redis is out of reach (rather than a bug of ours)."""
    if isinstance(error, OSError | trio.TooSlowError | ExceptionGroup):  # TimeoutError included
        return True
    import anyio
    import coredis.exceptions

    # A connection closed under coredis (Redis gone mid-command) surfaces as anyio's.
    lost = (coredis.exceptions.RedisError, anyio.ClosedResourceError, anyio.BrokenResourceError)
    return isinstance(error, lost)


@contextlib.asynccontextmanager
async def talking(url: str, timeout: float) -> AsyncIterator[None]:
    """Any failure to talk to Redis in the block, as :class:`RedisUnavailable`, and the block
    bounded by ``timeout``."""
    try:
        with trio.fail_after(timeout):
            yield
    except Exception as error:
        failure = unavailable(redact(url), error)
        if failure is None or failure is error:
            raise
        raise failure from None


def unavailable(where: str, error: BaseException) -> RedisUnavailable | None:
    """What ``error`` says of Redis at ``where``: itself, if it says Redis is unavailable
    already; a :class:`RedisUnavailable` if Redis is out of reach (:func:`is_lost`); None if it
    is not Redis's doing (a bug of ours, a cancel), which passes on as it is."""
    if isinstance(error, RedisUnavailable):
        return error
    if isinstance(error, Exception) and is_lost(error):
        return RedisUnavailable(where, reason(error))
    return None


class Command:
    """One use of Redis by a user of a hub (:meth:`RedisHub.command`), as ``async with``.

    Refused at once while the circuit is open (and when it opens meanwhile); bounded by
    ``timeout``; a failure to reach Redis pings it (:meth:`Circuit.noticed`). Every failure is
    a :class:`RedisUnavailable`, or the user's own error (``failed``). One cancel scope serves
    both the bound (its deadline) and the circuit (which cancels it): every command of a store
    passes here, and a scope is most of what this costs (a class, not a generator-based
    manager, for the same reason)."""

    __slots__ = ("_failed", "_hub", "_scope", "_timeout")

    def __init__(
        self,
        hub: RedisHub,
        timeout: float,
        failed: Callable[[RedisUnavailable], Exception] | None = None,
    ) -> None:
        self._hub = hub
        self._timeout = timeout
        self._failed = failed
        self._scope: trio.CancelScope | None = None

    async def __aenter__(self) -> None:
        hub = self._hub
        circuit = hub.circuit
        if circuit.open:
            try:
                await circuit.admit(hub.ping)
            except CircuitOpen as refused:
                raise self._as_failed(RedisUnavailable(hub.where, str(refused))) from None
        scope = self._scope = trio.CancelScope(deadline=trio.current_time() + self._timeout)
        scope.__enter__()
        circuit.hold(scope)

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: Any
    ) -> bool:
        hub = self._hub
        circuit = hub.circuit
        scope = self._scope
        assert scope is not None
        circuit.let_go(scope)
        try:
            # True with no error too (nothing to take out): only an error can be caught.
            caught = scope.__exit__(kind, error, tb) and error is not None
        except BaseException as left:  # what a group became once the scope took its own out
            if not isinstance(left, Exception) or not is_lost(left):
                raise
            error, caught = left, False
        if caught:  # the scope's own cancel: the circuit opened, or the deadline passed
            if circuit.open:
                refusal = RedisUnavailable(hub.where, str(circuit.refusal()))
                raise self._as_failed(refusal) from None
            failure = RedisUnavailable(hub.where, reason(trio.TooSlowError()))
        elif error is None:
            return False
        else:
            found = unavailable(hub.where, error)
            if found is None:
                return False  # not Redis's doing (nor a cancel of this scope's): as it is
            failure = found
        await circuit.noticed(hub.ping)
        raise self._as_failed(failure) from None

    def _as_failed(self, failure: RedisUnavailable) -> Exception:
        return failure if self._failed is None else self._failed(failure)


_HUBS: trio.lowlevel.RunVar[dict[str, RedisHub]] = trio.lowlevel.RunVar("trio_mcp_redis_hubs")


def hub_for(url: str) -> RedisHub:
    """This process's hub for the Redis at ``url`` (a new one if none is open or opening)."""
    try:
        hubs = _HUBS.get()
    except LookupError:
        hubs = {}
        _HUBS.set(hubs)
    hub = hubs.get(url)
    if hub is None:
        hub = hubs[url] = RedisHub(url)
    return hub


def _name(role: str) -> str:
    return f"trio_mcp:{os.getpid()}:{role}"


def _pubsub(client: Client, channels: list[str]) -> Any:
    """The subscriber's subscription to ``channels``, never retrying by itself (the host
    reconnects). A cluster's channels are sharded (``SSUBSCRIBE``): each is read from the
    primary of its shard, where a sharded publish counts every subscriber of it."""
    import coredis
    from coredis.retry import NoRetryPolicy

    if isinstance(client, coredis.RedisCluster):
        return client.sharded_pubsub(
            channels=channels, ignore_subscribe_messages=True, retry_policy=NoRetryPolicy()
        )
    return client.pubsub(
        channels=channels, ignore_subscribe_messages=True, retry_policy=NoRetryPolicy()
    )


class RedisHub:
    """The pool and the subscriber of one process for the Redis at ``url`` (see the module
    docstring); obtained with :func:`hub_for`, never built by its users."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.where = redact(url)
        # -- the pool
        self._client: Client | None = None
        self._exit: contextlib.AsyncExitStack | None = None
        self._opening: trio.Event | None = None
        self._owner: trio.lowlevel.Task | None = None
        self._leases = 0
        self._owner_leases = 0
        self._others_gone: trio.Event | None = None
        # -- the subscriber
        self._channels: dict[str, list[Deliver]] = {}
        self._hosted = False
        self._pubsub: Any = None  # coredis's PubSub while connected
        self._live: set[str] = set()  # what the connected subscriber is subscribed to
        self._connections = 0  # how many times the subscriber connected
        self._changed = trio.Event()
        # -- the circuit
        self.circuit = Circuit(self.where, describe=reason)

    def __repr__(self) -> str:
        return f"RedisHub({self.where!r})"

    # -- the circuit ---------------------------------------------------------------------------

    async def ping(self) -> None:
        """One PING on the pool (the circuit's probe; unbounded here, bounded by the circuit)."""
        await self.client.ping()

    def command(
        self, timeout: float, failed: Callable[[RedisUnavailable], Exception] | None = None
    ) -> Command:
        """The block talks to Redis, bounded by ``timeout``, through the circuit (see
        :class:`Command`); each failure a :class:`RedisUnavailable`, or what ``failed`` makes
        of it."""
        return Command(self, timeout, failed)

    async def watch(self) -> None:
        """Ping Redis periodically until cancelled, so that a hung Redis opens the circuit
        before a command waits on it (one watcher per hub at a time; see the circuit)."""
        await self.circuit.watch(self.ping)

    # -- the pool ------------------------------------------------------------------------------

    @property
    def client(self) -> Client:
        """The pool's client; :class:`RedisUnavailable` while none is open."""
        if self._client is None:
            raise RedisUnavailable(self.where, "not connected")
        return self._client

    @property
    def users(self) -> int:
        """How many leases are held."""
        return self._leases

    async def acquire(self, timeout: float) -> bool:
        """Take a lease, opening the pool if nobody has (connect and ping within ``timeout``);
        whether it is the owner's. :class:`RedisUnavailable` if Redis cannot be reached."""
        while self._client is None and self._opening is not None:
            await self._opening.wait()
        if self._client is None:
            self._opening = trio.Event()
            try:
                await self._open(timeout)
            finally:
                opening, self._opening = self._opening, None
                opening.set()
            self._owner = trio.lowlevel.current_task()
        owner = trio.lowlevel.current_task() is self._owner
        self._leases += 1
        self._owner_leases += owner
        return owner

    async def _open(self, timeout: float) -> None:
        stack = contextlib.AsyncExitStack()
        try:
            # Entered outside the time bound: the pool's nursery lives until it closes.
            client = await stack.enter_async_context(
                connect(self.url, connect_timeout=timeout, client_name=_name("pool"))
            )
            with trio.fail_after(timeout):
                await client.ping()
                why = await unsuitable(client)
            if why is not None:
                raise RedisUnsuitable(self.where, why)
        except BaseException as error:
            with trio.CancelScope(shield=True), contextlib.suppress(BaseException):
                await stack.aclose()
            if isinstance(error, trio.Cancelled | RedisUnsuitable):
                raise
            raise RedisUnavailable(self.where, reason(error)) from None
        self._client, self._exit = client, stack

    async def probe(self, timeout: float) -> None:
        """Whether the pool's Redis answers, and is still one to share (a primary that a
        failover turned into a replica is not), within ``timeout``; :class:`RedisUnavailable`
        (or :class:`RedisUnsuitable`) if not. For a readiness check: one round trip or two;
        refused at once while the circuit is open."""
        try:
            await self.circuit.admit(self.ping)
        except CircuitOpen as refused:
            raise RedisUnavailable(self.where, str(refused)) from None
        client = self.client
        try:
            with trio.fail_after(timeout):
                await client.ping()
                why = await unsuitable(client)
        except Exception as error:
            if not is_lost(error):
                raise
            raise RedisUnavailable(self.where, reason(error)) from None
        if why is not None:
            raise RedisUnsuitable(self.where, why)

    async def release(self, owner: bool) -> None:
        """Give back a lease (``owner``: what :meth:`acquire` said). The owner's last one
        closes the pool, once the other tasks' leases are given back."""
        self._leases -= 1
        if not owner:
            if self._others_gone is not None and self._leases == 0:
                self._others_gone.set()
            return
        self._owner_leases -= 1
        if self._owner_leases:
            return
        with contextlib.suppress(LookupError):
            if _HUBS.get().get(self.url) is self:
                del _HUBS.get()[self.url]
        try:
            if self._leases:
                logger.warning(
                    "the connections to Redis at %s close when %d more users of them are done",
                    self.where,
                    self._leases,
                )
                self._others_gone = trio.Event()
                await self._others_gone.wait()
        finally:
            stack, self._exit, self._client, self._owner = self._exit, None, None, None
            if stack is not None:
                with trio.CancelScope(shield=True), contextlib.suppress(Exception):
                    await stack.aclose()

    # -- the subscriber ------------------------------------------------------------------------

    @property
    def subscribed(self) -> bool:
        """Whether the subscriber is connected."""
        return self._pubsub is not None

    def hearing(self, channel: str) -> int | None:
        """Which connection of the subscriber carries ``channel`` now (a number that changes
        each time the subscriber connects again), None while none does: what was published
        to it in between was lost."""
        return self._connections if self._pubsub is not None and channel in self._live else None

    async def listen(
        self,
        channels: Sequence[str],
        deliver: Deliver,
        *,
        timeout: float,
        reconnect: tuple[float, float],
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Hand every message on ``channels`` to ``deliver`` until cancelled.

        Started once they are subscribed; :class:`RedisUnavailable` if that cannot be done
        within ``timeout``. ``reconnect``: the first and the longest wait between attempts
        while this listener hosts the subscriber.
        """
        for channel in channels:
            self._channels.setdefault(channel, []).append(deliver)
        started = False

        def subscribed() -> None:
            nonlocal started
            if not started:
                started = True
                start_bound.deadline = math.inf
                task_status.started()

        try:
            with trio.CancelScope(deadline=trio.current_time() + timeout) as start_bound:
                while True:
                    if not self._hosted:
                        await self._host(subscribed, lambda: started, reconnect)
                    elif self._pubsub is not None and await self._join(channels, timeout):
                        subscribed()
                        await self._changed.wait()
                    else:
                        await self._changed.wait()
            raise RedisUnavailable(self.where, "the subscriber did not connect in time")
        finally:
            await self._leave(channels, deliver, timeout)

    async def _host(
        self,
        subscribed: Callable[[], None],
        started: Callable[[], bool],
        reconnect: tuple[float, float],
    ) -> None:
        """Be the subscriber: connect, read, and reconnect when lost, until cancelled; raises
        only when the first connection of a listener not yet started fails."""
        initial, longest = reconnect
        delay = initial
        again = False
        self._hosted = True
        try:
            while True:
                try:
                    channels = list(self._channels)
                    async with (
                        self._subscriber() as client,
                        _pubsub(client, channels) as pubsub,
                    ):
                        self._pubsub, self._live = pubsub, set(channels)
                        self._connections += 1
                        self._change()
                        try:
                            subscribed()
                            if again:
                                logger.warning("Redis subscriber: back at %s", self.where)
                            delay = initial
                            async for message in pubsub:
                                self._dispatch(message)
                        finally:
                            self._pubsub, self._live = None, set()
                            self._change()
                    problem = "the subscription ended"
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
                    if not started():
                        raise RedisUnavailable(self.where, reason(exc)) from None
                    problem = reason(exc)
                logger.error(
                    "Redis subscriber: lost Redis at %s (%s); subscribing again in %.1f s",
                    self.where,
                    problem,
                    delay,
                )
                again = True
                await trio.sleep(delay)
                delay = min(delay * 2, longest)
        finally:
            self._hosted = False
            self._change()

    def blocking_client(self, role: str) -> contextlib.AbstractAsyncContextManager[Client]:
        """A client of its own (one connection per node, named for ``role``) for a user that
        blocks on Redis, never retrying by itself; the user enters it, which opens it."""
        from coredis.retry import NoRetryPolicy

        # One connection; a cluster client keeps one per node (coredis raises a lower cap).
        single = parse(self.url).kind == "single"
        return connect(
            self.url,
            retry_policy=NoRetryPolicy(),
            stream_timeout=None,
            client_name=_name(role),
            **({"max_connections": 1} if single else {}),
        )

    def _subscriber(self) -> contextlib.AbstractAsyncContextManager[Client]:
        from coredis.retry import NoRetryPolicy

        return connect(
            self.url,
            retry_policy=NoRetryPolicy(),
            stream_timeout=None,
            client_name=_name("sub"),
        )

    async def _join(self, channels: Sequence[str], timeout: float) -> bool:
        """Subscribe the connected subscriber to what it lacks of ``channels``; whether it
        has them all now."""
        pubsub = self._pubsub
        missing = [channel for channel in channels if channel not in self._live]
        if not missing:
            return True
        try:
            with trio.fail_after(timeout):
                await pubsub.subscribe(*missing)
        except Exception as exc:
            if not is_lost(exc):
                raise
            return False  # the host hears of the loss and connects again, with these
        if self._pubsub is not pubsub:
            return False
        self._live.update(missing)
        return True

    async def _leave(self, channels: Sequence[str], deliver: Deliver, timeout: float) -> None:
        """Forget this listener; unsubscribe the channels nobody listens to any more."""
        unused = []
        for channel in channels:
            delivers = self._channels.get(channel, [])
            with contextlib.suppress(ValueError):
                delivers.remove(deliver)
            if not delivers:
                self._channels.pop(channel, None)
                if channel in self._live:
                    unused.append(channel)
        pubsub = self._pubsub
        if not unused or pubsub is None:
            return
        self._live.difference_update(unused)
        with trio.CancelScope(shield=True), trio.move_on_after(timeout):
            try:
                await pubsub.unsubscribe(*unused)
            except Exception as exc:
                if not is_lost(exc):
                    raise

    def _change(self) -> None:
        """Wake the listeners waiting for the subscriber to change (connected, lost, gone)."""
        self._changed.set()
        self._changed = trio.Event()

    def _dispatch(self, message: Any) -> None:
        """One message of the subscriber, to every listener of its channel."""
        if message.get("type") != "message":
            return
        channel, data = message.get("channel"), message.get("data")
        if isinstance(channel, bytes):
            channel = channel.decode(errors="replace")
        if not isinstance(data, bytes):
            return
        for deliver in list(self._channels.get(channel, ())):
            try:
                deliver(data)
            except Exception:
                logger.exception("delivering a message of %s failed", channel)
